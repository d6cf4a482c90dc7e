"""The debugger's part of the triage model: cuda-gdb's answers beside crashlab's own.

crashlab.gdb fills DebuggerSection (inspect --debugger); the native report never depends on it,
so its models live apart from the ones the reader fills.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..published import ClosedModel as _Model
from ..published import empty_list
from .places import Dim3, HexAddress, SourceLine

#: What kept part of the debugger's view from the report.
ProblemKind = Literal["not-cuda-gdb", "start-failed", "cannot-read-dump", "format-too-new",
                      "unknown-exception", "timeout", "died", "command-error", "no-focus", "given-up"]


class DebuggerProblem(_Model):
    """Something the debugger did or said that kept part of its view from the report."""

    kind: ProblemKind
    """What went wrong, e.g. not-cuda-gdb (the tool is another debugger), timeout, died,
    command-error."""
    message: str
    """What the debugger printed, or what crashlab saw, in one line."""
    command: str | None = None
    """The command that met the problem; null where the debugger printed it unasked (while
    loading the dump)."""


class DebuggerCommand(_Model):
    """One command of the session, as sent, with what came back (cut to a few KiB)."""

    command: str
    """The command as sent to cuda-gdb."""
    status: Literal["ok", "timeout", "died", "not-run"]
    """ok: it answered; timeout: no answer in time; died: the debugger exited; not-run: not
    sent, the debugger having given up or failed to restart."""
    seconds: float
    """How long the command took, in seconds."""
    output: str
    """What cuda-gdb printed for it, cut to a few KiB."""
    note: str | None = None
    """What happened to the command (no answer in time, how the debugger died, why it was not
    run); null where it answered."""


class DebuggerFocus(_Model):
    """cuda-gdb's focus: physical (device, sm, warp, lane) and logical coordinates."""

    device: int | None = None
    """The focus's device; null where cuda-gdb did not print it."""
    sm: int | None = None
    """The focus's SM; null where cuda-gdb did not print it."""
    warp: int | None = None
    """The focus's warp slot; null where cuda-gdb did not print it."""
    lane: int | None = None
    """The focus's lane; null where cuda-gdb did not print it."""
    kernel: int | None = None
    """cuda-gdb's kernel number (not the grid id); null where it did not print it."""
    grid: int | None = None
    """The focus's grid id; null where cuda-gdb did not print it."""
    cluster_idx: Dim3 | None = None
    """The focus's cluster (x, y, z); null on launches without clusters."""
    block_idx: Dim3 | None = None
    """The focus's block (x, y, z); null where cuda-gdb did not print it."""
    thread_idx: Dim3 | None = None
    """The focus's thread (x, y, z); null where cuda-gdb did not print it."""


class DebuggerFrame(_Model):
    """One frame of a backtrace as gdb or cuda-gdb prints it."""

    level: int
    """The frame number gdb prints (#0 innermost)."""
    pc: HexAddress | None = None
    """The frame's PC as printed; null where gdb printed none (it omits it at the start of a
    source line)."""
    function: str | None = None
    """The function name as printed, without its arguments or <<<grid,block>>>; null where gdb
    printed none."""
    launch: str | None = None
    """cuda-gdb's <<<grid,block>>> of a kernel frame"""
    file: str | None = None
    """The source file after 'at FILE:LINE', or the shared library after 'from'; null where gdb
    printed neither."""
    line: int | None = None
    """The source line after 'at FILE:'; null where there is none."""
    inlined: str | None = None
    """cuda-gdb's 'in F inlined from FILE:LINE' tail"""


class DebuggerInstruction(_Model):
    """One line of cuda-gdb's x/i disassembly around $errorpc."""

    address: HexAddress
    """The instruction's address as printed."""
    function: str | None = None
    """The function in cuda-gdb's <function+offset>; null where it prints none."""
    offset: int | None = None
    """The offset in <function+offset>; null where it prints none."""
    text: str
    """The instruction as cuda-gdb prints it."""
    marker: Literal["", "=>", "*>", "*=>"] = ""
    """cuda-gdb's markers: => current PC, *> errorPC, *=> both"""

    @property
    def at_error_pc(self) -> bool:
        return self.marker in ("*>", "*=>")

    @property
    def at_current_pc(self) -> bool:
        return self.marker in ("=>", "*=>")


class DebuggerLoad(_Model):
    """What the debugger printed while opening the dump, whatever the order it printed it in."""

    exception: str | None = None
    """'CUDA Exception: ...' or the signal's text"""
    signal: str | None = None
    """e.g. CUDA_EXCEPTION_14, or SIGTRAP for no exception"""
    triggered_pc: HexAddress | None = None
    """The PC of 'The exception was triggered at PC ...'; null where cuda-gdb printed no such
    line (device-scope exceptions name only a device)."""
    triggered_function: str | None = None
    """The function named on that line; null where there is none."""
    triggered_source: str | None = None
    """The 'file:line' named on that line; null where there is none."""
    triggered_device: int | None = None
    """The device of 'The exception was triggered in device N.' (device-scope exceptions); null
    where cuda-gdb printed no such line."""
    assertion: bool = False
    """True where cuda-gdb printed 'Assertion failed.' while loading (a device-side assert)."""
    focus: DebuggerFocus | None = None
    """The focus cuda-gdb set on load ('[Current focus set to CUDA ...]'); null where it printed
    none."""
    frame: DebuggerFrame | None = None
    """The frame cuda-gdb printed after the focus line; null where it printed none."""
    warnings: list[str] = Field(default_factory=empty_list)
    """warning: lines cuda-gdb printed while loading, as printed."""


class DebuggerKernel(_Model):
    """One row of cuda-gdb's 'info cuda kernels'."""

    kernel: int
    """cuda-gdb's kernel number (the Kernel column)."""
    device: int | None = None
    """The Dev column; null where the row lacks it."""
    grid: int | None = None
    """The Grid column, the grid id; null where the row lacks it."""
    status: str | None = None
    """The Status column as printed, e.g. 'Active'; null where the row lacks it."""
    grid_dim: Dim3 | None = None
    """The GridDim column (x, y, z); null where the row lacks it."""
    block_dim: Dim3 | None = None
    """The BlockDim column (x, y, z); null where the row lacks it."""
    name: str
    """The Name column, the kernel's name as cuda-gdb prints it."""
    args: str | None = None
    """The Args column as printed; null where it is empty."""
    current: bool = False
    """True on the row cuda-gdb marks with '*', the kernel in focus."""


class Agreement(_Model):
    """One fact read natively and by the debugger, and whether the two agree."""

    field: Literal["kernel", "exception", "block", "thread", "pc", "registers", "predicates",
                   "uniform", "backtrace", "disassembly", "source"]
    """Which fact was compared."""
    verdict: Literal["agree", "disagree", "unknown"]
    """agree, disagree, or unknown where one side could not read the fact."""
    native: str | None = None
    """The value crashlab read from the dump, as text; null where it read none."""
    debugger: str | None = None
    """The value cuda-gdb printed, as text; null where it printed none."""
    note: str | None = None
    """Why the verdict is unknown or how the values were compared; null where nothing is to be
    said."""


class DebuggerFaultView(_Model):
    """The debugger's view of one natively found fault, taken with its focus on that fault."""

    fault: int
    """index into faults"""
    focus: DebuggerFocus | None = None
    """The focus cuda-gdb reported after switching to the fault; null where it printed none."""
    exception: str | None = None
    """The exception cuda-gdb reported for the focus; null where it printed none."""
    error_pc: HexAddress | None = None
    """cuda-gdb's $errorpc; null where it printed <unavailable> (the warp has exited or its
    errorPC is not valid)."""
    kernel: str | None = None
    """The kernel cuda-gdb names at the focus; null where it named none."""
    source: str | None = None
    """'info line *$errorpc', as printed"""
    source_lines: list[SourceLine] = Field(default_factory=empty_list)
    """'info line *$errorpc' as a chain, innermost first"""
    backtrace: list[DebuggerFrame] = Field(default_factory=empty_list)
    """cuda-gdb's bt at the focus, innermost first."""
    disassembly: list[DebuggerInstruction] = Field(default_factory=empty_list)
    """cuda-gdb's x/i around $errorpc."""
    registers: dict[str, int] = Field(default_factory=dict)
    """cuda-gdb's 'info registers' at the focus: name to unsigned value (those it printed as
    <unavailable> are in registers_unavailable)."""
    registers_unavailable: list[str] = Field(default_factory=empty_list)
    """registers the debugger printed as <unavailable>"""
    agreement: list[Agreement] = Field(default_factory=empty_list)
    """Each fact read natively and by cuda-gdb, compared."""


class DebuggerSection(_Model):
    """cuda-gdb's answers beside crashlab's own; the native report stands whatever happens here."""

    tool: str | None = None
    """the debugger's path"""
    version: str | None = None
    """The debugger's version, from 'show version'; null where it did not start."""
    status: Literal["ok", "partial", "failed", "unavailable"]
    """ok: no problem; partial: problems are listed; failed: the debugger did not start;
    unavailable: no cuda-gdb was found, or the dump came from a pipe."""
    reason: str | None = None
    """why the section is empty or partial, in one sentence"""
    load: DebuggerLoad | None = None
    """What cuda-gdb printed while opening the dump; null where it could not open it."""
    kernels: list[DebuggerKernel] = Field(default_factory=empty_list)
    """cuda-gdb's 'info cuda kernels'."""
    faults: list[DebuggerFaultView] = Field(default_factory=empty_list)
    """cuda-gdb's view of each detailed fault, in the order of the report's faults."""
    problems: list[DebuggerProblem] = Field(default_factory=empty_list)
    """What kept part of the debugger's view from the report."""
    missing_sources: list[str] = Field(default_factory=empty_list)
    """Source files the debugger could not open to list a line ('6<TAB>FILE: No such file or
    directory.'), as the dump's line table names them: paths of the machine that built the
    program. A note, not a problem: the debugger still read the dump and the line numbers."""
    transcript: list[DebuggerCommand] = Field(default_factory=empty_list)
    """Every command of the session with its answer, in order."""
    seconds: float = 0.0
    """How long the whole session took, in seconds."""
