"""The payload of an Xid line, decoded from the formats the NVIDIA driver prints.

Where the formats come from (NVIDIA/open-gpu-kernel-modules, release 595.45.04, unless said):
- the line: ``NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u[ GPU-CI:%02u]]): %d, pid=%s, name=%s,
  %s%s`` (src/nvidia/src/kernel/gpu/rc/kernel_rc.c, ``XID_PRINT_WITH_ATTR``; pid and name only
  where a process is known; the last ``%s`` is `` caused by previous Xid %d`` on an Xid 45);
- Xid 31: the fault and access type names (kgmmuGetFaultTypeString_GP100 in
  src/nvidia/src/kernel/gpu/mmu/arch/pascal/kern_gmmu_gp100.c, kfifoGetFaultAccessTypeString_GV100
  in src/nvidia/src/kernel/gpu/fifo/arch/volta/kernel_fifo_gv100.c) and the address as
  ``0x%x_%08x`` (kern_gmmu_gv100.c); the Xid text itself (``MMU Fault: ENGINE GRAPHICS GPC0
  GPCCLIENT_T1_8 faulted @ 0x7fcd_ce700000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE``)
  is printed by the GSP firmware, whose source is not open: its shape is taken from real lines;
- Xid 94/95: ``%s: %s (0x%x, 0x%x). [physAddr: 0x%08llx ]RST: %s, D-RST: %s``
  (src/nvidia/src/kernel/gpu/arch/ampere/kern_gpu_error_cont_ga100.c, _gpuGenerateErrorLog);
- Xid 119: ``Timeout after %llus of waiting for RPC response from GPU%d GSP! Expected function
  %d (%s) ...`` (src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c);
- Xid 154: ``GPU recovery action changed from 0x%x (%s) to 0x%x (%s)`` (src/nvidia/src/kernel/
  gpu/gpu.c, with _gpuRecoveryActionName's names);
- Xid 79: ``GPU has fallen off the bus.`` (src/nvidia/arch/nvalloc/unix/src/osinit.c);
- Xid 13's texts (``Graphics SM Warp Exception on (GPC %d, TPC %d, SM %d): %s``, ``Graphics
  Exception: ESR 0x%x=0x%x ...``, ``Graphics Exception: ChID %04x, Class %08x, ...``) come from
  the GSP firmware too: their shape is taken from real lines (an H200 with driver 580.159.04, and
  the public excerpts in fixtures/logs/xid/PROVENANCE.md). The ESR words' meaning is not
  documented by NVIDIA: only the observed code of the first word's low byte is reported, as
  undocumented.
Xid 48, 63 and 64 are older drivers' texts of ECC and page retirement or row remapping; their
words are kept as text, an address taken where one is printed.
"""

from __future__ import annotations

import re
from typing import Any

from ..escape import surrogates_escaped
from ..report.kernellog import XidEvent
from .xidcatalog import xid_kind

#: How much of a message a report keeps.
TEXT_LIMIT = 300

_PROCESS = re.compile(r"^pid=(?P<pid>'?<?[^,]{0,32}?>?'?), name=(?P<name>[^,]{0,64}), ")
_PID_ONLY = re.compile(r"^pid=(?P<pid>'?<?[^,]{0,32}?>?'?), ")
_ON_UNIT = re.compile(r"Graphics (?P<unit>SM Warp|SM Global|SM|TEX|TPC|GPC|[A-Z]{2,5}) Exception on "
                      r"\(GPC (?P<gpc>\d{1,4}), TPC (?P<tpc>\d{1,4})(?:, SM (?P<sm>\d{1,4}))?\)"
                      r": (?P<what>.{1,120})")
_ESR = re.compile(r"\bESR\b(?P<words>(?:\s+0x[0-9a-fA-F]{1,16}=0x[0-9a-fA-F]{1,16}){1,16})")
_ESR_WORD = re.compile(r"0x(?P<register>[0-9a-fA-F]{1,16})=0x(?P<value>[0-9a-fA-F]{1,16})")
_GR_CHANNEL = re.compile(r"Graphics Exception: ChID (?P<chid>[0-9a-fA-F]{1,8}), Class "
                         r"(?P<cls>[0-9a-fA-F]{1,8})")
_MMU = re.compile(r"MMU Fault: ENGINE (?P<engine>[^@]{1,80}?) (?P<client>\S{1,60}) faulted @ "
                  r"0x(?P<va>[0-9a-fA-F_]{1,24})\. Fault is of type (?P<type>\w{1,60})"
                  r"(?: (?P<access>ACCESS_TYPE_\w{1,40}))?")
#: The open module's own NV_PRINTF of the same fault (kern_gmmu_gv100.c), in debug logs.
_MMU_DEBUG = re.compile(r"MMU Fault: ENGINE 0x[0-9a-fA-F]{1,8} \((?P<engine>[^()]{1,80}) "
                        r"(?P<client>[^()\s]{1,60})\) faulted @ 0x(?P<va>[0-9a-fA-F_]{1,24})\. "
                        r"Fault is of type 0x[0-9a-fA-F]{1,8} \((?P<type>\w{1,60})\)\. "
                        r"Access type is 0x[0-9a-fA-F]{1,8} \((?P<access>\w{1,40})\)")
_CHANNEL = re.compile(r"\b(?:channel 0x|Ch(?:annel)? ?)(?P<ch>[0-9a-fA-F]{1,8})\b")
_CAUSED_BY = re.compile(r" caused by previous Xid (?P<xid>\d{1,4})\s*$")
_CONTAINMENT = re.compile(r"^(?P<kind>Contained|Uncontained): (?P<unit>.{1,80}?) \((?P<loc>[^)]{0,40})\)"
                          r"\.(?: physAddr: 0x(?P<phys>[0-9a-fA-F]{1,16}))? RST: (?P<rst>Yes|No), "
                          r"D-RST: (?P<drst>Yes|No)")
_PHYS = re.compile(r"physAddr:? 0x(?P<phys>[0-9a-fA-F]{1,16})")
_GSP_TIMEOUT = re.compile(r"Timeout after (?P<secs>\d{1,10})s of waiting for RPC response from "
                          r"GPU\d{1,3} GSP! Expected function (?P<fn>\d{1,6}) \((?P<name>[^)]{0,60})\)")
_RECOVERY = re.compile(r"GPU recovery action changed from 0x[0-9a-fA-F]{1,8} \((?P<old>[^)]{0,40})\) "
                       r"to 0x[0-9a-fA-F]{1,8} \((?P<new>[^)]{0,40})\)")
#: What the GPU's UUID and board serial number look like where the driver prints them.
UUID = re.compile(r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
SERIAL = re.compile(r"(?i)(serial number(?: is)?:?\s+)\S+")

#: Xid 31's fault types, as kgmmuGetFaultTypeString names them, in a reader's words.
FAULT_MEANINGS = {
    "FAULT_PDE": "PDE missing", "FAULT_PDE_SIZE": "PDE size wrong", "FAULT_PTE": "PTE missing",
    "FAULT_VA_LIMIT_VIOLATION": "past the VA limit",
    "FAULT_UNBOUND_INST_BLOCK": "unbound instance block",
    "FAULT_PRIV_VIOLATION": "privilege violation", "FAULT_RO_VIOLATION": "write to read-only page",
    "FAULT_PITCH_MASK_VIOLATION": "pitch mask violation",
    "FAULT_WORK_CREATION": "work creation", "FAULT_UNSUPPORTED_APERTURE": "unsupported aperture",
    "FAULT_COMPRESSION_FAILURE": "compression failure",
    "FAULT_INFO_TYPE_UNSUPPORTED_KIND": "unsupported kind",
    "FAULT_INFO_TYPE_REGION_VIOLATION": "region violation",
    "FAULT_INFO_TYPE_POISONED": "poisoned memory",
    "FAULT_INFO_TYPE_ATOMIC_VIOLATION": "atomic violation",
}
#: Xid 31's access types, as kfifoGetFaultAccessTypeString names them.
ACCESSES = {
    "ACCESS_TYPE_VIRT_READ": "read", "ACCESS_TYPE_VIRT_WRITE": "write",
    "ACCESS_TYPE_VIRT_ATOMIC": "atomic", "ACCESS_TYPE_VIRT_PREFETCH": "prefetch",
    "ACCESS_TYPE_PHYS_READ": "physical read", "ACCESS_TYPE_PHYS_WRITE": "physical write",
    "ACCESS_TYPE_PHYS_ATOMIC": "physical atomic", "ACCESS_TYPE_PHYS_PREFETCH": "physical prefetch",
}
#: The first ESR word's low byte as observed on H200s: not documented. 0x0e, 0x0f and 0x17 on
#: driver 580.159.04 (eight faulting kernels); 0x10 in fixtures/gpu/h200-runs/pytest-run1.log.
OBSERVED_ESR_CODES = {0x0E: "Out Of Range Address", 0x0F: "Misaligned Address",
                      0x10: "Invalid Address Space", 0x17: "MMU Fault"}


def redact(text: str) -> tuple[str, list[str]]:
    """``text`` without the GPU's UUID and board serial number, and which of them it held."""
    withheld = []
    if UUID.search(text):
        text = UUID.sub("GPU-<uuid>", text)
        withheld.append("GPU UUID")
    if SERIAL.search(text):
        text = SERIAL.sub(r"\1<serial>", text)
        withheld.append("board serial number")
    return text, withheld


def decode(xid: int, device: str, message: str, line: int, time: str | None = None) -> XidEvent:
    """One Xid line's event: ``message`` is what follows ``NVRM: Xid (device): N,``."""
    message, _ = redact(surrogates_escaped(message.strip()))
    device = surrogates_escaped(device)
    fields: dict[str, Any] = {}
    if found := _PROCESS.match(message) or _PID_ONLY.match(message):
        pid = found["pid"].strip("'")
        fields["pid"] = int(pid) if pid.isdigit() else None
        fields["process"] = found.groupdict().get("name")
        message = message[found.end():]
    if found := _CAUSED_BY.search(message):
        fields["caused_by"] = int(found["xid"])
        message = message[:found.start()]
    fields.update(_payload(xid, message))
    kind = xid_kind(xid)
    return XidEvent(xid=xid, device=device[:60], line=line, time=time,
                    text=message[:TEXT_LIMIT], mnemonic=kind.mnemonic, origin=kind.origin,
                    immediate_action=kind.immediate_action,
                    investigatory_action=kind.investigatory_action, **fields)


def _payload(xid: int, message: str) -> dict[str, Any]:
    esr = _esr(message)
    if found := _ON_UNIT.search(message):  # its ESR words, where a driver prints them on this line
        return {**esr, "kind": "sm-exception", "gpc": int(found["gpc"]), "tpc": int(found["tpc"]),
                "sm": int(found["sm"]) if found["sm"] is not None else None,
                "exception": found["what"].split(" ESR ")[0].strip().rstrip(".")}
    if esr:
        return {**esr, "kind": "esr"}
    if found := _GR_CHANNEL.search(message):
        return {"kind": "graphics-channel", "channel": f"0x{int(found['chid'], 16):x}"}
    if found := _MMU.search(message) or _MMU_DEBUG.search(message):
        return _mmu(found)
    if found := _CONTAINMENT.search(message):
        fields: dict[str, Any] = {"kind": "containment", "exception": found["unit"].strip(),
                                  "reset_required": found["rst"] == "Yes",
                                  "drain_required": found["drst"] == "Yes"}
        if found["phys"]:
            fields["address"] = f"0x{int(found['phys'], 16):x}"
        return fields
    if found := _GSP_TIMEOUT.search(message):
        return {"kind": "gsp-timeout", "exception": f"no answer to {found['name'] or found['fn']} "
                f"in {found['secs']} s"}
    if found := _RECOVERY.search(message):
        return {"kind": "recovery-action", "recovery_from": found["old"], "recovery_to": found["new"]}
    if xid == 79 or "fallen off the bus" in message:
        return {"kind": "fallen-off-bus"}
    if xid in (48, 63, 64, 92, 140):
        fields = {"kind": "row-remap" if xid in (63, 64) else "ecc"}
        if found := _PHYS.search(message):
            fields["address"] = f"0x{int(found['phys'], 16):x}"
        return fields
    if found := _CHANNEL.search(message):
        return {"kind": "channel", "channel": f"0x{int(found['ch'], 16):x}"}
    return {}


def _esr(message: str) -> dict[str, Any]:
    """The ESR words of a line, and the first one's low byte with what it went with on H200s."""
    found = _ESR.search(message)
    if found is None:
        return {}
    words = [{"register_address": f"0x{word['register'].lower()}",
              "value": f"0x{word['value'].lower()}"} for word in _ESR_WORD.finditer(found["words"])]
    code = int(words[0]["value"], 16) & 0xFF
    seen = OBSERVED_ESR_CODES.get(code)
    note = f"ESR code 0x{code:02x} is undocumented" + (f"; on an H200 it went with {seen}" if seen else "")
    return {"esr": words, "esr_code": f"0x{code:02x}", "notes": [note]}


def _mmu(found: re.Match) -> dict[str, Any]:
    fault_type, access = found["type"], found["access"]
    fields: dict[str, Any] = {
        "kind": "mmu-fault", "engine": " ".join(found["engine"].split()), "client": found["client"],
        "address": f"0x{int(found['va'].replace('_', '') or '0', 16):x}",
        "fault_type": fault_type, "fault_meaning": FAULT_MEANINGS.get(fault_type),
        "access": ACCESSES.get(access) if access else None}
    notes = []
    if fault_type not in FAULT_MEANINGS:
        notes.append(f"fault type {fault_type} is not one the open kernel module names")
    if access and access not in ACCESSES:
        notes.append(f"access type {access} is not one the open kernel module names")
    if notes:
        fields["notes"] = notes
    return fields
