"""The advice's evidence as a run's report holds it: the Xid lines of its kernel log, each
classed by NVIDIA's catalogue, the known-fixes row its faulting kernel's owner matched (a dump's
evidence: crashlab.advice.dump), else the row keyed on its signature (a crash with no GPU dump
has no owner). What only the index knows (the signature's history, the GPU's) and what only
serve knows (its recent restarts) is added by them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..incidents.xid import from_findings
from ..incidents.xidcatalog import xid_kind
from ..owner import fixes
from ..owner.fixes import FixTable
from ..report.advice import Advice
from ..report.kernellog import KernelLog, XidEvent
from ..report.run import Finding, Incident, RunReport
from ..report.signature import CrashSignature
from ..report.xidtext import gpu_name
from .decide import ClassedXid, Evidence, advise
from .dump import of_triage


def classed(xid: int, device: str) -> ClassedXid:
    return ClassedXid(xid=xid, device=device, kind=xid_kind(xid))


def xid_findings(findings: Iterable[Finding]) -> tuple[ClassedXid, ...]:
    """A run's Xid findings, each classed by its number."""
    return tuple(classed(line.xid, line.device) for line in from_findings(list(findings), host=""))


def of_kernel_log(log: KernelLog) -> tuple[ClassedXid, ...]:
    """A kernel log's decoded Xids (inspect and report --kernel-log), each classed, with what
    the line itself says of the GPU's state, and its GPU named as the operator acts on it where
    the run placed it (UUID, PCI address, nvidia-smi and CUDA_VISIBLE_DEVICES indices)."""
    named = {gpu.device: gpu_name(gpu) for gpu in log.gpus}
    return tuple(ClassedXid(xid=event.xid, device=named.get(event.device, event.device),
                            kind=xid_kind(event.xid), driver_says=_driver_says(event))
                 for event in log.xids)


def advised_log(log: KernelLog) -> Advice:
    """What a kernel log alone says to do next (an incident with no GPU dump)."""
    return advise(Evidence(xids=of_kernel_log(log)))


def _driver_says(event: XidEvent) -> str | None:
    if event.drain_required:
        return "drain and reset (D-RST)"
    if event.reset_required:
        return "a GPU reset is required (RST)"
    if event.recovery_to not in (None, "None"):
        return f"its recovery action is now {event.recovery_to}"
    return None


def of_incident(incident: Incident, table: FixTable | None = None) -> Evidence:
    """A serve incident's evidence: its Xid lines (decoded, with the driver's own reset and drain
    flags), and the fix of its first dump that has one (FAULT dumps come first), else the row
    keyed on the incident's signature."""
    xids = (of_kernel_log(incident.kernel_log) if incident.kernel_log is not None
            else xid_findings(incident.findings))  # a report older than the decoded kernel log
    for dump in incident.dumps:
        if dump.report is not None:
            found = of_triage(dump.report, xids)
            if found.fix is not None:
                return found
    return _signed(Evidence(kind=incident.kind, xids=xids), incident.signature, table)


def _signed(evidence: Evidence, signature: CrashSignature | None,
            table: FixTable | None) -> Evidence:
    """EVIDENCE with the known-fixes row keyed on SIGNATURE, where one is (its version unknown:
    no owner names the artifact's)."""
    if signature is None:
        return evidence
    row = fixes.by_signature(table or fixes.shipped(), signature.hash)
    if row is None:
        return evidence
    return replace(evidence, fix=row.known(), fix_status=fixes.status(row, None))


def of_run_report(report: RunReport, incarnation: int | None) -> Evidence:
    """The evidence of a run's incident of INCARNATION (its last where none matches): the
    advice serve wrote is not reused, since the index may know more now."""
    found = [i for i in report.incidents if i.incarnation == incarnation] or report.incidents[-1:]
    return of_incident(found[0]) if found else Evidence()
