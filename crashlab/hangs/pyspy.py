"""The text of ``py-spy dump --native``: each thread of a process and its frames, innermost first.

py-spy writes (0.3 and 0.4)::

    Process 2629: /usr/bin/python worker.py
    Python v3.11.7 (/usr/bin/python3.11)

    Thread 2629 (idle): "MainThread"
        pthread_cond_wait (libc.so.6)
        all_reduce (torch/distributed/distributed_c10d.py:3913)
        main (worker.py:22)

A frame line ends with its place in parentheses: ``file.py:line`` for Python code (and
``<frozen runpy>:198``), a library (``libc.so.6``) for native code without line information;
a native function's name may hold parentheses of its own, so the place is the last group.
``--locals`` adds indented ``Arguments:``/``Locals:`` blocks, which are skipped; ``--subprocesses``
adds a ``Process`` block per child. A py-spy that failed (``Error: ...``) leaves no thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .clip import clipped

_PROCESS = re.compile(r"^Process (\d+): ?(.*)$")
_PYTHON = re.compile(r"^Python v(\S+)")
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([^)]*)\)(?:: "(.*)")?\s*$')
_PYTHON_PLACE = re.compile(r"^(.*\.pyw?|<[^>]+>):(\d+)$")
#: A frame line is indented four spaces; --locals' blocks eight or more.
_FRAME_INDENT = "    "


@dataclass(frozen=True)
class StackFrame:
    function: str
    file: str | None
    """The Python file (as py-spy shortens it) or the native library."""
    line: int | None
    native: bool

    def place(self) -> str:
        """``worker.py:7 recv_requests``; a native frame as ``c10d::Work::wait (libtorch_cpu.so)``."""
        if self.native:
            return f"{self.function} ({self.file})" if self.file else self.function
        return f"{self.file}:{self.line} {self.function}"


@dataclass
class ThreadStack:
    thread: str
    name: str | None
    state: str
    """py-spy's word: idle, active, gil, active+gil"""
    frames: list[StackFrame] = field(default_factory=list)

    def python_frames(self) -> list[StackFrame]:
        return [frame for frame in self.frames if not frame.native]

    def key(self) -> tuple:
        """What makes two samples of a thread the same stack: its Python frames, lines included
        (native frames hold addresses that move while a process waits in one place)."""
        return tuple((f.function, f.file, f.line) for f in self.python_frames())


@dataclass
class PySpyDump:
    pid: int | None
    command: str | None
    python: str | None
    threads: list[ThreadStack]
    error: str | None = None
    """py-spy's own error line, where it wrote one and no thread."""

    def main_thread(self) -> ThreadStack | None:
        """The thread a rank's collectives run on: MainThread, else the first with Python code."""
        named = [t for t in self.threads if t.name == "MainThread"]
        if named:
            return named[0]
        return next((t for t in self.threads if t.python_frames()), None)


def read(text: str) -> PySpyDump:
    """The dump in ``text``; lines of no known shape are skipped, never refused."""
    pid = command = python = error = None
    threads: list[ThreadStack] = []
    current: ThreadStack | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line:
            continue
        if not line.startswith(" "):
            current = None
            if (found := _PROCESS.match(line)) and pid is None:
                pid, command = int(found[1]), clipped(found[2])
            elif found := _PYTHON.match(line):
                python = clipped(found[1])
            elif found := _THREAD.match(line):
                current = ThreadStack(thread=found[1], name=clipped(found[3]) if found[3] else None,
                                      state=clipped(found[2]))
                threads.append(current)
            elif line.startswith("Error") and error is None:
                error = clipped(line)
        elif current is not None and line.startswith(_FRAME_INDENT) and line[4] != " ":
            frame = _frame(line.strip())
            if frame is not None:
                current.frames.append(frame)
    return PySpyDump(pid, command, python, threads, error if not threads else None)


def _frame(text: str) -> StackFrame | None:
    if not text.endswith(")") or " (" not in text:
        return None
    function, _, place = text[:-1].rpartition(" (")
    python = _PYTHON_PLACE.match(place)
    if python:
        return StackFrame(clipped(function), clipped(python[1]), int(python[2]), native=False)
    return StackFrame(clipped(function), clipped(place) or None, None, native=True)

