"""After an incarnation: what SGLang itself wrote around its crash, kept, linked and read.

SGLang writes some of its own evidence (crashlab.report.sglang_records says which release
writes what): a kernel-API log to the server's streams or to a file of its own, py-spy's stacks
and its batch lines into its log, a crash snapshot JSON beside its request dump. A file SGLang
wrote outside the run directory is adopted into the incarnation's folder (the original left
where it is) and listed in the manifest; every record is read from the end of its file (a log
of days is not read whole), each text masked by the run's redactor, and cut to a budget, so a
report holds the last kernel calls before the crash, not the log.
"""

from __future__ import annotations

import glob
import json
import re
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from ..hangs import pyspy
from ..report.run import FileRecord
from ..report.sglang_records import (
    CrashSnapshot,
    KernelApiCall,
    KernelApiLog,
    SGLangRecords,
    SpyStacks,
    SpyThread,
)
from . import collect, files
from .hostcrash import LOG_TAIL_BYTES
from .rundir import IncarnationDir

#: The budget: the last calls of each kernel-API log, the lines kept of each call, a line's
#: length; threads and frames of each py-spy dump; the last batch lines; a snapshot's fields.
KERNEL_API_CALLS = 8
CALL_LINES = 40
LINE_CHARS = 300
SPY_THREADS = 16
SPY_FRAMES = 40
BATCH_LINES = 10
SNAPSHOT_FIELDS = 60
#: SGLang 0.5.23's kernel-API logging: its level, and where it writes (stdout, stderr or a file
#: whose name may hold %i, the writing process's pid).
LEVEL_VARIABLE = "SGLANG_KERNEL_API_LOGLEVEL"
DESTINATION_VARIABLE = "SGLANG_KERNEL_API_LOGDEST"
KERNEL_API_FOLDER = "kernel-api"

_CALL = re.compile(r"^(?:\[(?P<time>[^\]]+)\] )?SGLang Kernel API Call: (?P<function>\S+)")
_RAISED = re.compile(r"SGLang Kernel API Exception: (?P<function>\S+) \((?P<what>.*)\)\s*$")
#: A line of a call's record: a section's title, or an indented value.
_CALL_LINE = re.compile(r"^(?:Positional input arguments:|Keyword input arguments:|Output:|\s)")
_SPY_DUMP = re.compile(r"Pyspy dump for PID (?P<pid>\d+) \(.*\):\s*$")
_SPY_FAILED = re.compile(r"Pyspy failed \((?P<command>.*?)\)\. Error: (?P<error>.*)$")
_PID = re.compile(r"--pid (\d+)")
#: The start of a record of SGLang's logger: ``[2026-12-06 11:27:01 TP0] ...``.
_RECORD = re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")
_BATCH = re.compile(r"(?:Prefill|Decode) batch[,.]")

Redact = Callable[[str], str]


def _shown(text: str, redact: Redact) -> str:
    """Masked, then cut: a secret is masked whole before the cut could leave half of it."""
    text = redact(text.rstrip())
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + "…"


def tail_lines(path: Path) -> list[str]:
    """The lines of the last LOG_TAIL_BYTES of a log (the first, cut, line dropped)."""
    if not path.is_file():
        return []
    with open(path, "rb") as log:
        size = log.seek(0, 2)
        start = max(0, size - LOG_TAIL_BYTES)
        log.seek(start)
        lines = log.read().decode("utf-8", "replace").splitlines()
    return lines[1:] if start else lines


def kernel_api_calls(lines: Iterable[str], redact: Redact) -> tuple[list[KernelApiCall], int]:
    """The last KERNEL_API_CALLS calls in ``lines`` and how many came before them. A line that is
    not of a call's record (another log's, in a shared stream) ends the call's lines."""
    kept: deque[KernelApiCall] = deque(maxlen=KERNEL_API_CALLS)
    seen = 0
    current: KernelApiCall | None = None
    for line in lines:
        call = _CALL.search(line)
        if call:
            seen += 1
            current = KernelApiCall(time=call["time"], function=_shown(call["function"], redact))
            kept.append(current)
            continue
        raised = _RAISED.search(line)
        if raised:
            for earlier in reversed(kept):
                if earlier.function == _shown(raised["function"], redact):
                    earlier.exception = _shown(raised["what"], redact)
                    break
            current = None
        elif current is not None and line.strip() and not line.startswith("=" * 20):
            if not _CALL_LINE.match(line):
                current = None
                continue
            current.returned = current.returned or line.startswith("Output:")
            if len(current.lines) < CALL_LINES:
                current.lines.append(_shown(line, redact))
            else:
                current.omitted_lines += 1
    return list(kept), seen - len(kept)


def py_spy_stacks(lines: list[str], redact: Redact) -> list[SpyStacks]:
    """py-spy's dumps SGLang logged (``Pyspy dump for PID N (...):`` and the dump's lines up to
    the next record), and its failures (``Pyspy failed (...). Error: ...``); per pid the last
    word, a dump before a failure of a later attempt kept."""
    by_pid: dict[int | None, SpyStacks] = {}
    at = 0
    while at < len(lines):
        line = lines[at]
        dumped, failed = _SPY_DUMP.search(line), _SPY_FAILED.search(line)
        at += 1
        if dumped:
            start = at
            while at < len(lines) and not _RECORD.match(lines[at]) and not _SPY_DUMP.search(lines[at]):
                at += 1
            by_pid[int(dumped["pid"])] = _stacks(int(dumped["pid"]), lines[start:at], redact)
        elif failed:
            pid = _PID.search(failed["command"])
            key = int(pid[1]) if pid else None
            if key not in by_pid or by_pid[key].error is not None:
                by_pid[key] = SpyStacks(pid=key, error=_shown(failed["error"], redact))
    return list(by_pid.values())


def _stacks(pid: int, lines: list[str], redact: Redact) -> SpyStacks:
    dump = pyspy.read("\n".join(lines))
    threads = [SpyThread(thread=thread.thread, name=thread.name, state=thread.state,
                         frames=[_shown(frame.place(), redact) for frame in thread.frames[:SPY_FRAMES]])
               for thread in dump.threads[:SPY_THREADS]]
    error = _shown(dump.error, redact) if dump.error else None
    return SpyStacks(pid=pid, threads=threads,
                     error=error if threads or error else "the log holds no thread of the dump")


def batch_lines(lines: Iterable[str], redact: Redact) -> list[str]:
    """The scheduler's last BATCH_LINES batch lines."""
    kept: deque[str] = deque((line for line in lines if _BATCH.search(line)), maxlen=BATCH_LINES)
    return [_shown(line, redact) for line in kept]


def crash_snapshot(path: Path, run_dir: Path, redact: Redact) -> CrashSnapshot:
    """A snapshot's top-level fields as written (compact JSON), masked and cut."""
    shown = str(path.relative_to(run_dir))
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        return CrashSnapshot(path=shown, fields={}, error=f"not readable JSON ({type(exc).__name__})")
    if not isinstance(value, dict):
        return CrashSnapshot(path=shown, fields={}, error=f"a JSON {type(value).__name__}, not an object")
    fields = {_shown(str(name), redact): _shown(json.dumps(field, separators=(",", ":"),
                                                            default=str), redact)
              for name, field in list(value.items())[:SNAPSHOT_FIELDS]}
    return CrashSnapshot(path=shown, fields=fields, omitted_fields=max(0, len(value) - SNAPSHOT_FIELDS))


def kernel_api_files(env: dict[str, str], cwd: Path, since: float) -> list[Path]:
    """The files SGLang's kernel-API log went to in this incarnation: SGLANG_KERNEL_API_LOGDEST
    where it names a file (``%i``: any pid), relative to the server's folder."""
    destination = env.get(DESTINATION_VARIABLE, "stdout")
    if env.get(LEVEL_VARIABLE, "0").strip() in ("", "0") or destination in ("stdout", "stderr"):
        return []
    pattern = glob.escape(str(cwd / destination)).replace("%i", "*")
    return sorted(path for path in map(Path, glob.glob(pattern))
                  if path.is_file() and path.stat().st_mtime >= since)


def _adopted(run_dir: Path, sources: list[Path], folder: Path, kind: str) -> list[FileRecord]:
    records = []
    for source in sources:
        if source.resolve().is_relative_to(run_dir.resolve()):
            records.append(collect.record(run_dir, source, kind))
            continue
        folder.mkdir(parents=True, exist_ok=True)
        destination = files.free_name(folder / source.name)
        files.adopt(source, destination)
        records.append(collect.record(run_dir, destination, kind, origin=str(source)))
    return records


def collect_and_read(run_dir: Path, dirs: IncarnationDir, env: dict[str, str], cwd: Path,
                     since: float, request_dumps: list[FileRecord], host: str,
                     redact: Redact) -> tuple[list[FileRecord], SGLangRecords | None]:
    """(the files kept, to list in the manifest; what they and the logs say, None where SGLang
    wrote none of it). Snapshots are the JSON files beside the incarnation's request dumps (all
    collected under its requests/ folder) and beside those it adopted from the user's folder."""
    kernel_logs = _adopted(run_dir, kernel_api_files(env, cwd, since), dirs.path / KERNEL_API_FOLDER,
                           "kernel-api-log")
    snapshots = [collect.record(run_dir, path, "crash-snapshot")
                 for path in sorted(dirs.requests.rglob("*.json"))]
    origins = {Path(r.origin).parent for r in request_dumps if r.origin}
    snapshots += _adopted(run_dir, [path for folder in sorted(origins) for path in sorted(folder.glob("*.json"))
                                    if path.stat().st_mtime >= since], dirs.requests / host, "crash-snapshot")
    streams = {stream: tail_lines(dirs.log(stream)) for stream in ("stderr", "stdout")}
    records = SGLangRecords(
        kernel_api=[log for log in (_kernel_api(f"{dirs.path.name}/{stream}.log", lines, redact)
                                    for stream, lines in streams.items()) if log]
        + [log for log in (_kernel_api(r.path, tail_lines(run_dir / r.path), redact)
                           for r in kernel_logs) if log],
        py_spy=[stacks for lines in streams.values() for stacks in py_spy_stacks(lines, redact)],
        batches=batch_lines((line for lines in streams.values() for line in lines), redact),
        crash_snapshots=[crash_snapshot(run_dir / r.path, run_dir, redact) for r in snapshots])
    return kernel_logs + snapshots, None if records.empty() else records


def _kernel_api(source: str, lines: list[str], redact: Redact) -> KernelApiLog | None:
    calls, omitted = kernel_api_calls(lines, redact)
    return KernelApiLog(source=source, calls=calls, omitted_calls=omitted) if calls else None
