"""The crash oracle: did the server crash while (or just after) the requests were replayed?

Evidence, any one of which counts: the server process exited (when crashlab started it or was
given its pid), /health failed (an error status, a refused connection, or no answer within the
health timeout: a hung scheduler), a /generate connection was refused mid-run, a new file
appeared under --watch-cores, or a fault line appeared in --watch-log: a crash line of
crashlab.logpatterns (the one list serve and the signatures read too), or one of the user's
--fault-pattern expressions. A monitor thread polls all of them; the sender reports refused
connections itself. The fault lines (and, once one has been
seen, compute-sanitizer's frames after it) are kept as evidence for signature.py's verdict,
masked (crashlab.privacy.redact) before they are kept: they reach the result JSON and its views.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil
import requests

from ..errors import BadInput
from ..logpatterns import crash_line
from ..privacy.redact import PLAIN
from .result import Signal
from .signature import PYTHON_EXCEPTION

#: Lines that are evidence only after a fault line: compute-sanitizer's frames and threads, and
#: the exception line that ends the traceback of "Scheduler hit an exception".
EVIDENCE_PATTERNS = (r"^=+\s+(?:at |by thread |Address |Saved host backtrace)", PYTHON_EXCEPTION)
#: Evidence lines kept per attempt.
MAX_LINES = 200
_CORE_DEPTH = 3  # SGLang writes <crash-dump-folder>/<host>/core.cuda.<t>.<pid>


def _files(folder: Path, depth: int = _CORE_DEPTH) -> set[str]:
    found: set[str] = set()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        if entry.is_file(follow_symlinks=False):
            found.add(entry.path)
        elif depth > 1 and entry.is_dir(follow_symlinks=False):
            found |= _files(Path(entry.path), depth - 1)
    return found


class LogWatch:
    """New lines of a log file that are crash lines (crashlab.logpatterns.crash_line) or match
    one of the user's PATTERNS (the file may not exist yet)."""

    def __init__(self, path: Path, patterns: Iterable[str] = (), evidence=EVIDENCE_PATTERNS,
                 redact: Callable[[str], str] = PLAIN.text):
        self.path = path
        self.redact = redact
        patterns = tuple(patterns)
        self.pattern = re.compile("|".join(f"(?:{pattern})" for pattern in patterns)) \
            if patterns else None
        self.evidence = re.compile("|".join(f"(?:{pattern})" for pattern in evidence))
        self.offset = self._size()
        self.partial = b""
        self.lines: list[str] = []  # fault lines, then evidence lines once a fault was seen

    def fault(self, text: str) -> bool:
        """Whether one line of the log (stripped) is a fault line."""
        return crash_line(text) is not None or bool(self.pattern and self.pattern.search(text))

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def matches(self) -> list[str]:
        size = self._size()
        if size < self.offset:  # truncated or rotated: read from the start
            self.offset, self.partial = 0, b""
        if size == self.offset:
            return []
        with open(self.path, "rb") as log:
            log.seek(self.offset)
            data = self.partial + log.read(size - self.offset)
        self.offset = size
        lines = data.split(b"\n")
        self.partial = lines.pop()
        found = []
        for text in (line.decode("utf-8", "replace").strip() for line in lines):
            fault = self.fault(text)
            if not (fault or (self.lines and self.evidence.search(text))):
                continue
            text = self.redact(text)
            if fault:
                found.append(text)
            if len(self.lines) < MAX_LINES:
                self.lines.append(text[:500])
        return found


@dataclass
class Watch:
    """What the oracle watches besides /health, and how patiently."""

    pid: int | None = None
    cores: Path | None = None
    log: Path | None = None
    #: the user's --fault-pattern expressions, besides logpatterns' crash lines
    patterns: tuple[str, ...] = ()
    health_interval: float = 1.0
    health_timeout: float = 20.0
    settle: float = 3.0

    def __post_init__(self):
        """Refuse what would only fail once a server is up: bad patterns, a pid that is gone."""
        for pattern in self.patterns:
            try:
                re.compile(pattern)
            except re.error as problem:
                raise BadInput(f"--fault-pattern {pattern!r}: {problem}") from None
        if self.pid is not None and not psutil.pid_exists(self.pid):
            raise BadInput(f"--pid {self.pid}: no such process")


class Oracle:
    """Watches one replay run; ``signals`` is the evidence found, ``tripped`` set on the first."""

    def __init__(self, url: str, watch: Watch | None = None, *,
                 child: subprocess.Popen | None = None, server_log: Path | None = None,
                 redact: Callable[[str], str] = PLAIN.text):
        """``server_log``: the log of the server crashlab started, watched when ``watch`` names none."""
        watch = watch or Watch()
        log = watch.log or server_log
        self.url = url.rstrip("/")
        self.pid = child.pid if child else watch.pid
        self.child = child
        self.cores = watch.cores
        self.log = LogWatch(log, watch.patterns, redact=redact) if log else None
        self.health_interval = watch.health_interval
        self.health_timeout = watch.health_timeout
        self.signals: list[Signal] = []
        self.tripped = threading.Event()
        self.lock = threading.Lock()
        self.kinds_seen: set[str] = set()
        self.core_baseline = _files(self.cores) if self.cores else set()
        self.new_cores: list[str] = []
        pid = watch.pid
        self.process = psutil.Process(pid) if pid and not child and psutil.pid_exists(pid) else None
        self.started = time.monotonic()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._monitor, name="crashlab-oracle", daemon=True)
        self.health = threading.Thread(target=self._health_loop, name="crashlab-health", daemon=True)

    def start(self) -> Oracle:
        self.started = time.monotonic()
        self.thread.start()
        self.health.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def add(self, kind: str, detail: str) -> None:
        """Record evidence; the first of each kind is kept (a dead server refuses every request)."""
        with self.lock:
            if kind in self.kinds_seen:
                return
            self.kinds_seen.add(kind)
            self.signals.append(Signal(kind=kind, detail=detail,
                                       at_s=round(time.monotonic() - self.started, 3)))
        self.tripped.set()

    def check(self) -> None:
        """One look at the process, the coredump folder and the log."""
        if self.child is not None and self.child.poll() is not None:
            self.add("exited", f"server process {self.pid} exited with code {self.child.returncode}")
        if self.process is not None and not _alive(self.process):
            self.add("exited", f"server process {self.pid} exited")
        if self.cores is not None:
            new = sorted(_files(self.cores) - self.core_baseline)
            self.new_cores = new
            if new:
                more = f" (+{len(new) - 1} more)" if len(new) > 1 else ""
                self.add("coredump", f"new file {new[0]}{more}")
        if self.log is not None:
            lines = self.log.matches()
            if lines:
                self.add("log", f"{self.log.path}: {lines[0][:300]}")

    @property
    def fault_lines(self) -> list[str]:
        return list(self.log.lines) if self.log is not None else []

    def check_health(self) -> None:
        try:
            reply = requests.get(f"{self.url}/health", timeout=self.health_timeout)
        except requests.Timeout:
            self.add("health", f"/health gave no answer within {self.health_timeout:g} s")
        except requests.ConnectionError as problem:
            self.add("health", f"/health connection failed ({_reason(problem)})")
        else:
            if reply.status_code != 200:
                self.add("health", f"/health answered HTTP {reply.status_code}")

    def _monitor(self) -> None:
        while not self.stopped.wait(min(0.2, self.health_interval)):
            self.check()

    def _health_loop(self) -> None:
        while not self.stopped.wait(self.health_interval):
            self.check_health()


def _reason(problem: Exception) -> str:
    text = str(problem)
    for known in ("Connection refused", "Connection reset", "Remote end closed", "timed out"):
        if known in text:
            return known.lower()
    return type(problem).__name__


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
