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
from dataclasses import dataclass
from pathlib import Path

from ..published import parse
from ..replay.records import CrashDump
from ..replay.result import Attempt, Expectation, ObservedFault
from ..replay.runner import Fidelity, Target, attempt
from ..replay.server import ServerDidNotStart
from ..replay.signature import PYTHON_EXCEPTION, compare, exception_pattern
from ..report.run import Incident, RunReport
from ..report.signature import CrashSignature
from .model import Run
from .options import BisectOptions


@dataclass(frozen=True)
class Outcome:
    """One run: what replay saw, and the signature serve gave its crash (None: no crash, or
    serve wrote no report)."""

    attempt: Attempt
    served: CrashSignature | None = None


@dataclass
class Oracle:
    """What counts as the crash: the bad side's signature when serve signed it (the same hash or
    coarse key is the same bug, even where lines moved), else replay's oracle against the
    expectation (the bad side's fault class, kernel and exception line, or --expect's)."""

    expected: Expectation | None
    #: the bad side's signature; None where --expect decides or serve signed nothing
    wanted: CrashSignature | None = None

    def verdict(self, run: Outcome) -> str:
        oracle, _ = compare(self.expected, run.attempt.observed, bool(run.attempt.signals))
        if self.wanted is None or run.served is None:
            return oracle
        same = run.served.hash == self.wanted.hash or (
            run.served.coarse is not None and run.served.coarse == self.wanted.coarse)
        return "reproduced" if same else "different crash"


def signature_text(run: Outcome) -> str:
    """A crash as one line: its fault classes, kernels and the exception line that names it,
    after serve's signature hash where serve signed it (``crashlab show HASH`` finds it)."""
    observed = run.attempt.observed
    line = next((text.strip() for text in observed.lines
                 if re.match(PYTHON_EXCEPTION, text.strip())),
                observed.lines[0].strip() if observed.lines else "no fault line")
    parts = [f"signature {run.served.hash}" if run.served else "", ", ".join(observed.classes),
             ", ".join(observed.kernels), line]
    return " | ".join(part for part in parts if part)


def expectation_from(observed: ObservedFault) -> Expectation:
    """The bad side's crash as what later steps must match: its class, kernel and exception line
    with the numbers free (exception_pattern)."""
    patterns = [pattern for pattern in (exception_pattern(line) for line in observed.lines)
                if pattern][:1]
    return Expectation(source="the crash the --bad commit shows", patterns=patterns,
                       fault_class=observed.classes[0] if observed.classes else None,
                       kernel=observed.kernels[0] if observed.kernels else None)


def run_record(number: int, run: Outcome, verdict: str) -> Run:
    """A run as the step log keeps it; its time to failure is the oracle's first sign of the
    crash (an exit, a failed /health, a fault line), in seconds from the run's start."""
    result = run.attempt
    first = min((signal.at_s for signal in result.signals), default=None)
    return Run(number=number, verdict=verdict, duration_s=result.duration_s,
               time_to_failure_s=first,
               signature=signature_text(run) if result.signals else None,
               signature_hash=run.served.hash if run.served else None,
               signature_coarse=run.served.coarse if run.served else None)


def served_report(runs_dir: Path) -> tuple[Path, RunReport] | None:
    """(its path, the report) serve wrote for the one run directory it made in ``runs_dir``,
    read through its published model as every run report is; None where there is none."""
    report = next(runs_dir.glob("*/report.json"), None)
    if report is None:
        return None
    try:
        return report, parse(RunReport, report.read_bytes())
    except (OSError, ValueError):
        return None


def served_signature(runs_dir: Path) -> CrashSignature | None:
    """The signature serve gave a run's crash (served_report's)."""
    served = served_report(runs_dir)
    return served[1].signature if served else None


#: How much of the server's own last words a skip's reason keeps.
_WORDS = 300


def _last_words(incident: Incident) -> str:
    """What the server said as it ended: the last exception line of its log tail or findings
    (``SyntaxError: '(' was never closed``), else its last line; '' when it said nothing."""
    lines = [*(finding.text for finding in incident.findings),
             *(incident.log_tail.lines if incident.log_tail else [])]
    said = [text.strip() for text in lines if text.strip()]
    exceptions = [text for text in said if re.match(PYTHON_EXCEPTION, text)]
    words = (exceptions or said or [""])[-1]
    return words if len(words) <= _WORDS else words[:_WORDS] + "…"


def start_failure(runs_dir: Path, problem: ServerDidNotStart) -> str:
    """Why a step's server did not start, in its own words: serve ran it, caught its end and
    signed it (``SyntaxError: ... | server exited with code 1``, the signature, serve's report).
    Only where serve left no report (serve itself refused to run, or /health never answered
    while the server lived) is the reason serve's own end, ``problem``."""
    served = served_report(runs_dir)
    crashes = [incident for incident in served[1].incidents
               if incident.kind == "crash" and not incident.stopped_by_crashlab] if served else []
    if not served or not crashes:
        return str(problem)
    path, report = served
    incident = crashes[-1]
    words = _last_words(incident)
    signature = incident.signature or report.signature
    signed = f"signature {signature.hash}, " if signature else ""
    return (f"{words + ' | ' if words else ''}{incident.summary} "
            f"({signed}serve's report: {path.with_suffix('.md')})")


def supervised(options: BisectOptions, launch: tuple[str, ...], runs_dir: Path) -> str:
    """The launch command under ``crashlab serve``: each run's server is watched as serve
    watches any, its crash kept, triaged and signed in a run directory of its own, and recorded
    in the bisect's own crash index, not the user's."""
    return shlex.join([sys.executable, "-m", "crashlab", "serve", "--runs-dir", str(runs_dir),
                       "--db", str(options.output / "index.sqlite"), "--no-debugger",
                       "--health-url", options.url,
                       "--health-interval", str(options.watch.health_interval),
                       "--health-timeout", str(options.watch.health_timeout),
                       "--", *launch])


def replay_runs(options: BisectOptions, launch: tuple[str, ...], dump: CrashDump, count: int,
                base: Path, stop_on_crash: bool = True) -> list[Outcome]:
    """Up to ``count`` runs, each on a fresh server under serve (its run directories in
    ``base``.server.runs/run-NN). Each server is stopped before the next starts, so serve has
    written its report when the run's signature is read. Stops at the first crash unless told
    not to (the bad side counts all of its runs)."""
    fidelity = Fidelity(expected=None, force="off")
    found: list[Outcome] = []
    for number in range(1, count + 1):
        runs_dir = base.with_suffix(".server.runs") / f"run-{number:02d}"
        target = Target(url=options.url, restart_cmd=supervised(options, launch, runs_dir),
                        start_timeout=options.start_timeout, server_log=base.with_suffix(".server.log"),
                        command_name="crashlab serve (the launch command under it)")
        try:
            result = attempt(dump.requests, target, options.plan, options.watch, number,
                             fidelity=fidelity)
        except ServerDidNotStart as problem:  # serve's own end says little: the server's does
            target.close()  # serve has ended, its report written, before it is read
            raise ServerDidNotStart(start_failure(runs_dir, problem)) from None
        finally:
            target.close()
        found.append(Outcome(result, served_signature(runs_dir) if result.signals else None))
        if stop_on_crash and result.signals:
            break
    return found
