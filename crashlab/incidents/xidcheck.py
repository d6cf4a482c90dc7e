"""The kernel log's Xids held against the GPU dump of the same incident: the SMs Xid 13 names,
its exception, and an Xid 31 address against the explanation's computed one.

Two witnesses of one fault: where they agree, each corroborates the other; where an Xid 31
address is not in the region of the address the explanation computed (the 4 KiB page, or for a
missing PDE the 2 MiB a page-directory entry maps), the explanation is contradicted (or the Xid
is another process's: virtual addresses are per process).
"""

from __future__ import annotations

import re

from ..report.kernellog import KernelLog, XidCheck, XidEvent
from ..report.model import Fault, TriageReport

#: The MMU reports a faulting address with page granularity: the low 12 bits are not an offset.
PAGE = 4096
#: What one lowest page-directory entry (PDE0) covers: VA bits 28:21 index it, so each entry
#: maps 2 MiB (kgmmuFmtInitLevels_GH10X in NVIDIA's open-gpu-kernel-modules,
#: src/nvidia/src/kernel/gpu/mmu/arch/hopper/kern_gmmu_fmt_gh10x.c: "PD0 [28:21] / PT_LARGE
#: [28:21] (2MB page)"). A FAULT_PDE leaves at least that region unmapped (a higher missing PDE
#: leaves more), so any address of the warp in it faults alike and the MMU reports one of them.
PDE0_COVERAGE = 2 * 1024 * 1024
#: The GPU an Xid line names: ``PCI:0000:3b:00`` (domain, bus, device; older drivers leave out
#: ``PCI:``).
_PCI = re.compile(r"(?:PCI:)?[0-9a-fA-F]{4,8}:(?P<bus>[0-9a-fA-F]{2}):(?P<device>[0-9a-fA-F]{2})")
#: Xid 13's exception texts whose CUDBG exception carries another name.
_SAME_EXCEPTION = {"mmu fault": "illegal address"}
#: Why a (GPC, TPC, SM) cannot be matched with a dump's SM id.
NO_SM_MAPPING = ("which is which cannot be said: the Xid numbers SMs physically (GPC, TPC, SM), "
                 "the dump by the logical SM id cuda-gdb shows, and NVIDIA documents no mapping "
                 "between them (it depends on which TPCs the chip has fused off)")


def check(log: KernelLog, report: TriageReport, host: str | None = None) -> list[XidCheck]:
    """How the log's Xid 13 and Xid 31 lines stand against the report's faults; HOST, where
    known, is the host the dump's run crashed on. A log none of whose GPUs is one of the
    dump's is another machine's (or other GPUs'): it is said, and held against nothing."""
    checks = _host(log, host)
    elsewhere = _elsewhere(log, report)
    if elsewhere is not None:
        return [elsewhere, *checks]
    warp_lines = [event for event in log.xids if event.kind == "sm-exception" and event.xid == 13]
    if warp_lines and report.faults:
        checks.append(_sms(warp_lines, report.faults))
        checks.append(_exception(warp_lines, report.faults[0]))
    for event in log.xids:
        if event.kind == "mmu-fault" and event.address is not None:
            checks.append(_address(event, report.faults[0] if report.faults else None))
    return checks


def _elsewhere(log: KernelLog, report: TriageReport) -> XidCheck | None:
    """The check that says the log is not the dump's machine, where the GPUs its Xid lines name
    (their PCI bus and device: the dump's device table records no PCI domain) and the dump's
    are both known and none is shared; None otherwise."""
    named = {gpu for gpu in (_pci(event.device) for event in log.xids) if gpu is not None}
    dumped = {(device.pci_bus_id, device.pci_dev_id) for device in report.devices
              if device.pci_bus_id is not None and device.pci_dev_id is not None}
    if not named or not dumped or named & dumped:
        return None
    return XidCheck(what="machine", verdict="not comparable",
                    says=f"none of the log's GPUs (PCI {_listed(named)}) is one of the dump's "
                         f"(PCI {_listed(dumped)}): the log is not this dump's machine, so its "
                         "Xids are held against nothing here")


def _host(log: KernelLog, host: str | None) -> list[XidCheck]:
    """A check that says the log's syslog prefixes name another host than the run's."""
    named = sorted({event.host for event in log.xids if event.host})
    if host is None or not named or host in named:
        return []
    return [XidCheck(what="host", verdict="differs",
                     says=f"the log's lines name host {', '.join(named)}, the dump's run "
                          f"{host}: the log may be another machine's")]


def _pci(device: str) -> tuple[int, int] | None:
    found = _PCI.search(device)
    return (int(found["bus"], 16), int(found["device"], 16)) if found else None


def _listed(gpus: set[tuple[int, int]]) -> str:
    shown = sorted(gpus)
    return ", ".join(f"{bus:02x}:{device:02x}" for bus, device in shown[:8]) + \
        (", ..." if len(shown) > 8 else "")


def _sms(lines: list[XidEvent], faults: list[Fault]) -> XidCheck:
    named = sorted({(event.gpc, event.tpc, event.sm) for event in lines},
                   key=lambda unit: tuple(-1 if part is None else part for part in unit))
    dumped = sorted({sm for fault in faults for sm in (fault.sms or [fault.sm])})
    shown = ", ".join(f"({gpc}, {tpc}, {sm})" for gpc, tpc, sm in named[:8])
    says = (f"Xid 13 names {len(named)} SM{'s' if len(named) != 1 else ''} (GPC, TPC, SM: {shown}"
            f"{', ...' if len(named) > 8 else ''}), the dump {len(dumped)} faulting "
            f"SM{'s' if len(dumped) != 1 else ''} (ids {', '.join(map(str, dumped[:8]))}"
            f"{', ...' if len(dumped) > 8 else ''})")
    if len(named) == len(dumped):
        return XidCheck(what="sms", verdict="agrees", says=f"{says}: as many; {NO_SM_MAPPING}")
    return XidCheck(what="sms", verdict="differs",
                    says=f"{says}: not as many (the log may hold other faults, or the dump "
                         f"another incident's); {NO_SM_MAPPING}")


def _exception(lines: list[XidEvent], fault: Fault) -> XidCheck:
    texts = sorted({event.exception for event in lines if event.exception})
    wanted = _words(fault.exception.name.removeprefix("CUDBG_EXCEPTION_"))
    for scope in ("warp ", "lane ", "device ", "cluster "):
        wanted = wanted.removeprefix(scope)
    said = [text for text in texts if _SAME_EXCEPTION.get(_words(text), _words(text)) == wanted]
    listing = "; ".join(texts[:4])
    if said:
        return XidCheck(what="exception", verdict="agrees",
                        says=f"Xid 13 says {said[0]}, the dump {fault.exception.display}")
    return XidCheck(what="exception", verdict="differs",
                    says=f"Xid 13 says {listing}, the dump {fault.exception.display}")


def _address(event: XidEvent, fault: Fault | None) -> XidCheck:
    assert event.address is not None
    xid_va = int(event.address, 16)
    explanation = fault.explanation if fault is not None else None
    if explanation is None or explanation.address is None:
        return XidCheck(what="address", verdict="not comparable",
                        says=f"Xid 31 faulted at {event.address}; the dump's explanation computed "
                             "no address to hold it against")
    if explanation.space not in ("global", "generic"):
        return XidCheck(what="address", verdict="not comparable",
                        says=f"Xid 31 faulted at {event.address}; the explained access is to "
                             f"{explanation.space} memory, whose addresses the MMU does not see")
    computed = int(explanation.address, 16)
    size, unit = _granularity(event.fault_type)
    start = computed & ~(size - 1)
    region = (f"the {unit} 0x{start:x}-0x{start + size - 1:x}" if size > PAGE
              else f"the {unit} 0x{start:x}")
    if xid_va & ~(size - 1) == start:
        return XidCheck(what="address", verdict="agrees", granularity=unit,
                        says=f"Xid 31 faulted at {event.address}, in {region}, as is the "
                             f"explanation's computed address {explanation.address}: the MMU "
                             "corroborates the explanation")
    return XidCheck(what="address", verdict="differs", granularity=unit,
                    says=f"Xid 31 faulted at {event.address}, not in {region} that holds the "
                         f"explanation's computed address {explanation.address}: it contradicts "
                         "the explanation, unless the Xid is another process's or another "
                         "occurrence's (virtual addresses are per process)")


def _granularity(fault_type: str | None) -> tuple[int, str]:
    """The region an Xid 31 address is compared at, in words: a missing PDE unmaps at least
    the 2 MiB one lowest page-directory entry maps (Hopper's page tables), so any address of
    the warp there faults alike; any other fault (a missing PTE, a read-only page) is the 4 KiB
    page the MMU reports."""
    if fault_type == "FAULT_PDE":
        return PDE0_COVERAGE, "2 MiB one page-directory entry (PDE0) maps"
    return PAGE, "4 KiB page"


def _words(text: str) -> str:
    return " ".join(text.lower().replace("_", " ").replace("-", " ").split())
