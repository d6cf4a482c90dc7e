"""The kernel log's Xids in words, one line each, for every view (terminal, Markdown, the
no-dump triage): identical lines are counted, not repeated (a fault prints one per SM).
"""

from __future__ import annotations

from collections import Counter

from .kernellog import KernelLog, XidEvent, XidGpu

#: Distinct Xid lines a view shows; the JSON report has them all.
MAX_SHOWN = 20


def event_line(event: XidEvent) -> str:
    """One Xid in words: its number, class and NVIDIA's action, and its decoded payload."""
    head = f"Xid {event.xid} ({event.origin}"
    head += f", NVIDIA: {event.immediate_action})" if event.immediate_action else ")"
    return f"{head} {event.device}: {payload_words(event)}"


def payload_words(event: XidEvent) -> str:
    """What the payload says, decoded where its format is known, else its text."""
    if event.kind == "sm-exception":
        place = f"GPC {event.gpc}, TPC {event.tpc}" + (f", SM {event.sm}" if event.sm is not None else "")
        return f"{event.exception} on {place}"
    if event.kind == "esr":
        varying = [f"{word.register_address}={word.value}" for word in event.esr if word.varies]
        return (f"ESR code {event.esr_code} (undocumented)"
                + (f", words that vary between lines: {' '.join(varying)}" if varying else ""))
    if event.kind == "mmu-fault":
        said = ", ".join(part for part in (event.access, event.fault_meaning or event.fault_type) if part)
        return (f"MMU fault at VA {event.address} ({said}), engine {event.engine}, "
                f"client {event.client}")
    if event.kind == "containment":
        return (f"{'contained' if event.xid == 94 else 'uncontained'} error in {event.exception}, "
                f"GPU reset required: {'yes' if event.reset_required else 'no'}")
    if event.kind == "recovery-action":
        return f"recovery action now {event.recovery_to} (was {event.recovery_from})"
    if event.kind == "fallen-off-bus":
        return "the GPU has fallen off the bus"
    if event.kind == "gsp-timeout":
        return f"GSP: {event.exception}"
    caused = f" (after Xid {event.caused_by})" if event.caused_by is not None else ""
    return f"{event.text.rstrip('.')}{caused}" if event.text else f"no payload{caused}"


def log_lines(log: KernelLog) -> list[str]:
    """The log's Xids, counted, then what the ESR words do not say, the checks against the
    dump, and what was withheld or could not be read."""
    counted = Counter(event_line(event) for event in log.xids)
    lines = [f"{text}{f'  (x{count})' if count > 1 else ''}"
             for text, count in list(counted.items())[:MAX_SHOWN]]
    if len(counted) > MAX_SHOWN:
        lines.append(f"... {len(counted) - MAX_SHOWN} more kinds of Xid line in the JSON report")
    lines += [gpu_line(gpu) for gpu in log.gpus if gpu.bus_id is not None or gpu.ranks]
    if log.constant_esr_words:
        lines.append(f"ESR words the same on every ESR line of the log, so telling none of its "
                     f"faults apart: {' '.join(log.constant_esr_words)}")
    lines += [f"{check.what} {check.verdict}: {check.says}" for check in log.checks]
    if log.redacted:
        lines.append(f"withheld from this report: the {' and the '.join(log.redacted)} the log printed")
    lines += log.notes
    return lines


def gpu_name(gpu: XidGpu) -> str:
    """A GPU as the operator acts on it: ``PCI 0000:3a:00.0 (nvidia-smi index 2,
    CUDA_VISIBLE_DEVICES index 0)`` as far as the run knows it, else what the Xid line names.
    Never its UUID: this name goes into reports, which withhold a GPU's UUID (``nvidia-smi -i``
    takes the PCI address)."""
    where = [part for part in (
        f"nvidia-smi index {gpu.index}" if gpu.index is not None else None,
        f"CUDA_VISIBLE_DEVICES index {gpu.cuda_index}" if gpu.cuda_index is not None else None)
        if part]
    head = f"PCI {gpu.bus_id}" if gpu.bus_id else gpu.device
    return f"{head} ({', '.join(where)})" if where else head


def gpu_line(gpu: XidGpu) -> str:
    """A GPU the Xids name, how the operator names it, and its ranks (or why none is named)."""
    ranks = f"rank {', '.join(gpu.ranks)}" if gpu.ranks else f"rank unknown: {gpu.unmapped}"
    return f"{gpu.device} is {gpu_name(gpu)}; {ranks}"


def headline(log: KernelLog) -> str:
    """The section's first line: where the Xids were read and how many."""
    return f"kernel log {log.path}: {len(log.xids) + log.omitted_xids} Xid lines in {log.lines_read} lines"
