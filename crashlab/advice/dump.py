"""A dump's evidence for the advice, from its triage alone: the known-fixes row its faulting
kernel's owner matched. What inspect imports for the advice: nothing of a run's report, the
Xid reader or the known-fixes table itself (the owner read it where the artifact is named).
"""

from __future__ import annotations

from ..report.model import TriageReport
from .decide import ClassedXid, Evidence


def of_triage(report: TriageReport, xids: tuple[ClassedXid, ...] = ()) -> Evidence:
    """A dump's evidence: its first fault whose owner matched a known-fixes row."""
    owner = next((f.owner for f in report.faults if f.owner is not None and f.owner.fix), None)
    if owner is None:
        return Evidence(kind="crash" if report.faults else "dumps", xids=xids)
    return Evidence(kind="crash", xids=xids, fix=owner.fix, fix_status=owner.fix_status,
                    version=owner.version)
