"""``crashlab debug``: an interactive cuda-gdb already on the dump, its focus on the first fault,
the way ``coredumpctl debug`` opens gdb on a host core. crashlab replaces itself with the
debugger (exec), so the terminal, signals and exit status are the debugger's own."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from ..errors import BadInput
from ..report.model import Fault, TriageReport


def focus_command(fault: Fault | None) -> str | None:
    """The CLI focus switch onto a fault's lane; None for a fault with no thread left."""
    if fault is None or fault.warp is None or fault.lane is None:
        return None
    return f"cuda device {fault.device} sm {fault.sm} warp {fault.warp} lane {fault.lane}"


def command_line(program: str, core: str, report: TriageReport, *, host_core: str | None = None,
                 exe: str | None = None) -> list[str]:
    """argv of the interactive session. With a host core, cuda-gdb loads both cores in one
    ``target core HOST GPU`` (its corelow.c splits that line at spaces, so neither path may
    hold one) and needs the executable to make sense of the host core."""
    if report.source.compressed:
        raise BadInput(f"{core}: cuda-gdb cannot read a gzip-compressed dump; gunzip it first")
    if not Path(core).is_file():
        raise BadInput(f"{core}: cuda-gdb reads only files, not pipes or standard input")
    if host_core is not None and exe is None:
        raise BadInput("--host-core needs --exe: cuda-gdb reads a host core only with its executable")
    for label, path in (("--exe", exe), ("--host-core", host_core)):
        if path is not None and not Path(path).is_file():
            raise BadInput(f"{label} {path}: no such file")
    core = str(Path(core).resolve())
    argv = [program, "-q"] + ([str(Path(exe).resolve())] if exe else [])
    if host_core is not None:
        host = str(Path(host_core).resolve())
        if " " in host or " " in core:
            raise BadInput("cuda-gdb's 'target core HOST GPU' cannot take a path with a space; "
                           "move or link the files")
        argv += ["-ex", f"target core {host} {core}"]
    else:
        argv += ["-ex", f"target cudacore {core}"]
    focus = focus_command(next((f for f in report.faults if focus_command(f)), None))
    if focus:
        argv += ["-ex", focus]
    return argv


def printable(argv: list[str]) -> str:
    return shlex.join(argv)


def exec_debugger(argv: list[str]) -> None:
    """Become the debugger. Returns only if the exec itself fails (OSError)."""
    os.execv(argv[0], argv)
