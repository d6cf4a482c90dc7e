"""The environment section of a report: the one place ``crashlab report`` gets it from.

The environment serve captured at launch (<run-dir>/environment.json) is the machine as it was
when the server started, before anything could wedge; without one (a coredump or a request dump
given alone, a run of an older crashlab) it is captured now, on the machine the report is made
on, and the report says so; so it is when the run's environment.json cannot be used (damaged,
or of another schema_version), which must not cost the user the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..env.model import Environment
from .privacy import Privacy


@dataclass(frozen=True)
class ReportEnvironment:
    environment: Environment
    #: where it came from, as the report says it
    origin: str


def environment(run_dir: Path | None, privacy: Privacy) -> ReportEnvironment:
    """The run's saved environment, else one captured now; cleaned like everything else."""
    from ..env import saved

    why_not = "the run has no environment.json"
    try:
        found = saved.load(run_dir) if run_dir is not None else None
    except saved.UnusableEnvironment as unusable:
        found, why_not = None, f"the run's environment.json {unusable.reason}"
    if found is not None:
        origin = f"captured by crashlab serve when the server was launched ({found.captured_at})"
    else:
        from ..env.capture import capture

        found = capture()
        origin = ("captured by crashlab report now, on the machine the report was made on"
                  + (f" ({privacy.text(why_not)})" if run_dir is not None else ""))
    cleaned = Environment.model_validate(privacy.json(found.model_dump(mode="json")))
    if privacy.anonymized:
        cleaned.host_name = None
    return ReportEnvironment(cleaned, origin)


def markdown(found: ReportEnvironment) -> str:
    from ..env import views
    from ..report.markdown_escape import inline

    return f"_{inline(found.origin[0].upper() + found.origin[1:])}._\n\n" + views.markdown(found.environment)
