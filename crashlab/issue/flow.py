"""``crashlab report``'s flow: make the issue, print its body (or its JSON summary) and where
its files are, record its crashes in the index; the command's exit code back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..errors import EXIT_FOUND, EXIT_NOTHING
from ..index import capture
from ..index.recording import record_all
from ..report.advice import advice_line
from ..stdout import echo
from ..textsize import with_bytes
from . import local
from .command import Made, ReportOptions, make, runs_dir


def run(options: ReportOptions, as_json: bool, db: str | None, say: Callable[[str], None],
        given: capture.Origin | None = None) -> int:
    """Make the report, print it (the body, or with AS_JSON its summary), say where its files
    went, and record its crashes in the index DB: the exit code of ``crashlab report``. GIVEN
    is the user's word on where its coredumps crashed (--host, --deployment); one that a run a
    dump lies in contradicts is refused before anything is made."""
    given = given or capture.Origin()
    for name in options.inputs:
        if Path(name).is_file():
            capture.origin(Path(name), given.host, given.deployment)
    made = make(replace(options, db=db, host=given.host, deployment=given.deployment))
    # make() returns once the bundle is written: it sets both
    assert made.inputs is not None and made.issue.bundle_bytes is not None
    if as_json:
        echo(made.issue.model_dump_json(indent=2))
    else:
        echo(made.body, nl=False)
    say(f"title: {made.issue.title}")
    if made.issue.advice is not None:
        say(f"advice: {advice_line(made.issue.advice)}")
    say(f"body: {made.issue.body}")
    say(f"bundle: {made.issue.bundle}: {with_bytes(made.issue.bundle_bytes)}, "
        f"{len(made.issue.left_out)} files left out")
    for core in made.inputs.cores:
        if core.kept is not None:
            say(f"{core.path}: its triage is the one the index keeps ({core.kept}); crashlab "
                f"inspect {core.path} --record makes it again")
    for reason in made.lacking:
        say(local.message(reason))
    for warning in made.warnings:
        say(warning)
    record_all(lambda: _recorded(made, options.kernel_log, given), db, runs_dir(made.inputs), say)
    return EXIT_FOUND if made.issue.found else EXIT_NOTHING


def _recorded(made: Made, kernel_log: str | None, given: capture.Origin) -> list:
    """What report records: the crashes it read, and the fault a kernel log alone describes
    where no dump showed one (with a dump, the log joined that dump's triage)."""
    assert made.inputs is not None
    crashes: list = capture.from_report_inputs(made.inputs, given)
    xid = made.issue.xid_triage
    if kernel_log is not None and xid is not None:
        crashes += [crash for crash in [capture.from_kernel_log(Path(kernel_log), xid, "report",
                                                                given)] if crash is not None]
    return crashes
