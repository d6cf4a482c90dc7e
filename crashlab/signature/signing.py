"""compute(report): the signature of a dump's triage, of one incident of a serve run, or of a run.

A run's signature is its first crash's (an incident of kind crash, else its first incident). An
incident's is its first FAULT dump's; without one, its log's (crashlab.signature.logs: a CUDA
error, an exception, an NCCL timeout, a signal), which says more than the dumps SGLang's crash
path triggers on the ranks still waiting; only when the log says nothing but how the server
ended is it the first COLLATERAL dump's (the collective it waits in).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..report.model import TriageReport
from ..report.signature import CrashSignature
from .gpu import of_triage

if TYPE_CHECKING:  # serve's models: imported when a run is signed, never by inspect
    from ..report.run import Incident, RunReport


def compute(report: TriageReport | Incident | RunReport) -> CrashSignature:
    if isinstance(report, TriageReport):
        return of_triage(report)
    from ..report.run import Incident, RunReport

    if isinstance(report, Incident):
        return _of_incident(report)
    if isinstance(report, RunReport):
        return _of_incident(_first_crash(report))
    raise TypeError(f"no signature for a {type(report).__name__}")


def compute_or_why(report: TriageReport | Incident | RunReport) -> tuple[CrashSignature | None, str | None]:
    """(signature, None), or (None, why) where computing it failed: a crashlab bug, which must not
    cost serve the run's report."""
    try:
        return compute(report), None
    except Exception as exc:
        return None, f"no signature: crashlab could not compute it ({type(exc).__name__}: {exc}); a crashlab bug"


@dataclass(frozen=True)
class Signed:
    """One signature of a run: an incident's own (``dump`` None) or one of its dumps'."""

    incarnation: int
    dump: str | None
    label: str | None
    signature: CrashSignature


def compute_all(run: RunReport) -> list[Signed]:
    """Every incident's signature, each followed by its readable dumps' own (a FAULT dump, and
    the COLLATERAL dumps of the ranks that waited for it), in the report's order."""
    signed = []
    for incident in run.incidents:
        signed.append(Signed(incident.incarnation, None, None, _of_incident(incident)))
        signed += [Signed(incident.incarnation, dump.path, dump.label, of_triage(dump.report))
                   for dump in incident.dumps if dump.report is not None]
    return signed


def _first_crash(run: RunReport) -> Incident:
    if not run.incidents:
        raise ValueError("a run report without an incident has no signature")
    return next((i for i in run.incidents if i.kind == "crash"), run.incidents[0])


def _of_incident(incident: Incident) -> CrashSignature:
    fault = _first(incident, "FAULT")
    if fault is not None:
        return of_triage(fault.report)
    from .logs import of_incident  # the log scanner's patterns: only for a run, never for inspect

    signature = of_incident(incident)
    collateral = _first(incident, "COLLATERAL")
    return of_triage(collateral.report) if signature.kind == "exit" and collateral else signature


def _first(incident: Incident, label: str):
    return next((d for d in incident.dumps if d.label == label and d.report is not None), None)
