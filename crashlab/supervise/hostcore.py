"""A crashed server's host core, brought into its run directory, or one line saying where it went.

Where the kernel put the core follows kernel.core_pattern (crashlab.env.hostcore decides, for
doctor and serve alike): a file pattern leaves it beside the process or in a folder, and it is
moved into ``cores/`` without ever being lost (a hard link or copy, fsynced, renamed into place,
and only then the original removed); a pipe to systemd-coredump hands it to the journal, where
``coredumpctl dump`` reads it back; apport and other handlers keep it where they keep it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..env.hostcore import Destination
from ..gdb.hostcore import dumped_pid
from . import files

#: how long systemd-coredump may take to store a core (it compresses it) before crashlab says so
COREDUMPCTL_TIMEOUT = 120.0
_RETRY_EVERY = 1.0


@dataclass(frozen=True)
class HostCore:
    path: Path | None  # in the run directory; None: no core here, and ``note`` says why
    note: str


def collect_core(where: Destination | None, pid: int, cwd: Path, since: float, into: Path, *,
                 uses_pid: bool, timeout: float = COREDUMPCTL_TIMEOUT) -> HostCore:
    """The core process PID (started in CWD after SINCE, a time.time()) left, moved into INTO."""
    if where is None:
        return HostCore(None, "kernel.core_pattern cannot be read: where the core went is unknown")
    if where.handler == "systemd-coredump":
        return _from_coredumpctl(pid, into, timeout)
    pattern = where.glob(pid, cwd, uses_pid)
    if pattern is None:  # core_pattern pipes cores to a program
        return HostCore(None, f"no host core in the run directory: {where.where()}")
    problem = where.problem()
    if problem is not None:
        return HostCore(None, problem)
    found = [Path(path) for path in glob.glob(pattern)
             if os.path.isfile(path) and os.stat(path).st_mtime >= since
             and dumped_pid(Path(path)) in (pid, None)]  # a plain "core" may be another's
    if not found:
        return HostCore(None, f"no core of pid {pid} matching {pattern} was written "
                              f"({where.where()})")
    source = max(found, key=lambda path: path.stat().st_mtime)
    into.mkdir(parents=True, exist_ok=True)
    destination = files.free_name(into / source.name)
    files.adopt(source, destination)  # link, or copy + fsync + rename: the original still exists
    source.unlink()
    files.fsync_dir(source.parent)
    return HostCore(destination, f"moved in from {source}")


def _from_coredumpctl(pid: int, into: Path, timeout: float) -> HostCore:
    """``coredumpctl dump PID``, retried while systemd-coredump is still storing the core."""
    program = shutil.which("coredumpctl")
    if program is None:
        return HostCore(None, "systemd-coredump keeps the core (coredumpctl is not here to read "
                              f"it: on the host, coredumpctl dump {pid})")
    into.mkdir(parents=True, exist_ok=True)
    destination = files.free_name(into / f"core.{pid}")
    temporary = destination.with_name(f".{destination.name}.coredumpctl")
    deadline = time.monotonic() + timeout
    answer = ""
    while True:
        try:
            done = subprocess.run([program, "--no-pager", "dump", str(pid), "-o", str(temporary)],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=max(deadline - time.monotonic(), 1.0))
            said = (done.stderr or done.stdout).strip().splitlines()
            answer = said[-1] if said else f"exit {done.returncode}"
            if done.returncode == 0 and temporary.is_file() and temporary.stat().st_size:
                break
        except subprocess.TimeoutExpired:
            answer = f"coredumpctl did not answer within {timeout:g} s"
        if time.monotonic() + _RETRY_EVERY >= deadline:
            temporary.unlink(missing_ok=True)
            return HostCore(None, f"systemd-coredump keeps no core of pid {pid} that coredumpctl "
                                  f"could read within {timeout:g} s ({answer})")
        time.sleep(_RETRY_EVERY)
    files.fsync_file(temporary)
    os.replace(temporary, destination)
    files.fsync_dir(into)
    return HostCore(destination, f"read from systemd-coredump (coredumpctl dump {pid})")
