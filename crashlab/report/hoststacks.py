"""The host side of a crash: the Python stack faulthandler printed and the native stack of a core.

A server that dies of a host signal (SIGSEGV in an extension, SIGABRT from a C++ assert) leaves
no GPU coredump; what is left to debug is what Python's faulthandler wrote to stderr before the
process died (``PYTHONFAULTHANDLER=1``, which serve sets) and the host core, read with gdb.

faulthandler's block, as CPython 3.8-3.13 print it (Python/traceback.c, Modules/faulthandler.c)::

    Fatal Python error: Segmentation fault

    Thread 0x00007f7e0b5c56c0 (most recent call first):
      File "/usr/lib/python3.11/threading.py", line 982 in run

    Current thread 0x00007f7e0c409b80 (most recent call first):
      File "/srv/app.py", line 3 in inner
      File "/srv/app.py", line 7 in <module>

    Extension modules: numpy.core._multiarray_umath, ... (total: 12)

``Stack (most recent call first):`` replaces the thread line when threads are not shown; frames
beyond 100 are cut with ``  ...``. Several processes writing one stderr (SGLang's ranks) each
print their own block, so every block is read.
"""

from __future__ import annotations

import re

from pydantic import Field

from ..published import ClosedModel as _Model
from ..published import empty_list
from .debugger import DebuggerFrame

_FATAL = re.compile(r"^Fatal Python error: (?P<error>.+?)\s*$")
_THREAD = re.compile(r"^(?P<current>Current thread|Thread) (?P<ident>0x[0-9a-fA-F]+) "
                     r"\(most recent call first\):\s*$")
_STACK = re.compile(r"^Stack \(most recent call first\):\s*$")
_FILE = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<function>.+?)\s*$')
#: where faulthandler's output leaves off: none of its own lines start so
_END = re.compile(r"^(?:Extension modules:|\S)")


class PythonFrame(_Model):
    """One frame of faulthandler's stack: 'File "FILE", line N in FUNCTION'."""

    file: str
    """The file the frame names, as printed."""
    line: int | None = None
    """None where faulthandler printed ???"""
    function: str
    """The function the frame names, as printed ('<module>' for module level)."""


class PythonStack(_Model):
    """One faulthandler block: the crashing thread's frames, innermost first."""

    error: str
    """faulthandler's 'Fatal Python error: ...', e.g. Segmentation fault"""
    thread: str | None = None
    """the crashing thread's id as printed (0x...)"""
    frames: list[PythonFrame] = Field(default_factory=empty_list)
    """The crashing thread's frames, innermost first (faulthandler cuts at 100)."""
    other_threads: int = 0
    """how many other threads' stacks the block showed"""


class NativeStack(_Model):
    """The crashing thread of a host core as gdb's ``bt`` shows it, or why there is none."""

    core: str | None = None
    """the host core, relative to the run directory"""
    frames: list[DebuggerFrame] = Field(default_factory=empty_list)
    """gdb's bt of the crashing thread, innermost first; empty where there is no core or gdb."""
    signal: str | None = None
    """gdb's 'terminated with signal SIGSEGV, ...'"""
    unavailable_reason: str | None = None
    """Why there are no frames (no host core was written, no gdb); null where frames are listed."""


def faulthandler_stacks(text: str) -> list[PythonStack]:
    """Every faulthandler block in a log, in order; the crashing thread's frames of each."""
    stacks: list[PythonStack] = []
    current: PythonStack | None = None
    reading: list[PythonFrame] | None = None  # the frames of the thread being read, if any
    for line in text.splitlines():
        fatal = _FATAL.match(line)
        if fatal:
            current = PythonStack(error=fatal["error"])
            stacks.append(current)
            reading = None
            continue
        if current is None:
            continue
        reading = _thread_start(line, current, reading)
        frame = _FILE.match(line)
        if frame and reading is not None:
            reading.append(PythonFrame(file=frame["file"], function=frame["function"],
                                       line=int(frame["line"]) if frame["line"].isdigit() else None))
        elif frame is None and line.strip() and _END.match(line) and not _THREAD.match(line) \
                and not _STACK.match(line):
            current, reading = None, None  # the block is over: the rest is the server's output
    return stacks


def _thread_start(line: str, stack: PythonStack, reading: list[PythonFrame] | None):
    """The frame list a thread header opens (the crashing thread's goes into the stack)."""
    thread = _THREAD.match(line)
    if thread and thread["current"] == "Current thread":
        stack.thread = thread["ident"]
        return stack.frames
    if thread:
        stack.other_threads += 1
        return []
    if _STACK.match(line):
        return stack.frames
    return reading
