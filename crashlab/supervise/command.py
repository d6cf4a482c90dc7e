"""``crashlab serve``'s flow (supervise the server, say where its run directory is and what came
of the run) and ``crashlab dump-now``'s; each gives the command's exit code back."""

from __future__ import annotations

from pathlib import Path

from ..errors import EXIT_FOUND, EXIT_NOTHING
from ..notation import counted
from ..report.run_views import report_line
from ..textsize import with_bytes
from .dumpnow import dump_now
from .options import Notify, ServeOptions
from .supervisor import Supervisor, supervised


def run(options: ServeOptions, say: Notify) -> int:
    """Supervise the server until it ends (serve() with the run directory and the outcome
    said): the exit code of ``crashlab serve``."""
    supervisor = Supervisor(options, say)
    say(f"run directory: {supervisor.run_dir}")
    outcome = supervised(supervisor)
    if outcome.report is not None:  # each incident's lines were printed when it was triaged
        say(report_line(outcome.report))
    else:
        say(f"{outcome.result}: nothing to triage (manifest: {outcome.run_dir}/manifest.json)")
    return outcome.exit_code


def dump_now_said(run_dir: Path, timeout: float, say: Notify) -> int:
    """``crashlab dump-now``: trigger the dumps, say what was triggered and collected (with the
    command that reads each); the command's exit code back."""
    result = dump_now(run_dir, timeout)
    say(f"triggered {counted(len(result.triggered), 'pipe')}")
    for record in result.collected:
        say(f"collected {run_dir / record.path} ({with_bytes(record.size_bytes)}); "
            f"crashlab inspect {run_dir / record.path}")
    if not result.collected:
        say(f"no dump was collected within {timeout:g} s")
    return EXIT_FOUND if result.collected else EXIT_NOTHING
