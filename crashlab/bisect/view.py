"""bisect's terminal view: a line per step as it ends, then the verdict. Commit subjects, file
names, versions and crash lines come from outside: each goes through console.line, escaped,
never markup."""

from __future__ import annotations

from ..console import ViewConsole, line
from ..notation import counted
from .model import BisectResult, Commit, Release, Step, label, title


def step_line(step: Step, console: ViewConsole) -> None:
    counts = f"{step.reproduced}/{len(step.runs)}"
    console.print(line((f"{step.verdict:>4}", "bold"), f"  {label(step.revision)}  {counts:>5}  ",
                       title(step.revision), ("  " + step.reason, "dim")))


def _first_bad(first: Commit | Release, console: ViewConsole) -> None:
    if isinstance(first, Release):
        console.print(line(("first bad release: ", "bold red"), first.version))
        console.print(line("  installed by ", first.install))
        return
    console.print(line(("first bad commit: ", "bold red"), first.hash))
    console.print(line("  ", first.subject))
    console.print(line("  author date ", first.author_date))
    for name in first.files:
        console.print(line("  changed ", name))


def verdict(result: BisectResult, console: ViewConsole) -> None:
    console.print(line(("expected crash: ", "bold"), result.expected))
    if result.bad_rate:
        console.print(line(f"bad side reproduced at rate {result.bad_rate:.2f}, at least "
                           f"{result.bad_rate_bound:.2f} at {result.confidence:.0%} confidence; a "
                           f"good verdict took {counted(result.runs_for_good, 'clean run')}"))
    else:
        console.print(line("bad side did not reproduce the crash"))
    for skip in result.skips:
        console.print(line(("skipped ", "yellow"), label(skip.revision), "  ", skip.reason))
    if result.fix is not None:
        console.print(line(("fix ", "bold"), result.fix.revision.hash, ": ",
                           (result.fix.verdict, "bold"), f" (parent {result.bad[:12]})"))
        console.print(line("  ", result.fix.revision.subject))
    elif result.first_bad is not None:
        _first_bad(result.first_bad, console)
    else:
        console.print(line(("inconclusive: ", "bold yellow"), result.why))
        for revision in result.candidates:
            console.print(line("  maybe ", label(revision), "  ", title(revision)))
    console.print(line(f"{len(result.steps)} steps in {result.wall_s:,.1f} s; step log: ",
                       result.log))
    for note in result.notes:
        console.print(line(("note: ", "yellow"), note))
