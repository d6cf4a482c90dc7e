"""A dump's advice, from its triage: the known-fixes row its faulting kernel's owner matched,
and the Xids of the kernel log given with it. What inspect imports for the advice: nothing of a
run's report, the Xid reader (unless --kernel-log) or the known-fixes table itself (the owner
read it where the artifact is named).
"""

from __future__ import annotations

from ..report.advice import Advice
from ..report.model import TriageReport
from .decide import ClassedXid, Evidence, advise


def of_triage(report: TriageReport, xids: tuple[ClassedXid, ...] = ()) -> Evidence:
    """A dump's evidence: its first fault whose owner matched a known-fixes row."""
    owner = next((f.owner for f in report.faults if f.owner is not None and f.owner.fix), None)
    if owner is None:
        return Evidence(kind="crash" if report.faults else "dumps", xids=xids)
    return Evidence(kind="crash", xids=xids, fix=owner.fix, fix_status=owner.fix_status,
                    version=owner.version)


def advised(report: TriageReport) -> Advice:
    """What the dump (and its kernel log) says to do next; serve and show weigh more."""
    if report.kernel_log is None:
        return advise(of_triage(report))
    from .evidence import of_kernel_log  # the Xid reader, only with --kernel-log

    return advise(of_triage(report, of_kernel_log(report.kernel_log)))
