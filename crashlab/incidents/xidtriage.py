"""An incident triaged from the driver's Xid lines alone, when no GPU dump was kept.

Most servers run with coredumps off; the kernel log still says what faulted and where in the
address space, and NVIDIA's catalog says whose fault it is. The kernel stays unknown, and the
triage says what would have named it. The signature holds what repeats of one bug share (the
Xid, its fault type and access, the request dump's shape where given), never the address: a
virtual address moves between runs.
"""

from __future__ import annotations

from ..report.kernellog import KernelLog, XidEvent, XidGpu, XidTriage
from ..report.signature import CrashSignature, seal
from ..report.tool import Tool
from ..report.xidtext import payload_words
from ..version import __version__
from .xidgpus import RunPlaces, place

#: What the kernel is without a dump, and what would have kept one.
NO_DUMP = "unknown: no GPU dump (serve --coredump would have kept one)"
_FIRST_READ = ("mmu-fault", "sm-exception", "containment", "fallen-off-bus", "gsp-timeout")


def triage(log: KernelLog, request_shape: str | None = None,
           run: RunPlaces | None = None) -> XidTriage:
    """The incident the log's Xids describe; ``request_shape``: the request dump's shape (its
    requests and their lengths, as replay lists them), where one came with the log; RUN: what
    the run the log is of recorded of its GPUs and ranks, where one was given."""
    log.gpus = place(log, run)
    first = _first(log.xids)
    if first is None:
        return XidTriage(tool=Tool(version=__version__), origin="unknown", kernel=NO_DUMP,
                         summary=f"no Xid line in {log.lines_read} lines of {log.path}",
                         kernel_log=log)
    summary = f"{_what(first, log)}: {first.origin}; kernel {NO_DUMP}{_unranked(log)}"
    return XidTriage(tool=Tool(version=__version__), summary=summary, origin=first.origin,
                     kernel=NO_DUMP, signature=_signature(first, request_shape), kernel_log=log)


def _first(xids: list[XidEvent]) -> XidEvent | None:
    """The Xid a human reads first: a hardware one NVIDIA acts on (it decides what to do with
    the GPU), else the first of the decoded faults, else the first line."""
    for event in xids:
        if event.origin == "hardware" and event.immediate_action not in (None, "IGNORE"):
            return event
    for kind in _FIRST_READ:
        for event in xids:
            if event.kind == kind:
                return event
    return xids[0] if xids else None


def _what(first: XidEvent, log: KernelLog) -> str:
    xids = log.xids
    if first.kind == "mmu-fault":
        same = list(dict.fromkeys(event.device for event in xids
                                  if event.kind == "mmu-fault" and event.address == first.address))
        at = " at the same VA" if len(same) > 1 else " at VA"
        said = ", ".join(part for part in (first.access, first.fault_meaning or first.fault_type)
                         if part)
        return f"MMU fault on {_who(same, log.gpus)}{at} {first.address} ({said})"
    if first.kind == "sm-exception":
        sms = {(event.device, event.gpc, event.tpc, event.sm) for event in xids
               if event.kind == "sm-exception" and event.exception == first.exception}
        return f"Xid 13 {first.exception} on {len(sms)} SM{'s' if len(sms) != 1 else ''}"
    return f"Xid {first.xid} {payload_words(first)}"


def _who(devices: list[str], gpus: list[XidGpu]) -> str:
    """``ranks TP0 and TP1`` where the run placed every GPU on a rank; else the GPUs."""
    placed = {gpu.device: gpu for gpu in gpus}
    ranks = [rank for device in devices for rank in (placed[device].ranks if device in placed else [])]
    if ranks and all(device in placed and placed[device].ranks for device in devices):
        ranks = list(dict.fromkeys(ranks))
        listed = ranks[0] if len(ranks) == 1 else f"{', '.join(ranks[:-1])} and {ranks[-1]}"
        return f"rank{'s' if len(ranks) > 1 else ''} {listed}"
    return f"{len(devices)} GPUs ({', '.join(devices)})" if len(devices) > 1 else f"GPU {devices[0]}"


def _unranked(log: KernelLog) -> str:
    """Why the log's first GPU with no rank has none ("" where every GPU has one)."""
    why = next((gpu.unmapped for gpu in log.gpus if gpu.unmapped), None)
    return f"; rank unknown: {why}" if why else ""


def _signature(first: XidEvent, request_shape: str | None) -> CrashSignature:
    parts = [f"xid {first.xid}", first.kind]
    if first.kind == "mmu-fault":
        parts += [first.fault_type or "?", first.access or "?"]
    elif first.kind == "sm-exception":
        parts.append(first.exception or "?")
    if request_shape:
        parts.append(f"requests {request_shape}")
    title = f"Xid {first.xid} {' '.join(parts[1:])}"
    notes = ["made from the kernel log alone: no GPU dump named the kernel",
             "the faulting address is left out: virtual addresses move between runs"]
    return seal("gpu-xid", parts, title, f"\"Xid {first.xid}\" {first.mnemonic}".strip(), notes)
