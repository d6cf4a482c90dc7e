"""The advice's evidence as the published reports hold it: the known-fixes row the faulting
kernel's owner matched, and the Xid lines of a run's kernel log, each classed by NVIDIA's
catalogue. What only the index knows (the signature's history, the GPU's) and what only serve
knows (its recent crashes) is added by them.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..incidents.xid import from_findings
from ..incidents.xidcatalog import xid_kind
from ..report.model import TriageReport
from ..report.run import Finding, Incident, RunReport
from .decide import ClassedXid, Evidence


def classed(xid: int, device: str) -> ClassedXid:
    return ClassedXid(xid=xid, device=device, kind=xid_kind(xid))


def xid_findings(findings: Iterable[Finding]) -> tuple[ClassedXid, ...]:
    """A run's Xid findings, each classed by its number."""
    return tuple(classed(line.xid, line.device) for line in from_findings(list(findings), host=""))


def of_triage(report: TriageReport, xids: tuple[ClassedXid, ...] = ()) -> Evidence:
    """A dump's evidence: its first fault whose owner matched a known-fixes row."""
    owner = next((f.owner for f in report.faults if f.owner is not None and f.owner.fix), None)
    if owner is None:
        return Evidence(kind="crash" if report.faults else "dumps", xids=xids)
    return Evidence(kind="crash", xids=xids, fix=owner.fix, fix_status=owner.fix_status,
                    version=owner.version)


def of_incident(incident: Incident) -> Evidence:
    """A serve incident's evidence: its Xid findings, and the fix of its first dump that has one
    (FAULT dumps come first)."""
    xids = xid_findings(incident.findings)
    for dump in incident.dumps:
        if dump.report is not None:
            found = of_triage(dump.report, xids)
            if found.fix is not None:
                return found
    return Evidence(kind=incident.kind, xids=xids)


def of_run_report(report: RunReport, incarnation: int | None) -> Evidence:
    """The evidence of a run's incident of INCARNATION (its last where none matches): the
    advice serve wrote is not reused, since the index may know more now."""
    found = [i for i in report.incidents if i.incarnation == incarnation] or report.incidents[-1:]
    return of_incident(found[0]) if found else Evidence()
