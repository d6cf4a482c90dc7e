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

from ..errors import BadInput
from .result import Expectation
from .signature import exception_pattern, fault_class

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
    """(the expected crash, a warning); (None, None) when the dump is in no run directory."""
    path = Path(dump).resolve()
    for folder in list(path.parents)[:_LEVELS]:
        report = folder / "report.json"
        if not report.is_file():
            continue
        try:
            if report.stat().st_size > _REPORT_LIMIT:
                raise ValueError("larger than 64 MiB")
            data = json.loads(report.read_text(encoding="utf-8"))
            return _from_report(data, folder, path, report)
        except (OSError, ValueError, TypeError, AttributeError, KeyError) as problem:
            return None, f"{report}: not read as a run report ({type(problem).__name__}); " \
                         "no expected crash taken from it"
    return None, None


def _from_report(data: dict, run: Path, dump: Path, report: Path):
    incidents = [item for item in data.get("incidents") or [] if isinstance(item, dict)]
    if not incidents:
        return None, None
    inside = [item for item in incidents
              if isinstance(item.get("directory"), str) and (run / item["directory"]) in dump.parents]
    incident = (inside or [item for item in incidents if item.get("kind") == "crash"] or incidents)[0]
    source = f"{report} (incarnation {incident.get('incarnation')})"
    for triaged in incident.get("dumps") or []:
        faults = ((triaged.get("report") or {}).get("faults") or []) if triaged.get("label") == "FAULT" else []
        if faults:
            fault = faults[0]
            exception = fault.get("exception") or {}
            kernel = (fault.get("kernel") or {}).get("name")
            found = fault_class(f"{exception.get('name') or ''} {exception.get('display') or ''}")
            return Expectation(source=source, fault_class=found,
                               kernel=kernel if isinstance(kernel, str) else None), None
    for finding in incident.get("findings") or []:
        if finding.get("kind") == "cuda-error" and isinstance(finding.get("text"), str):
            found = fault_class(finding["text"])
            if found:
                return Expectation(source=source, fault_class=found), None
    pattern = _python_exception(incident.get("findings") or [])
    if pattern:
        return Expectation(source=source, patterns=[pattern]), None
    return None, f"{report}: its incident names no fault to compare the replay with"


def _python_exception(findings: list) -> str | None:
    """The pattern of the exception in the traceback that starts on a "hit an exception" line."""
    starts = {(f.get("stream"), f.get("line")) for f in findings if f.get("kind") == "scheduler-exception"}
    for finding in findings:
        if finding.get("kind") == "traceback" and (finding.get("stream"), finding.get("line")) in starts \
                and isinstance(finding.get("text"), str):
            pattern = exception_pattern(finding["text"])
            if pattern:
                return pattern
    return None
