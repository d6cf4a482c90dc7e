"""``crashlab bisect``'s flow: bisect, show each step on stderr as it ends, print the verdict.
Returns the exit code: 0 a first bad commit found (--check-fix: fixed), 1 inconclusive (not
fixed, another crash)."""

from __future__ import annotations

from ..console import ViewConsole
from ..errors import EXIT_FOUND, EXIT_NOTHING
from ..stdout import echo
from . import view
from .flow import bisect
from .options import BisectOptions


def run(options: BisectOptions) -> int:
    err = ViewConsole(stderr=True)
    result = bisect(options, on_step=lambda step: view.step_line(step, err))
    if options.as_json:
        echo(result.model_dump_json(indent=2))
    else:
        view.verdict(result, ViewConsole())
    return EXIT_FOUND if result.outcome in ("found", "fixed") else EXIT_NOTHING
