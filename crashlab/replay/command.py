"""``crashlab replay``'s flow: list the dump, or replay it (or minimize it) and show the result.

Returns the command's exit code; what goes wrong is raised for the command's guard to report.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import click

from ..console import ViewConsole
from ..errors import EXIT_FOUND, EXIT_NOTHING, BadInput
from ..stdout import echo
from . import views
from .loader import load
from .options import ReplayOptions
from .records import CrashDump

if TYPE_CHECKING:
    from .result import ReplayResult
    from .runner import Target


def run(options: ReplayOptions) -> int:
    if options.target is None and not options.as_json:
        lister = views.RequestLister(ViewConsole())
        dump = load(options.dump, on_request=lister.row)
        lister.summary(dump)
        _say_partial(dump)
        return EXIT_FOUND
    dump = load(options.dump)
    _say_partial(dump)
    gc.freeze()  # the dump lives as long as this process: the cycle collector can skip it
    if options.target is None:
        for line in views.dump_json_lines(dump):
            echo(line)
        return EXIT_FOUND
    if not dump.requests:
        raise BadInput(f"{options.dump}: holds no requests to replay")
    result = _replayed(dump, options, options.target)
    if options.as_json:
        echo(result.model_dump_json(indent=2))
    else:
        views.render_result(result, ViewConsole(), said=dump.partial.line() if dump.partial else None)
    found = bool(result.minimization.minimal) if result.minimization else result.reproduced
    return EXIT_FOUND if found else EXIT_NOTHING


def _say_partial(dump: CrashDump) -> None:
    """A dump cut short is used as far as it was read, and stderr says so, once: the human views
    leave that line out of their warnings (the JSON keeps it)."""
    if dump.partial is not None:
        click.echo(f"{dump.path}: {dump.partial.line()}", err=True)


def _replayed(dump: CrashDump, options: ReplayOptions, target: Target) -> ReplayResult:
    """The replay, or the minimization, of ``dump``, with its progress on stderr. What replays
    is imported here: a listing of a large dump does not carry it (HTTP, process watching)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from .expect import from_run_directory
    from .runner import minimize, replay

    assert options.plan is not None and options.watch is not None  # they come with a target
    expected, notes = options.expected, []
    if expected is None and not options.any_crash:
        expected, note = from_run_directory(options.dump)
        notes += [note] if note else []
    fidelity = options.fidelity(expected)
    err = ViewConsole(stderr=True)
    budget = options.minimize
    if budget:
        return minimize(
            dump, target, options.plan, options.watch, budget, options.output,
            options.repeat,
            on_trial=lambda number, size, crashed: err.print(
                f"trial {number}: {size} requests -> {'reproduced' if crashed else 'not reproduced'}"
                f" ({budget.elapsed():,.1f} s elapsed, {budget.left()})"),
            fidelity=fidelity, warnings=notes)
    progress = Progress("replay", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    with progress:
        task = progress.add_task("replay", total=len(dump.requests))
        return replay(dump, target, options.plan, options.watch, options.repeat,
                      progress=lambda done, total: progress.update(task, completed=done),
                      fidelity=fidelity, warnings=notes)
