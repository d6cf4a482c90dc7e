"""What one crash tells its signature's facets (records.FleetFacts), read from what the crash left:
the dump's triage (the fault, its kernel and the kernels beside it), the environment serve
captured at launch (the GPU's UUID and PCI address, the CUDA and package versions), the launch
line (the model and the parallel sizes, read as SGLang's argparse reads them), and the incident
(uptime from the incarnation's start, requests in the request dumps, the Xid lines and their
ESR words).

A fact the crash did not leave stays None: the facets count it as unknown, never guess it.
"""

from __future__ import annotations

from datetime import datetime

from ..env import Environment
from ..incidents.xid import find_xid
from ..incidents.xiddecode import decode
from ..launchline import SGLANG_EP, SGLANG_MODEL, SGLANG_PP, SGLANG_TP, option_value
from ..report.kernellog import XidEvent
from ..report.model import TriageReport
from ..report.run import Incident, exception_line
from ..vocabulary import XID
from .records import FleetFacts

#: The distributions of flashinfer and sgl-kernel, under each name they were published as.
FLASHINFER = ("flashinfer-python", "flashinfer")
SGL_KERNEL = ("sgl-kernel", "sglang-kernel")


def of_triage(report: TriageReport) -> dict:
    """The first fault's PC, offset, kernel, exception, source line, device and owner, and the
    other kernels resident on its device."""
    if not report.faults:
        return {}
    fault = report.faults[0]
    kernel = fault.kernel.name if fault.kernel is not None else fault.function
    source = fault.sass.source[0] if fault.sass.source else None
    owner = fault.owner
    return {"pc": fault.pc, "function_offset": fault.function_offset, "kernel": kernel,
            "exception": fault.exception.display, "gpu_index": fault.device,
            "source_line": f"{source.file}:{source.line}" if source is not None else None,
            "owner": " ".join(filter(None, (owner.artifact, owner.version))) if owner else None,
            "co_resident": sorted({k.name for k in report.kernels
                                   if k.device == fault.device and k.name != kernel})}


def of_environment(environment: Environment | None, gpu_index: int | None,
                   visible: str | None = None) -> dict:
    """The faulting GPU's UUID and PCI address, CUDA, flashinfer and sgl-kernel. The dump's
    device index is the process's CUDA ordinal: under CUDA_VISIBLE_DEVICES (VISIBLE, from the
    launch) the ordinal names that list's entry, an index or a UUID; a MIG entry or one past
    the list names no GPU of the environment's."""
    if environment is None:
        return {}
    versions = {p.name: p.version for p in environment.packages if p.version}
    gpu = _visible_gpu(environment, gpu_index, visible)
    torch = environment.torch
    return {"gpu_uuid": gpu.uuid if gpu else None, "pci_address": gpu.bus_id if gpu else None,
            "cuda": (torch.cuda if torch is not None else None) or environment.driver.cuda_version,
            "flashinfer": _first(versions, FLASHINFER), "sgl_kernel": _first(versions, SGL_KERNEL)}


def _visible_gpu(environment: Environment, ordinal: int | None, visible: str | None):
    if ordinal is None:
        return None
    if visible is None:
        return next((g for g in environment.gpus if g.index == ordinal), None)
    entries = [entry.strip() for entry in visible.split(",")]
    entry = entries[ordinal] if ordinal < len(entries) else ""
    if entry.isdigit():
        return next((g for g in environment.gpus if g.index == int(entry)), None)
    if entry.startswith("GPU-"):  # CUDA takes a unique prefix of a UUID
        found = [g for g in environment.gpus if g.uuid and g.uuid.startswith(entry)]
        return found[0] if len(found) == 1 else None
    return None


def of_launch(argv: list[str]) -> dict:
    """The served model and the tensor, pipeline and expert parallel sizes of the launch line."""
    return {"model": option_value(argv, SGLANG_MODEL), "tp_size": _size(argv, SGLANG_TP),
            "pp_size": _size(argv, SGLANG_PP), "ep_size": _size(argv, SGLANG_EP)}


def of_incident(incident: Incident, first_failure: float) -> dict:
    """Uptime at the first failure, requests in the request dumps, the Xid numbers and ESR
    words of the incident's kernel-log lines, and the exception a Python crash raised (its
    traceback's exception line; a dump's triage names a GPU fault's exception instead)."""
    started = datetime.fromisoformat(incident.started_at).timestamp()
    counted = [r.requests for r in incident.request_dumps if r.requests is not None]
    xids = _decoded(incident)
    numbers = sorted({event.xid for event in xids})
    return {"uptime_s": max(0, int(first_failure - started)),
            "requests_in_dumps": sum(counted) if counted else None,
            "xid": ", ".join(map(str, numbers)) or None, "esr": _esr_facet(xids),
            "exception": exception_line(incident.findings)}


def _decoded(incident: Incident) -> list[XidEvent]:
    events = []
    for finding in incident.findings:
        found = find_xid(finding.text) if finding.kind == XID else None
        if found is not None:
            match, _ = found
            events.append(decode(int(match["xid"][:6]), match["device"],
                                 finding.text[match.end():].lstrip(", "), 0))
    return events


def _esr_facet(xids: list[XidEvent]) -> str | None:
    """What of Xid 13 varies with the fault: the first ESR word's low byte (undocumented) and
    the exception text; never the register addresses (one per SM) or the words that are the
    same on every line of a GPU."""
    said = sorted({event.esr_code for event in xids if event.esr_code}) + \
        sorted({event.exception for event in xids if event.xid == 13 and event.exception})
    return ", ".join(said) or None


def merged(*parts: dict) -> FleetFacts:
    """One FleetFacts from the parts, a later part's known value over an earlier's None."""
    facts: dict = {}
    for part in parts:
        facts.update({k: v for k, v in part.items() if v is not None or k not in facts})
    return FleetFacts(**facts)


def _first(versions: dict[str, str], names: tuple[str, ...]) -> str | None:
    return next((versions[name] for name in names if name in versions), None)


def _size(argv: list[str], flags: tuple[str, ...]) -> int | None:
    value = option_value(argv, flags)
    return int(value) if value is not None and value.isdigit() else None
