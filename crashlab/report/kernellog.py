"""The driver's Xid lines a report carries, decoded, and how they stand against the dump.

A kernel log is a stranger's text: every string here was read from it, redacted (the GPU's UUID
and board serial number never reach a report) and cut, and views print it as data.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..published import ClosedModel as _Model
from ..published import empty_list
from ..vocabulary import XidOrigin
from .advice import Advice
from .places import HexAddress
from .signature import CrashSignature
from .tool import Tool

#: What a decoded Xid payload is.
PayloadKind = Literal["sm-exception", "esr", "graphics-channel", "mmu-fault", "channel",
                      "ecc", "row-remap", "containment", "fallen-off-bus", "gsp-timeout",
                      "recovery-action", "other"]
#: How a piece of the kernel log stands against the dump of the same incident.
CheckVerdict = Literal["agrees", "differs", "not comparable"]


class EsrWord(_Model):
    """One ``register=value`` pair of an Xid 13 ESR line."""

    register_address: HexAddress
    """the register's address, as the driver prints it"""
    value: HexAddress
    """its value"""
    varies: bool | None = None
    """whether its value differs between the log's ESR lines at this register offset (the
    address's low 12 bits: each SM has its own copy of the register); null where only one line
    has it. A word that never varies is not evidence about the fault (a constant of the GPU)."""


class XidEvent(_Model):
    """One ``NVRM: Xid`` line, its payload decoded where NVIDIA's format is known."""

    xid: int
    """the Xid number"""
    device: str
    """what the parentheses name: the PCI address, and the MIG instance where printed"""
    line: int
    """its line number in the log (1-based)"""
    time: str | None = None
    """when, as the line's prefix gave it (ISO 8601); null where the prefix gives no date"""
    host: str | None = None
    """the host its syslog or journalctl prefix names; null where the prefix names none"""
    pid: int | None = None
    """the process the driver named, where it named one"""
    process: str | None = None
    """that process's name"""
    text: str
    """the message after the process, redacted and cut to 300 characters"""
    mnemonic: str
    """NVIDIA's name for the Xid (crashlab.incidents.xidcatalog); empty where not catalogued"""
    origin: XidOrigin
    """software, hardware or unknown, from NVIDIA's catalog"""
    immediate_action: str | None = None
    """NVIDIA's resolution bucket (immediate action), as NVIDIA spells it"""
    investigatory_action: str | None = None
    """NVIDIA's investigatory action"""
    kind: PayloadKind = "other"
    """what the payload is, where decoded"""
    gpc: int | None = None
    """Xid 13: the GPC, TPC and SM the driver names (physical numbering)"""
    tpc: int | None = None
    """Xid 13: the TPC within the GPC"""
    sm: int | None = None
    """Xid 13: the SM within the TPC; null where the line names a TPC only"""
    exception: str | None = None
    """Xid 13: the exception's text (``Out Of Range Address``)"""
    esr: list[EsrWord] = Field(default_factory=empty_list)
    """Xid 13: the ESR words, in the driver's order"""
    esr_code: HexAddress | None = None
    """Xid 13: the low byte of the first ESR word. Undocumented; on an H200 (driver 580) it
    followed the exception: 0x0e out of range, 0x0f misaligned, 0x17 MMU fault."""
    engine: str | None = None
    """Xid 31: the faulting engine (``GRAPHICS GPC0``)"""
    client: str | None = None
    """Xid 31: the MMU client (``GPCCLIENT_T1_8``)"""
    address: HexAddress | None = None
    """Xid 31: the faulting virtual address; Xid 48/94/95: the physical address, where printed"""
    fault_type: str | None = None
    """Xid 31: NVIDIA's fault type (``FAULT_PDE``)"""
    fault_meaning: str | None = None
    """Xid 31: what the fault type says (``PDE missing``)"""
    access: str | None = None
    """Xid 31: read, write, atomic, prefetch (``physical read`` for a physical access)"""
    channel: HexAddress | None = None
    """the channel the driver reset or tore down, where printed"""
    caused_by: int | None = None
    """Xid 45: the earlier Xid the driver names as the cause"""
    reset_required: bool | None = None
    """Xid 94/95: the driver's RST (GPU reset required)"""
    drain_required: bool | None = None
    """Xid 94/95: the driver's D-RST (drain and reset)"""
    recovery_from: str | None = None
    """Xid 154: the recovery action before (``None``)"""
    recovery_to: str | None = None
    """Xid 154: the recovery action now (``GPU Reset Required``)"""
    notes: list[str] = Field(default_factory=empty_list)
    """what the decoding could not say, or says is undocumented"""


class XidGpu(_Model):
    """One GPU the log's Xid lines name, placed among the run's GPUs and ranks where the run
    knows them (its environment.json, launch.json and processes): how the operator names it."""

    device: str
    """what the Xid lines' parentheses name (``PCI:0000:3b:00``)"""
    bus_id: str | None = None
    """its PCI address as nvidia-smi spells it (``0000:3b:00.0``); null where the run lists no
    GPU there"""
    index: int | None = None
    """nvidia-smi's index"""
    cuda_index: int | None = None
    """its place in the server's CUDA_VISIBLE_DEVICES (the CUDA device number the server used);
    nvidia-smi's index where the variable was not set"""
    ranks: list[str] = Field(default_factory=empty_list)
    """the ranks that used it (SGLang's tags: ``TP0``)"""
    unmapped: str | None = None
    """why no rank is named; null where one is"""


class XidCheck(_Model):
    """One piece of the kernel log held against the dump of the same incident."""

    what: Literal["machine", "host", "sms", "exception", "address"]
    """what was compared: the log's GPUs against the dump's (PCI addresses), the log's host
    against the run's, the faulting SMs, the exception, the faulting address"""
    verdict: CheckVerdict
    """agrees, differs, or not comparable"""
    says: str
    """one line for a human; a difference that refutes the dump's explanation says so"""
    granularity: str | None = None
    """address: the region the two addresses were compared at (``2 MiB region one
    page-directory entry (PDE0) covers`` for an Xid 31 FAULT_PDE, ``4 KiB page`` otherwise);
    null for other checks and where not comparable"""


class KernelLog(_Model):
    """The Xid lines of a kernel log given to inspect or report, decoded."""

    path: str
    """the log's path as given"""
    lines_read: int
    """lines read"""
    cut: bool = False
    """true where the log was longer than crashlab reads: only its start was read"""
    xids: list[XidEvent] = Field(default_factory=empty_list)
    """the Xid lines, in the log's order (at most 2,000)"""
    omitted_xids: int = 0
    """Xid lines past the 2,000 kept"""
    redacted: list[str] = Field(default_factory=empty_list)
    """what was withheld: the GPU UUID, the board serial number (never their values)"""
    constant_esr_words: list[str] = Field(default_factory=empty_list)
    """ESR words whose value was the same on every ESR line of the log (``0x…728=0x1f81fb60``,
    the register's offset within its SM): they tell none of its faults apart (on an H200 the
    last two words were the same across four kinds of exception: constants of the GPU)"""
    gpus: list[XidGpu] = Field(default_factory=empty_list)
    """each GPU the Xid lines name, with the ranks that used it where the run knows them"""
    checks: list[XidCheck] = Field(default_factory=empty_list)
    """how the Xids stand against the dump; empty without one"""
    notes: list[str] = Field(default_factory=empty_list)
    """what could not be read"""


class XidTriage(_Model):
    """An incident triaged from a kernel log alone, with no GPU dump: what inspect --kernel-log
    prints with --json."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """the crashlab that made it"""
    summary: str
    """one line: the fault, its class, and why the kernel is unknown"""
    origin: XidOrigin
    """the first Xid's class: software, hardware or unknown (NVIDIA's catalog)"""
    kernel: str
    """which kernel faulted: unknown without a GPU dump, and what would have kept one"""
    signature: CrashSignature | None = None
    """what makes repeats of this incident one: the Xid, its fault type and access, the request
    dump's shape where one was given; null where the log holds no Xid"""
    kernel_log: KernelLog
    """the log's Xid lines, decoded"""
    advice: Advice | None = None
    """what to do next and why (crashlab.advice) from the Xids alone: drain the GPU a hardware
    Xid (or the line's reset or drain flag) names, else restart; null where none was weighed"""

    @property
    def found(self) -> bool:
        return bool(self.kernel_log.xids)
