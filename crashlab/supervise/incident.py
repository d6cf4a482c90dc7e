"""After a crash: triage every coredump of the incident and tell the fault from the collateral.

A tensor-parallel server that faults leaves one dump per rank: the rank whose kernel hit the
exception, and ranks that were merely waiting for it in a collective when SGLang (or the user)
triggered their dumps. Each dump goes through the inspect pipeline (crashlab.inspect) and is
labelled
- FAULT: an exception with a valid PC;
- COLLATERAL: no exception (a user-triggered dump), or one without a PC; the reasons say where
  its warps were parked (a collective kernel, by name) and how long after the fault it was written;
- UNREADABLE: crashlab.inspect could not read it (typically a dump cut short), with the error.
Dumps are ordered by the time they were finished (mtime), FAULT first.

With ``debugger`` on, each dump's report also carries cuda-gdb's view and its agreement with the
native one (crashlab.inspect(..., debugger=True)); where there is no cuda-gdb the report's
debugger section says so and the incident gets a note.

SGLang's request dumps are read (crashlab.replay.load, safely) to count their requests: a dump
with none gets no replay command. An incident whose logs matched no fault pattern carries the
tail of its log instead, masked like every other text from it.
"""

from __future__ import annotations

import shlex
from collections import deque
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Literal

from ..api import inspect
from ..errors import CrashlabError
from ..incidents.kernellogfile import read_kernel_text
from ..incidents.xidcheck import check as check_xids
from ..incidents.xidgpus import place
from ..logpatterns import CHILD_CRASHED, CRASH_SIGNALS, TRACEBACK_STARTS
from ..notation import counted
from ..replay import load as load_request_dump
from ..report.kernellog import KernelLog
from ..report.logline import SGLANG_PREFIX
from ..report.model import TriageReport
from ..report.run import DumpTriage, FileRecord, Finding, Incident, LogTail
from ..signature.collective import collectives
from ..signature.signing import compute_or_why as signature_of
from ..vocabulary import (
    CUDA_ERROR,
    FATAL,
    NCCL_TIMEOUT,
    OOM,
    SCHEDULER_EXCEPTION,
    SGLANG_CRASH,
    TRACEBACK,
    XID,
)
from ..wrongverb import advised
from . import gpuplaces, owners, rundir, timestamps
from .manifest import Incarnation

#: Where an incident's logs matched no fault pattern, this many of its last lines are kept,
#: each cut at TAIL_LINE_CHARS characters.
TAIL_LINES = 40
TAIL_LINE_CHARS = 500
#: Findings that explain a crash best, most telling first.
_TELLING = (CUDA_ERROR, XID, SCHEDULER_EXCEPTION, NCCL_TIMEOUT, FATAL, OOM, TRACEBACK, SGLANG_CRASH)


def _inspect(path: Path, debugger: bool,
             triton_caches: tuple[Path, ...]) -> tuple[TriageReport | None, str | None]:
    try:
        return inspect(path, debugger=debugger, triton_caches=triton_caches), None
    except CrashlabError as exc:
        return None, advised(exc)
    except Exception as exc:  # one unreadable dump must not cost the run its report
        return None, f"crashlab could not read it ({type(exc).__name__}: {exc}); a crashlab bug"


def _label(report: TriageReport | None) -> tuple[str, list[str], str]:
    if report is None:
        return "UNREADABLE", [], ""
    if report.faults and report.faults[0].pc is not None:
        fault = report.faults[0]
        return "FAULT", [f"{fault.exception.display} at a valid PC ({fault.pc_source})"], report.summary
    reasons = ["no exception in this dump" if not report.faults
               else "an exception without a valid PC"]
    collective = sorted({k.name for k in collectives(report)})
    if collective:
        reasons.append("parked in " + ("a collective kernel" if len(collective) == 1 else "collective kernels")
                       + " (by name): " + ", ".join(collective))
    return "COLLATERAL", reasons, report.summary


def triage_dumps(run_dir: Path, dumps: list[FileRecord], debugger: bool) -> list[DumpTriage]:
    triaged = []
    packages = owners.installed(run_dir)
    for record in dumps:
        path = run_dir / record.path
        incarnation = run_dir / Path(record.path).parts[0]  # <incarnation>/cores/<file>
        report, error = _inspect(path, debugger, owners.triton_caches(incarnation))
        if report is not None:
            owners.refine(report, incarnation, packages)
        label, reasons, summary = _label(report)
        if not record.complete:
            reasons.append("the server died while this dump was being written")
        entry = DumpTriage(path=record.path, label=label, reasons=reasons,
                           written_at=timestamps.of(path.stat().st_mtime), size_bytes=record.size_bytes,
                           sha256=record.sha256, summary=summary or f"unreadable: {error}",
                           error=error, report=report)
        triaged.append(entry)
    return _ordered(triaged)


def _ordered(dumps: list[DumpTriage]) -> list[DumpTriage]:
    by_time = sorted(dumps, key=lambda d: d.written_at)
    first_fault = next((d for d in by_time if d.label == "FAULT"), None)
    if first_fault is not None:
        start = datetime.fromisoformat(first_fault.written_at)
        for dump in by_time:
            delay = (datetime.fromisoformat(dump.written_at) - start).total_seconds()
            if dump is not first_fault and delay > 0:
                dump.reasons.append(f"written {delay:.1f} s after the first FAULT dump")
    rank = {"FAULT": 0, "COLLATERAL": 1, "UNREADABLE": 2}
    return sorted(by_time, key=lambda d: rank[d.label])


def kind_of(incarnation: Incarnation, dumps: list[DumpTriage], request_dumps: list[FileRecord],
            root_ended_on_its_own: bool) -> Literal["crash", "dumps"] | None:
    """crash, dumps, or None for a clean exit / a plain stop."""
    exit_ = incarnation.exit
    abnormal_root = root_ended_on_its_own and exit_ is not None and not exit_.clean
    crash_signal = any(p.exit is not None and p.exit.signal in CRASH_SIGNALS
                       for p in incarnation.processes)
    if abnormal_root or crash_signal or any(d.label == "FAULT" for d in dumps):
        return "crash"
    if dumps or request_dumps:
        return "dumps"
    return None


def _telling(findings: list[Finding]) -> Finding | None:
    for kind in _TELLING:
        for finding in findings:
            if finding.kind == kind:
                return finding
    return None


#: Findings that say more than the signal that ended a process (a native stack dump, "Fatal
#: Python error: Segmentation fault" or SGLang's "Subprocess ... crashed" only repeat it).
_EXPLAINING = (CUDA_ERROR, XID, SCHEDULER_EXCEPTION, NCCL_TIMEOUT, OOM)


def headline(finding: Finding, findings: list[Finding]) -> str:
    """A finding as the line that names the crash. SGLang's "Scheduler hit an exception:" line
    ends where its traceback starts; the exception comes from that traceback (same stream and
    line), so the headline says ``IndexError: ...``, not ``Traceback (most recent call last):``.
    SGLang's log prefix goes (the finding keeps it); the rank is said on its own."""
    text = SGLANG_PREFIX.sub("", finding.text.strip())
    if TRACEBACK_STARTS.search(text):
        traceback = next((f for f in findings if f.kind == TRACEBACK and f.stream == finding.stream
                          and f.line == finding.line), None)
        if traceback is not None:
            text = TRACEBACK_STARTS.sub(lambda _: traceback.text.strip(), text)
    where = f" [{finding.rank}]" if finding.rank else ""
    return f"{text[:300]}{where}"


def _first_deaths(incarnation: Incarnation) -> list:
    """Children that died of a crash signal, or that SGLang's watchdog reported as crashed
    (whatever the signal: a SIGKILL from the OOM killer or a user ends a child the same way
    SGLang's own clean-up does, and only the watchdog's line tells the first death apart)."""
    reported = {int(found["pid"]) for found in (CHILD_CRASHED.search(f.text)
                                                for f in incarnation.findings if f.kind == SGLANG_CRASH)
                if found}
    return [p for p in incarnation.processes if p.pid != incarnation.pid and p.exit is not None
            and (p.exit.signal in CRASH_SIGNALS or (p.pid in reported and not p.exit.clean))]


def summarise(incarnation: Incarnation, dumps: list[DumpTriage]) -> str:
    """Most telling first: a child whose death started the crash, the GPU fault or else the log's
    exception, then how the server itself ended (SGLang kills its own tree after a crash)."""
    crashed = _first_deaths(incarnation)
    parts = [f"{p.role}{' ' + p.ranks if p.ranks else ''} (pid {p.pid}) {p.exit.describe()}"
             for p in crashed[:3]]
    faults = [d for d in dumps if d.label == "FAULT"]
    if faults:
        parts.append(f"GPU fault: {faults[0].summary}")
    else:
        finding = _telling(incarnation.findings)
        if finding is not None and (not crashed or finding.kind in _EXPLAINING):
            parts.append(headline(finding, incarnation.findings))
        if dumps:
            parts.append(f"{counted(len(dumps), 'coredump')}, none with a fault")
    if incarnation.exit is not None:
        who = "server " + incarnation.exit.describe()
        parts.append(who + (" (stopped by crashlab)" if incarnation.stopped_by_crashlab else ""))
    return "; ".join(parts) or "the server ended"


def _counted(run_dir: Path, records: list[FileRecord]) -> tuple[list[FileRecord], list[str]]:
    """The request dumps with their number of requests, and a note for each that says why it
    gets no replay command."""
    counted, notes = [], []
    for record in records:
        try:
            requests = len(load_request_dump(run_dir / record.path).requests)
        except CrashlabError as exc:
            notes.append(f"request dump {record.path} cannot be replayed: {advised(exc)}")
            counted.append(record)
            continue
        if not requests:
            notes.append(f"request dump {record.path} holds no request: nothing to replay")
        counted.append(record.model_copy(update={"requests": requests}))
    return counted, notes


def lines_at_ends(path: Path, first: int, last: int,
                  keep: int = TAIL_LINE_CHARS * 4) -> tuple[int, list[bytes], list[bytes]]:
    """(number of lines in the file, the starts of its first ``first`` lines, those of the
    ``last`` lines after them), reading it once in blocks, whatever its size; ``keep``: bytes of
    a line that can matter once it is cut to a length."""
    head: list[bytes] = []
    kept: deque[bytes] = deque(maxlen=last)
    total, partial = 0, b""
    with open(path, "rb") as log:
        while block := log.read(1 << 20):
            pieces = (partial + block).split(b"\n")
            partial = pieces.pop()[:keep]
            total += len(pieces)
            taken = max(0, min(first - len(head), len(pieces)))
            head += [piece[:keep] for piece in pieces[:taken]]
            kept.extend(piece[:keep] for piece in pieces[taken:][-last:] if last)
    if partial:
        total += 1
        (head if len(head) < first else kept).append(partial)
    return total, head, list(kept)


def _shown(raw: bytes, redact: Callable[[str], str]) -> str:
    """A log line as a terminal left it (the last redraw of a progress bar), masked, then cut to
    a length: cut first, a secret across the cut would keep its first characters unmasked."""
    text = raw.decode("utf-8", "replace")
    redraws = [segment for segment in text.split("\r") if segment.strip()]
    text = redact(redraws[-1] if redraws else "")
    return text if len(text) <= TAIL_LINE_CHARS else text[:TAIL_LINE_CHARS] + "…"


def log_tail(run_dir: Path, incarnation: Incarnation, redact: Callable[[str], str]) -> LogTail | None:
    """The last lines of stderr (of stdout when stderr is empty), masked."""
    folder = rundir.incarnation(run_dir, incarnation.number)
    for stream in ("stderr", "stdout"):
        path = folder.log(stream)
        if path.is_file() and path.stat().st_size:
            total, _, lines = lines_at_ends(path, 0, TAIL_LINES)
            return LogTail(stream=stream, first_line=total - len(lines) + 1,
                           lines=[_shown(line, redact) for line in lines])
    return None


def _kernel_log(run_dir: Path, incarnation: Incarnation,
                dumps: list[DumpTriage]) -> KernelLog | None:
    """The Xid lines the kernel-log watch found, decoded, their GPUs placed among the run's
    ranks, and held against the first FAULT dump's faults."""
    lines = [finding.text for finding in incarnation.findings if finding.kind == XID]
    if not lines:
        return None
    log = read_kernel_text("\n".join(lines), "the kernel log (/dev/kmsg, read by serve)")
    log.gpus = place(log, gpuplaces.of_run(run_dir, incarnation.number, incarnation.processes))
    fault = next((dump.report for dump in dumps if dump.report is not None and dump.report.found),
                 None)
    if fault is not None:
        log.checks = check_xids(log, fault)
    return log


def build(run_dir: Path, incarnation: Incarnation, kind: str, dumps: list[DumpTriage],
          request_dumps: list[FileRecord], debugger: bool,
          redact: Callable[[str], str]) -> Incident:
    request_dumps, notes = _counted(run_dir, request_dumps)
    replay = [f"crashlab replay {shlex.quote(str(run_dir / r.path))}" for r in request_dumps if r.requests]
    if dumps and not debugger:
        notes.append("debugger view: not asked for (--no-debugger)")
    missing = {d.report.debugger.reason for d in dumps if d.report and d.report.debugger
               and d.report.debugger.status in ("unavailable", "failed")}
    notes.extend(f"debugger view: {reason}" for reason in sorted(missing, key=str))
    built = Incident(
        incarnation=incarnation.number, directory=incarnation.directory, kind=kind,
        started_at=incarnation.started_at, ended_at=incarnation.ended_at or incarnation.started_at,
        exit=incarnation.exit, stopped_by_crashlab=incarnation.stopped_by_crashlab,
        summary=summarise(incarnation, dumps), dumps=dumps, request_dumps=request_dumps,
        replay_commands=replay, findings=list(incarnation.findings),
        omitted_findings=incarnation.omitted_findings, processes=list(incarnation.processes),
        log_tail=None if incarnation.findings or incarnation.omitted_findings
        else log_tail(run_dir, incarnation, redact),
        notes=notes, kernel_log=_kernel_log(run_dir, incarnation, dumps))
    built.signature, why = signature_of(built)
    built.notes.extend([why] if why else [])
    return built
