"""The native stack of a host core: GNU gdb's ``bt`` of the thread that crashed, bounded in time.

gdb loads ``EXECUTABLE CORE`` and selects the thread that took the signal, so ``bt`` shows the
crashing thread. Every step has a deadline (the driver interrupts, then kills, a gdb that does
not come back); what stops it is returned as a reason, never raised.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ..report.hoststacks import NativeStack
from . import parse
from .driver import Debugger

#: seconds gdb may take to load a core and its shared libraries, and to unwind
LOAD_TIMEOUT = 60.0
BT_TIMEOUT = 30.0
#: frames kept: a runaway recursion is not read to its end
MAX_FRAMES = 64
_TERMINATED = re.compile(r"Program terminated with signal (?P<signal>[A-Z0-9]+, [^.\n]+)")


def native_stack(core: Path, executable: str, *, gdb: str | None = None,
                 shown_as: str | None = None) -> NativeStack:
    """``bt`` of CORE's crashing thread, EXECUTABLE being the program that dumped it.

    SHOWN_AS is the core's path as the report names it (relative to the run directory).
    """
    program = gdb or shutil.which("gdb")
    stack = NativeStack(core=shown_as or str(core))
    if program is None:
        stack.unavailable_reason = "GNU gdb not found on PATH: the host core was kept, not read"
        return stack
    with Debugger(program, args=[executable, str(core)], start_timeout=LOAD_TIMEOUT) as debugger:
        loaded = debugger.start()
        if not loaded.ok:
            stack.unavailable_reason = f"gdb could not load the core: {loaded.note or loaded.status}"
            return stack
        terminated = _TERMINATED.search(loaded.output)
        stack.signal = terminated["signal"] if terminated else None
        reply = debugger.run(f"bt {MAX_FRAMES}", BT_TIMEOUT)
    if not reply.ok:
        stack.unavailable_reason = f"gdb's bt did not finish: {reply.note or reply.status}"
        return stack
    stack.frames = parse.backtrace(reply.output)
    if not stack.frames:
        first = reply.output.strip().splitlines()[:1]
        stack.unavailable_reason = "gdb shows no stack" + (f": {first[0]}" if first else "")
    return stack
