"""One step's runs: start the prepared revision's server under serve, replay the reproducer up
to N times, and judge with replay's signature oracle.

The same crash is bad (one reproduction is enough: stop there); another crash is a skip, its
signature kept, because that commit cannot say whether the bug was there; no crash in all N
runs is good, with the confidence N gives against the bad side's rate.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from ..replay.records import CrashDump
from ..replay.result import Attempt, Expectation, ObservedFault
from ..replay.runner import Fidelity, Target, attempt
from ..replay.signature import PYTHON_EXCEPTION, compare, exception_pattern
from .model import Run
from .options import BisectOptions


def signature_text(observed: ObservedFault) -> str:
    """A crash as one line: its fault classes, kernels and the exception line that names it."""
    line = next((text.strip() for text in observed.lines
                 if re.match(PYTHON_EXCEPTION, text.strip())),
                observed.lines[0].strip() if observed.lines else "no fault line")
    parts = [", ".join(observed.classes), ", ".join(observed.kernels), line]
    return " | ".join(part for part in parts if part)


def expectation_from(observed: ObservedFault) -> Expectation:
    """The bad side's crash as what later steps must match: its class, kernel and exception line
    with the numbers free (exception_pattern)."""
    patterns = [pattern for pattern in (exception_pattern(line) for line in observed.lines)
                if pattern][:1]
    return Expectation(source="the crash the --bad commit shows", patterns=patterns,
                       fault_class=observed.classes[0] if observed.classes else None,
                       kernel=observed.kernels[0] if observed.kernels else None)


def run_record(number: int, result: Attempt, verdict: str) -> Run:
    """A run as the step log keeps it; its time to failure is the oracle's first sign of the
    crash (an exit, a failed /health, a fault line), in seconds from the run's start."""
    first = min((signal.at_s for signal in result.signals), default=None)
    return Run(number=number, verdict=verdict, duration_s=result.duration_s,
               time_to_failure_s=first,
               signature=signature_text(result.observed) if result.signals else None)


def supervised(options: BisectOptions, launch: tuple[str, ...], runs_dir: Path) -> str:
    """The launch command under ``crashlab serve``: each run's server is watched as serve
    watches any, its crash kept and triaged in a run directory of the step's own, and recorded
    in the bisect's own crash index, not the user's."""
    return shlex.join([sys.executable, "-m", "crashlab", "serve", "--runs-dir", str(runs_dir),
                       "--db", str(options.output / "index.sqlite"), "--no-debugger",
                       "--health-url", options.url,
                       "--health-interval", str(options.watch.health_interval),
                       "--health-timeout", str(options.watch.health_timeout),
                       "--", *launch])


def replay_runs(options: BisectOptions, launch: tuple[str, ...], dump: CrashDump,
                expected: Expectation | None, count: int, log: Path,
                stop_on_crash: bool = True) -> list[tuple[Attempt, str]]:
    """Up to ``count`` runs, each on a fresh server under serve; (attempt, verdict against
    ``expected``). Stops at the first crash unless told not to (the bad side counts all of its
    runs)."""
    target = Target(url=options.url, restart_cmd=supervised(options, launch, log.with_suffix(".runs")),
                    start_timeout=options.start_timeout, server_log=log)
    fidelity = Fidelity(expected=None, force="off")
    found: list[tuple[Attempt, str]] = []
    try:
        for number in range(1, count + 1):
            result = attempt(dump.requests, target, options.plan, options.watch, number,
                             fidelity=fidelity)
            verdict, _ = compare(expected, result.observed, bool(result.signals))
            found.append((result, verdict))
            if stop_on_crash and result.signals:
                break
    finally:
        target.close()
    return found
