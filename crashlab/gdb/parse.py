"""Readers of what gdb and cuda-gdb print in their CLI, one function per output kind.

Shapes come from real transcripts (named in tests/test_gdb_parsers.py) and from cuda-gdb's
public source (gdb/cuda/cuda-corelow.c, cuda-exceptions.c, cuda-coords.c, cuda-commands.c):
- loading a dump prints, in an order that differs between releases, ``Opening GPU coredump:``,
  ``CUDA Exception: <name>``, ``The exception was triggered at PC 0x..  <function>  (<file>:<line>
  [in F inlined from FILE:LINE])`` or ``... triggered in device N.``, ``Assertion failed.``,
  ``[Current focus set to CUDA kernel K, grid G, [cluster (..),] block (..), thread (..), device D,
  sm S, warp W, lane L]`` and frame #0, or ``Program terminated with signal SIGTRAP`` when no
  exception is in the dump;
- frames may be wrapped by gdb (a continuation line indented, ``    at file:line``) or by a
  terminal (a continuation that starts mid-word); both are joined back.
Each reader takes the text and returns report-model values; none raises on odd input.
"""

from __future__ import annotations

import re

from ..report.debugger import (
    DebuggerFocus,
    DebuggerFrame,
    DebuggerInstruction,
    DebuggerKernel,
    DebuggerLoad,
    DebuggerProblem,
)
from .mi import dim3, split_invocation

_FOCUS_LINE = re.compile(r"\[(?:Current focus set to|Switching focus to) CUDA (?P<coords>[^\]]*)\]")
_COORD = {
    "kernel": re.compile(r"\bkernel (\d+)"),
    "grid": re.compile(r"\bgrid (-?\d+)"),
    "device": re.compile(r"\bdevice (\d+)"),
    "sm": re.compile(r"\bsm (\d+)"),
    "warp": re.compile(r"\bwarp (\d+)"),
    "lane": re.compile(r"\blane (\d+)"),
}
_DIMS = {
    "cluster_idx": re.compile(r"\bcluster (\([^)]*\))"),
    "block_idx": re.compile(r"\bblock (\([^)]*\))"),
    "thread_idx": re.compile(r"\bthread (\([^)]*\))"),
}
_EXCEPTION = re.compile(r"^CUDA Exception: (?P<name>.+?)\s*$", re.M)
_SIGNAL = re.compile(r"(?:received|terminated with) signal (?P<signal>[A-Z_0-9]+), (?P<text>[^.\n]+)")
_TRIGGERED_AT = re.compile(
    r"The exception was triggered at PC (?P<pc>0x[0-9a-fA-F]+)(?P<rest>[^\n]*)")
_TRIGGERED_IN = re.compile(r"The exception was triggered in device (?P<device>\d+)\.")
_UNHANDLED = re.compile(r"Encountered unhandled device exception \((?P<code>-?\d+)\)")
_FRAME_START = re.compile(r"^#(?P<level>\d+)\s+(?P<rest>.*)$")
_SOURCE_LINE = re.compile(r"^\d+\s")
_FRAME_AT = re.compile(r"\s+at (?P<file>\S+?):(?P<line>\d+)(?: in (?P<inlined>.*))?$")
_FRAME_FROM = re.compile(r"\s+from (?P<file>\S+)$")
_FRAME_PC = re.compile(r"^(?P<pc>0x[0-9a-fA-F]+) in ")
_LAUNCH = re.compile(r"(?P<launch><<<\([^)]*\),\([^)]*\)>>>)\s*$")
_INSTRUCTION = re.compile(
    r"^\s*(?P<marker>\*=>|\*>|=>)?\s*(?P<address>0x[0-9a-fA-F]+)(?:\s+<(?P<symbol>.*)>)?:\s*(?P<text>.*)$")
_LINE_INFO = re.compile(r'Line (?P<line>\d+) of "(?P<file>[^"]+)"')
_INLINED_FROM = re.compile(r"inlined from \S+ at line (?P<line>\d+) of (?P<file>\S+?)\.?(?=\s|$)")
_REGISTER = re.compile(
    r"^(?P<name>[A-Za-z_$][\w$]*)\s+(?:(?P<value>0x[0-9a-fA-F]+)\b|(?P<unavailable><unavailable>))", re.M)
_KERNEL_ROW = re.compile(
    r"^\s*(?P<current>\*)?\s*(?P<kernel>\d+)\s+(?P<parent>\S+)\s+(?P<device>\d+)\s+(?P<grid>-?\d+)\s+"
    r"(?P<status>.+?)\s+(?P<sms>0x[0-9a-fA-F]+)\s+(?P<grid_dim>\(\d+,\d+,\d+\))\s+"
    r"(?P<block_dim>\(\d+,\d+,\d+\))\s+(?P<rest>.*?)\s*$")
_LANE_ROW = re.compile(
    r"^\s*(?P<current>\*)?\s*(?P<lane>\d+)\s+(?P<state>\w+)\s+(?P<pc>0x[0-9a-fA-F]+)\s+"
    r"(?P<thread>\(\d+,\d+,\d+\))\s+(?P<exception>.+?)\s*$")

#: What a failed load says, and the problem kind it is (cuda-corelow.c; NV/cuda-gdb#14 for
#: formats newer than the debugger; GNU gdb for a debugger that is not cuda-gdb).
_LOAD_FAILURES = (
    (re.compile(r'Undefined target command: "cudacore[^\n]*'), "not-cuda-gdb"),
    (re.compile(r"(?:Failed to read core file|Could not open CUDA core file|Failed to get debugger "
                r"APIs|Failed to initialize CUDA Core debugger API)[^\n]*(?:version|ABI|newer|"
                r"unsupported|Unsupported)[^\n]*"), "format-too-new"),
    (re.compile(r"(?:Failed to read core file|Could not open CUDA core file|Failed to get debugger "
                r"APIs|Failed to initialize CUDA Core debugger API)[^\n]*"), "cannot-read-dump"),
    # an older reader's perror on the dump's path; a line that starts with a line number and a
    # tab is gdb listing a source file it cannot open (_UNLISTED_SOURCE), not a failure
    (re.compile(r"^(?!\d+\t)[^\n]*: No such file or directory\.", re.M), "cannot-read-dump"),
)
#: gdb listing the focus's source line from a file it cannot open (source.c, print_source_lines_base:
#: "LINE\tFILE: strerror."): the line table names a path of the machine that built the program.
_UNLISTED_SOURCE = re.compile(r"^\d+\t(?P<file>[^\n]+): No such file or directory\.$", re.M)


def focus_line(text: str) -> DebuggerFocus | None:
    """The last focus line in ``text`` ('[Current focus set to CUDA ...]', '[Switching ...]')."""
    found = _FOCUS_LINE.findall(text)
    return coordinates(found[-1]) if found else None


def coordinates(text: str) -> DebuggerFocus | None:
    """``kernel 0, grid 1, block (0,0,0), thread (0,0,0), device 0, sm 0, warp 0, lane 0``."""
    values: dict = {}
    for name, pattern in _COORD.items():
        match = pattern.search(text)
        values[name] = int(match.group(1)) if match else None
    for name, pattern in _DIMS.items():
        match = pattern.search(text)
        values[name] = dim3(match.group(1)) if match else None
    if all(value is None for value in values.values()):
        return None
    return DebuggerFocus(**values)


def load(text: str) -> tuple[DebuggerLoad, list[DebuggerProblem]]:
    """What opening a dump printed, read in any order, and the problems it reveals."""
    problems = [problem for problem in [load_failure(text)] if problem]
    seen = DebuggerLoad(focus=focus_line(text))
    exception = _EXCEPTION.search(text)
    signal = _SIGNAL.search(text)
    if signal:
        seen.signal = signal.group("signal")
    if exception:
        seen.exception = exception.group("name")
    elif signal and signal.group("signal").startswith("CUDA_EXCEPTION"):
        seen.exception = signal.group("text").strip()
    triggered = _TRIGGERED_AT.search(text)
    if triggered:
        seen.triggered_pc = triggered.group("pc")
        seen.triggered_function, seen.triggered_source = _trigger_tail(triggered.group("rest"))
    device = _TRIGGERED_IN.search(text)
    if device:
        seen.triggered_device = int(device.group("device"))
    seen.assertion = "Assertion failed." in text
    frames = backtrace(text) or _frame_after_focus(text)
    seen.frame = frames[0] if frames else None
    seen.warnings = [line.strip() for line in text.splitlines() if line.startswith("warning:")]
    unhandled = _UNHANDLED.search(text)
    if unhandled or seen.exception == "Device Unknown Exception":
        code = f" (code {unhandled.group('code')})" if unhandled else ""
        problems.append(DebuggerProblem(
            kind="unknown-exception",
            message=f"the debugger does not know this dump's exception{code} and shows 'Device "
                    "Unknown Exception': it is likely older than the driver that wrote the dump",
        ))
    return seen, problems


def _frame_after_focus(text: str) -> list[DebuggerFrame]:
    """A focus switch (and a live stop) prints frame #0 without its '#0' on the next line."""
    lines = text.splitlines()
    for index, line in enumerate(lines[:-1]):
        if _FOCUS_LINE.search(line) and lines[index + 1].strip() and not _SOURCE_LINE.match(lines[index + 1]):
            return backtrace("#0  " + "\n".join(lines[index + 1:]))[:1]
    return []


def load_failure(text: str) -> DebuggerProblem | None:
    for pattern, kind in _LOAD_FAILURES:
        match = pattern.search(text)
        if match:
            return DebuggerProblem(kind=kind, message=match.group(0).strip())
    return None


def unlisted_sources(text: str) -> list[str]:
    """The source files gdb could not open to list a line, in the order it named them."""
    return list(dict.fromkeys(match.group("file") for match in _UNLISTED_SOURCE.finditer(text)))


def _trigger_tail(rest: str) -> tuple[str | None, str | None]:
    """``  fn(int*, int)  (test.cu:6 in f inlined from g.cu:3)`` -> (function, source)."""
    rest = rest.strip()
    source = None
    match = re.search(r"\((?P<source>[^()]*:\d+(?: in .*)?)\)\s*$", rest)
    if match:
        source = match.group("source")
        rest = rest[: match.start()].strip()
    return (rest or None), source


def backtrace(text: str) -> list[DebuggerFrame]:
    """Frames of ``bt`` (or the frame line a load or a focus switch prints)."""
    joined: list[tuple[int, str]] = []
    for line in text.splitlines():
        start = _FRAME_START.match(line)
        if start:
            joined.append((int(start.group("level")), start.group("rest").rstrip()))
        elif joined and line.strip() and not _SOURCE_LINE.match(line) and not line.startswith(
                ("[", "(", "warning:", "CUDA Exception", "The exception", "Opening GPU")):
            level, sofar = joined[-1]
            piece = " " + line.strip() if line[:1].isspace() else line.rstrip()
            joined[-1] = (level, sofar + piece)
    return [_frame(level, rest) for level, rest in joined]


def _frame(level: int, rest: str) -> DebuggerFrame:
    frame = DebuggerFrame(level=level)
    pc = _FRAME_PC.match(rest)
    if pc:
        frame.pc = pc.group("pc")
        rest = rest[pc.end():]
    at = _FRAME_AT.search(rest)
    if at:
        frame.file, frame.line, frame.inlined = at.group("file"), int(at.group("line")), at.group("inlined")
        rest = rest[: at.start()]
    else:
        origin = _FRAME_FROM.search(rest)
        if origin:
            frame.file = origin.group("file")
            rest = rest[: origin.start()]
    function, _ = split_invocation(rest)
    launch = _LAUNCH.search(function)
    if launch:
        frame.launch = launch.group("launch")
        function = function[: launch.start()]
    frame.function = function.strip() or None
    return frame


def disassembly(text: str) -> list[DebuggerInstruction]:
    """``x/Ni`` or ``disas`` lines, with cuda-gdb's markers (``=>``, ``*>``, ``*=>``)."""
    out = []
    for line in text.splitlines():
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        symbol, offset = match.group("symbol"), None
        if symbol is not None:
            base, plus, tail = symbol.rpartition("+")
            if plus and tail.isdigit():
                symbol, offset = base, int(tail)
        out.append(DebuggerInstruction(
            address=f"{int(match.group('address'), 16):#x}", function=symbol or None,
            offset=offset, text=match.group("text").strip(), marker=match.group("marker") or "",
        ))
    return out


def line_info(text: str) -> list[tuple[str, int]]:
    """The (file, line) chain of ``info line *ADDR``, innermost first; empty where it has no line
    information. cuda-gdb appends ``inlined from F at line N of FILE`` for an inlined call
    (e.g. ``Line 107 of "device_atomic_functions.hpp" starts at address ... inlined from
    _ZN..atomicAddEPii at line 24 of moe_align.cu.``)."""
    match = _LINE_INFO.search(text)
    if match is None:
        return []
    return [(match.group("file"), int(match.group("line")))] + [
        (inlined.group("file"), int(inlined.group("line"))) for inlined in _INLINED_FROM.finditer(text)]


def registers(text: str) -> dict[str, int | None]:
    """``info registers`` (and ``info registers system``): each register's raw value, None where
    the debugger prints ``<unavailable>`` (cuda-gdb 12.4 does so for every predicate P0..P7 of
    a coredump, and for registers past the device's count)."""
    return {m.group("name"): None if m.group("unavailable") else int(m.group("value"), 16)
            for m in _REGISTER.finditer(text)}


def kernels_table(text: str) -> list[DebuggerKernel]:
    """CLI ``info cuda kernels``: the last column is ``Invocation`` (name(args)) in current
    releases and ``Name Args`` in older ones."""
    invocation = "Invocation" in text
    out = []
    for line in text.splitlines():
        row = _KERNEL_ROW.match(line)
        if not row:
            continue
        rest = row.group("rest")
        if invocation:
            name, args = split_invocation(rest)
        else:
            name, _, args = rest.partition(" ")
        out.append(DebuggerKernel(
            kernel=int(row.group("kernel")), device=int(row.group("device")),
            grid=int(row.group("grid")), status=row.group("status"),
            grid_dim=dim3(row.group("grid_dim")), block_dim=dim3(row.group("block_dim")),
            name=name, args=args or None, current=bool(row.group("current")),
        ))
    return out


def current_lane_exception(text: str) -> str | None:
    """The Exception column of the lane marked ``*`` in CLI ``info cuda lanes``."""
    for line in text.splitlines():
        row = _LANE_ROW.match(line)
        if row and row.group("current"):
            return row.group("exception")
    return None

