"""What the machine that triaged a crash could not do (cuda-gdb not found there): news for the
person making the report, who can install the tool, and none for upstream, who has it. The body
shows the triage without it and the terminal says it once; the bundle's triage JSON keeps it.

A debugger section is "unavailable" only when the debugger could not be run at all (not found,
a dump read from a pipe); one that ran and failed stays in the body: that is about the dump.
"""

from __future__ import annotations

from ..report.model import TriageReport
from ..report.run import RunReport

UNAVAILABLE = "unavailable"


def _reason(report: TriageReport | None) -> str | None:
    section = report.debugger if report is not None else None
    if section is None or section.status != UNAVAILABLE:
        return None
    return section.reason or "the debugger could not be run"


def triage(report: TriageReport, lacking: set[str]) -> TriageReport:
    """``report`` without a debugger section that could not be made; its reason added to ``lacking``."""
    reason = _reason(report)
    if reason is None:
        return report
    lacking.add(reason)
    return report.model_copy(update={"debugger": None})


def run(report: RunReport, lacking: set[str]) -> RunReport:
    """The run's report without the debugger sections serve could not make, nor the incident
    notes that repeat why (serve writes them as ``debugger view: <reason>``)."""
    incidents = []
    for incident in report.incidents:
        found: set[str] = set()
        dumps = [dump.model_copy(update={"report": triage(dump.report, found)})
                 if dump.report is not None else dump for dump in incident.dumps]
        notes = [note for note in incident.notes
                 if note.removeprefix("debugger view: ") not in found]
        lacking |= found
        incidents.append(incident.model_copy(update={"dumps": dumps, "notes": notes}))
    return report.model_copy(update={"incidents": incidents})


def message(reason: str) -> str:
    """The terminal's line for one reason."""
    return f"no debugger view in the report (not news for upstream): {reason}"
