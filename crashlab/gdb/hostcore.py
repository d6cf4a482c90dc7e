"""The native stack of a host core: GNU gdb's ``bt`` of the thread that crashed, bounded in time.

gdb loads ``EXECUTABLE CORE`` and selects the thread that took the signal, so ``bt`` shows the
crashing thread. Every step has a deadline (the driver interrupts, then kills, a gdb that does
not come back); what stops it is returned as a reason, never raised.

gdb needs the executable to unwind (``gdb -c core`` alone shows ``?? ()``), and a process's
command line does not name it reliably: SGLang's ranks retitle themselves
(``sglang::scheduler_TP0``), ``python3`` may be a pyenv shim script. The core names it: its
NT_FILE note lists the files mapped into the process, the executable at the lowest address.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.segments import NoteSegment

from ..report.hoststacks import NativeStack
from . import parse
from .driver import Debugger

#: seconds gdb may take to load a core and its shared libraries, and to unwind
LOAD_TIMEOUT = 60.0
BT_TIMEOUT = 30.0
#: frames kept: a runaway recursion is not read to its end
MAX_FRAMES = 64
#: a note segment larger than this is not a real core's (NT_FILE of a big server is ~1 MB)
MAX_NOTE_BYTES = 64 << 20
_TERMINATED = re.compile(r"Program terminated with signal (?P<signal>[A-Z0-9]+, [^.\n]+)")


def executable_in(core: Path) -> str | None:
    """The program that dumped CORE, from its NT_FILE note, if it still exists here."""
    files = _note(core, "NT_FILE")
    return _lowest_mapping(files) if files is not None else None


def dumped_pid(core: Path) -> int | None:
    """The pid of the process that dumped CORE (its NT_PRPSINFO note), None if unreadable."""
    info = _note(core, "NT_PRPSINFO")
    return info["pr_pid"] if info is not None else None


def _note(core: Path, kind: str):
    """The parsed descriptor of CORE's first note of KIND; None if CORE is not a readable core."""
    try:
        with open(core, "rb") as f:
            elf = ELFFile(f)
            if elf["e_type"] != "ET_CORE":
                return None
            for segment in elf.iter_segments():
                # pyelftools reads every PT_NOTE segment as a NoteSegment
                if not isinstance(segment, NoteSegment) or segment["p_filesz"] > MAX_NOTE_BYTES:
                    continue
                for note in segment.iter_notes():
                    if note["n_type"] == kind:
                        return note["n_desc"]
    except (OSError, ELFError, ValueError, KeyError, IndexError, TypeError):
        return None
    return None


def _lowest_mapping(files) -> str | None:
    # A stranger's core: an NT_FILE note with fewer names than entries pairs what it has.
    entries = sorted(zip(files["Elf_Nt_File_Entry"], files["filename"], strict=False),
                     key=lambda pair: pair[0]["vm_start"])
    if not entries:
        return None
    path = os.fsdecode(entries[0][1])
    return path if os.path.isfile(path) else None


def native_stack(core: Path, executable: str | None = None, *, gdb: str | None = None,
                 shown_as: str | None = None) -> NativeStack:
    """``bt`` of CORE's crashing thread. EXECUTABLE is the program that dumped it; by default
    (or where it does not exist) the one the core names.

    SHOWN_AS is the core's path as the report names it (relative to the run directory).
    """
    program = gdb or shutil.which("gdb")
    stack = NativeStack(core=shown_as or str(core))
    if program is None:
        stack.unavailable_reason = "GNU gdb not found on PATH: the host core was kept, not read"
        return stack
    if executable is None or not os.path.isfile(executable):
        executable = executable_in(core)
    if executable is None:
        stack.unavailable_reason = ("the core names no executable that exists here: gdb cannot "
                                    "unwind it without one")
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
