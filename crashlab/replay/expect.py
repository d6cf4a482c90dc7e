"""Where the expected crash of a replay comes from: the user's --expect / --expect-kernel, or
else the triage ``crashlab serve`` wrote beside the dump (a run directory's report.json).

A dump inside a run directory (``<run>/incarnation-N/requests/<host>/crash_dump_*.pkl``) is
compared with that incarnation's fault: the first FAULT coredump's kernel and exception; with no
coredump, the CUDA error line serve found in the log; with neither, the exception that ended the
traceback of SGLang's "Scheduler hit an exception" line (its numbers free to differ).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput
from ..published import parse
from ..vocabulary import CUDA_ERROR, SCHEDULER_EXCEPTION, TRACEBACK
from .result import Expectation
from .signature import exception_pattern, fault_class

if TYPE_CHECKING:
    from ..report.run import Incident, RunReport

#: How many folders above the dump a run directory's report.json may be.
_LEVELS = 5
_REPORT_LIMIT = 64 << 20


def from_options(patterns: tuple[str, ...], kernel: str | None) -> Expectation | None:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as problem:
            raise BadInput(f"--expect {pattern!r}: {problem}") from None
    if not patterns and not kernel:
        return None
    classes = [found for found in map(fault_class, patterns) if found]
    return Expectation(source="--expect", patterns=list(patterns), kernel=kernel,
                       fault_class=classes[0] if len(set(classes)) == 1 else None)


def from_run_directory(dump: str | Path) -> tuple[Expectation | None, str | None]:
    """(the expected crash, a warning); (None, None) when the dump is in no run directory.

    report.json is read through its published model (a later crashlab's fields dropped, as
    crashlab.published reads every run directory); one the model refuses is no run report.
    """
    from ..report.run import RunReport  # only a replay asks: a listing does not import it

    path = Path(dump).resolve()
    for folder in list(path.parents)[:_LEVELS]:
        report = folder / "report.json"
        if not report.is_file():
            continue
        try:
            if report.stat().st_size > _REPORT_LIMIT:
                raise ValueError("larger than 64 MiB")
            run = parse(RunReport, json.loads(report.read_text(encoding="utf-8")))
        except (OSError, ValueError) as problem:
            return None, f"{report}: not read as a run report ({type(problem).__name__}); " \
                         "no expected crash taken from it"
        return _from_report(run, folder, path, report)
    return None, None


def _from_report(run: RunReport, folder: Path, dump: Path,
                 report: Path) -> tuple[Expectation | None, str | None]:
    incident = _incident_of(run.incidents, folder, dump)
    if incident is None:
        return None, None
    source = f"{report} (incarnation {incident.incarnation})"
    expected = (_from_fault(incident, source) or _from_cuda_error(incident, source)
                or _from_python_exception(incident, source))
    if expected is None:
        return None, f"{report}: its incident names no fault to compare the replay with"
    return expected, None


def _incident_of(incidents: list[Incident], folder: Path, dump: Path) -> Incident | None:
    """The incident of the incarnation whose folder holds the dump; else the first crash; else
    the first incident."""
    inside = [incident for incident in incidents if folder / incident.directory in dump.parents]
    crashes = [incident for incident in incidents if incident.kind == "crash"]
    return next(iter(inside or crashes or incidents), None)


def _from_fault(incident: Incident, source: str) -> Expectation | None:
    """The first fault of the first FAULT coredump crashlab could read: its class and kernel."""
    for triaged in incident.dumps:
        if triaged.label == "FAULT" and triaged.report is not None and triaged.report.faults:
            fault = triaged.report.faults[0]
            found = fault_class(f"{fault.exception.name} {fault.exception.display}")
            return Expectation(source=source, fault_class=found,
                               kernel=fault.kernel.name if fault.kernel else None)
    return None


def _from_cuda_error(incident: Incident, source: str) -> Expectation | None:
    """The class of the first CUDA error line serve found that names one."""
    for finding in incident.findings:
        found = fault_class(finding.text) if finding.kind == CUDA_ERROR else None
        if found:
            return Expectation(source=source, fault_class=found)
    return None


def _from_python_exception(incident: Incident, source: str) -> Expectation | None:
    """The exception that ends the traceback starting on a "hit an exception" line, its
    numbers free to differ."""
    findings = incident.findings
    starts = {(f.stream, f.line) for f in findings if f.kind == SCHEDULER_EXCEPTION}
    for finding in findings:
        pattern = exception_pattern(finding.text) \
            if finding.kind == TRACEBACK and (finding.stream, finding.line) in starts else None
        if pattern:
            return Expectation(source=source, patterns=[pattern])
    return None
