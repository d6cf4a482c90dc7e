"""``crashlab dump-now <run>``: make a hung server's GPUs dump their state, now.

With CUDA_ENABLE_USER_TRIGGERED_COREDUMP=1 (``serve --user-dumps``) the driver of every CUDA
process opens a named pipe (CUDA_COREDUMP_PIPE, ``pipes/corepipe.cuda.%h.%p`` in the run);
writing to it makes that process write a coredump of all its GPUs and carry on. SGLang's own
crash path writes ``b"1"`` into its schedulers' pipes; so does this. The running ``crashlab
serve`` collects the dumps as for a crash; this waits until they are in its manifest.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..errors import BadInput, EnvironmentProblem
from ..report.run import FileRecord
from . import environment, manifest

POLL = 0.25


@dataclass
class DumpNowResult:
    triggered: list[str]
    collected: list[FileRecord]


def _supervisor_running(record: manifest.Crashlab) -> bool:
    try:
        return abs(psutil.Process(record.pid).create_time() - record.process_started) < 0.05
    except psutil.Error:
        return False


def live_run(run_dir: Path) -> manifest.Manifest:
    """The manifest of a run whose server and crashlab serve are still running; the reason
    otherwise (BadInput: not a run directory; EnvironmentProblem: ended)."""
    record = manifest.load(run_dir)
    if record.status == "done" or not record.incarnations:
        raise EnvironmentProblem(f"{run_dir}: this run has ended; there is no server to dump")
    if not _supervisor_running(record.crashlab):
        raise EnvironmentProblem(f"{run_dir}: its crashlab serve (pid {record.crashlab.pid}) is "
                                 "not running")
    return record


def pipe_pattern(run_dir: Path, record: manifest.Manifest) -> str | None:
    """The glob of the run's coredump pipes (None: the pipe is a command); BadInput where
    user-triggered coredumps are off."""
    enabled = record.environment.get(environment.USER_TRIGGER)
    pipe = record.environment.get(environment.PIPE)
    if enabled is None or enabled.value != "1" or pipe is None:
        raise BadInput(f"{run_dir}: user-triggered coredumps are off in this run "
                       "(start it with crashlab serve --user-dumps)")
    return environment.template_glob(str(Path(record.cwd) / pipe.value))


def live_pipes(pattern: str | None) -> list[str]:
    """The pipes of PATTERN that exist now (each is a process that has initialised CUDA)."""
    return [path for path in sorted(glob.glob(pattern)) if _is_fifo(path)] if pattern else []


def _is_fifo(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def _trigger(pipes: list[str]) -> list[str]:
    triggered = []
    for path in pipes:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENOENT):  # no reader: that process has ended
                continue
            raise EnvironmentProblem(f"{path}: cannot be opened ({exc.strerror})") from None
        try:
            os.write(fd, b"1")
            triggered.append(path)
        finally:
            os.close(fd)
    return triggered


def dump_now(run_dir: Path, timeout: float = 120.0) -> DumpNowResult:
    run_dir = Path(run_dir)
    record = live_run(run_dir)
    pipe = record.environment.get(environment.PIPE)
    pattern = pipe_pattern(run_dir, record)
    before = {f.path for f in record.files if f.kind == "coredump"}
    triggered = _trigger(live_pipes(pattern))
    if not triggered:
        raise EnvironmentProblem(f"no live coredump pipe matches {pipe.value if pipe else None}: "
                                 "the server has not initialised CUDA yet, or has ended")
    deadline = time.monotonic() + timeout
    collected: list[FileRecord] = []
    while time.monotonic() < deadline:
        current = manifest.load(run_dir)
        collected = [f for f in current.files if f.kind == "coredump" and f.path not in before]
        if len(collected) >= len(triggered) or current.status == "done":
            break
        time.sleep(POLL)
    return DumpNowResult(triggered, collected)
