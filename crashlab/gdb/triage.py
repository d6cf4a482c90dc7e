"""cuda-gdb's view of a dump, fault by fault, beside crashlab's own (``inspect --debugger``).

The flow adapts to what the debugger says: it opens the dump (``target cudacore``), reads the
load messages in whatever order they come, runs gdb_scripts/cudacore-triage.gdb, then for every
fault group the report details switches the focus to its lane, runs
gdb_scripts/cudacore-fault.gdb and disassembles the addresses of the native SASS window.
Real cuda-gdb 12.4 transcripts of this flow are in fixtures/transcripts/.

Which channel for which fact, and why:
- focus, kernels, the lane's exception, ``$errorpc``: MI, through ``interpreter-exec mi`` in the
  same session. The CLI prints these as tables and sentences whose shape changed between
  releases (``Name Args`` became ``Invocation``; the focus line gained ``cluster``) and whose
  kernel names contain spaces and commas; MI gives named fields. Where the debugger has no such
  MI command, the CLI command is read instead (``_CLI_FALLBACK``).
- the load messages (exception, trigger PC, first focus): CLI; MI has no record for them.
- ``bt``: CLI; cuda-gdb's frame line carries the ``<<<grid,block>>>`` launch and the
  ``in F inlined from FILE:LINE`` tail, and MI frames are not known to carry either.
- ``x/Ni``: CLI; the ``*>`` / ``=>`` / ``*=>`` markers exist only in CLI output.
- ``info line``, ``info registers [system]``: CLI; one line per fact, unchanged since GDB 7.
Whatever fails becomes a DebuggerProblem; the native report is never changed by this module.
"""

from __future__ import annotations

import gzip
import re
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from ..coredump.elf import copy_within_room
from ..notation import counted
from ..report import model, places
from ..report.debugger import (
    DebuggerCommand,
    DebuggerFaultView,
    DebuggerFocus,
    DebuggerProblem,
    DebuggerSection,
    ProblemKind,
)
from . import command_files, mi, parse
from .agreement import compare
from .driver import Debugger, Reply, SetupCommand, find_cuda_gdb
from .lineinfo import unrelocated_line_table

#: Output kept per command in the report's transcript.
TRANSCRIPT_LIMIT = 4096
#: Bytes per SASS instruction (sm_70 and later), for a window the native report does not give.
INSTRUCTION_BYTES = 16
_MI_COMMAND = re.compile(r'^interpreter-exec mi "(?P<command>(?:[^"\\]|\\.)*)"$')
#: CLI commands that give what an MI command gives, for debuggers without the MI command.
_CLI_FALLBACK = {
    "-cuda-info-kernels": "info cuda kernels",
    "-cuda-info-lanes": "info cuda lanes",
    "-cuda-focus-query": "cuda kernel grid block thread device sm warp lane",
    "-cuda-focus-switch": "cuda",
}
_PROBLEM_OF_STATUS: dict[str, ProblemKind] = {"timeout": "timeout", "died": "died",
                                                    "not-run": "given-up"}


def mi_command(command: str) -> str:
    return 'interpreter-exec mi "' + command.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Session:
    """A Debugger plus the transcript and the problems of the section being built."""

    def __init__(self, debugger: Debugger, section: DebuggerSection, timeout: float):
        self.debugger, self.section, self.timeout = debugger, section, timeout

    def run(self, command: str, timeout: float | None = None) -> Reply:
        reply = self.debugger.run(command, timeout or self.timeout)
        self.record(reply)
        return reply

    def record(self, reply: Reply) -> None:
        output = reply.output
        if len(output) > TRANSCRIPT_LIMIT:
            output = output[:TRANSCRIPT_LIMIT] + f"\n[... {len(reply.output) - TRANSCRIPT_LIMIT} more characters cut]"
        self.section.transcript.append(DebuggerCommand(
            command=reply.command, status=reply.status, seconds=round(reply.seconds, 3),
            output=output, note=reply.note or None))
        for source in parse.unlisted_sources(reply.output):
            if source not in self.section.missing_sources:
                self.section.missing_sources.append(source)
        if not reply.ok:
            self.problem(_PROBLEM_OF_STATUS[reply.status], reply.note or reply.status, reply.command)

    def problem(self, kind: ProblemKind, message: str, command: str | None = None) -> None:
        self.section.problems.append(DebuggerProblem(kind=kind, message=message, command=command))

    def ask(self, line: str) -> tuple[mi.MiResult | None, str]:
        """Run one script line. An MI line gives its result record; where the debugger lacks the
        MI command, the CLI equivalent runs and its text is returned instead."""
        match = _MI_COMMAND.match(line)
        if match is None:
            return None, self.run(line).output
        command = match.group("command").replace('\\"', '"').replace("\\\\", "\\")
        reply = self.run(line)
        result = mi.result(reply.output)
        head, _, arguments = command.partition(" ")
        if result is not None and result.undefined and head in _CLI_FALLBACK:
            fallback = _CLI_FALLBACK[head] + (" " + arguments if head == "-cuda-focus-switch" else "")
            return None, self.run(fallback).output
        if result is not None and not result.ok:
            self.problem("command-error", result.error or "error", line)
        return result, reply.output


def view(core_path: str, report: model.TriageReport, *, program: str | None = None,
         command_timeout: float = 60.0, load_timeout: float = 900.0,
         context: int = 8) -> DebuggerSection:
    """The debugger section for ``report``, read from the dump at ``core_path``. ``context`` is
    the disassembly window's half-width where a fault has no native SASS window to follow."""
    began = time.monotonic()
    if program is None:
        program, why = find_cuda_gdb()
        if program is None:
            return DebuggerSection(status="unavailable", reason=why)
    section = DebuggerSection(tool=program, status="ok")
    if not Path(core_path).is_file():
        section.status = "unavailable"
        section.reason = "the dump came from a pipe or standard input; cuda-gdb reads only files"
        return section
    with _plain_copy(core_path, report.source.compressed) as plain, \
            Debugger(program, start_timeout=command_timeout) as debugger:
        session = _Session(debugger, section, command_timeout)
        started = debugger.start()
        if not started.ok:
            session.record(started)
            section.problems[-1].kind = "start-failed"
            section.status, section.reason = "failed", started.note or "the debugger did not start"
        else:
            section.version = _version(session.run("show version").output)
        if started.ok and _load(session, plain, load_timeout):
            _overview(session)
            for index, fault in enumerate(report.faults):
                section.faults.append(_fault_view(session, plain, index, fault, context))
    section.seconds = round(time.monotonic() - began, 3)
    if section.status == "ok" and section.problems:
        section.status = "partial"
        section.reason = f"{counted(len(section.problems), 'problem')} with the debugger; see problems"
    return section


@contextmanager
def _plain_copy(path: str, compressed: bool):
    """The dump as a plain file: cuda-gdb cannot read the driver's gzip_compress output."""
    if not compressed:
        yield str(Path(path).resolve())
        return
    with tempfile.TemporaryDirectory(prefix="crashlab-gdb-") as work:
        plain = Path(work, Path(path).name.removesuffix(".gz"))
        with gzip.open(path, "rb") as source, open(plain, "wb") as target:
            copy_within_room(source, target, work, path)
        yield str(plain)


def _load(session: _Session, core: str, timeout: float) -> bool:
    section = session.section
    command = f"target cudacore {core}"
    session.debugger.setup = [SetupCommand(command, timeout)]
    reply = session.run(command, timeout)
    section.load, problems = parse.load(reply.output)
    section.problems.extend(problems)
    failed = any(p.kind in ("not-cuda-gdb", "cannot-read-dump", "format-too-new") for p in problems)
    if failed or not reply.ok:
        section.status = "failed"
        section.reason = next((p.message for p in problems), reply.note or "the dump was not loaded")
        return False
    return True


def _overview(session: _Session) -> None:
    section = session.section
    for line in command_files.commands(command_files.TRIAGE):
        result, text = session.ask(line)
        if "-cuda-info-kernels" in line:
            section.kernels = mi.kernels(result.payload) if result else parse.kernels_table(text)
        elif "-cuda-focus-query" in line and section.load is not None:
            section.load.focus = _focus(result, text) or section.load.focus


def _version(text: str) -> str | None:
    """``cuda-gdb 12.4 (GNU gdb 13.1)`` from cuda-gdb's banner (12.4: "NVIDIA (R) cuda-gdb 12.4"
    and "Based on GNU gdb 13.1"; 12.1: "NVIDIA (R) CUDA Debugger", "CUDA Toolkit 12.1 release"
    and "GNU gdb (GDB) 12.1"), or GNU gdb's first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    gnu = next((line.removeprefix("Based on ") for line in lines
                if line.startswith(("GNU gdb", "Based on GNU gdb"))), None)
    cuda = re.search(r"cuda-gdb (\d+\.\d+)|(\d+\.\d+) release", text)
    if "CUDA Debugger" in text or "cuda-gdb" in text:
        number = (cuda.group(1) or cuda.group(2)) if cuda else "?"
        return f"cuda-gdb {number}" + (f" ({gnu})" if gnu else "")
    return gnu or (lines[0] if lines else None)


def _focus(result: mi.MiResult | None, text: str) -> DebuggerFocus | None:
    """From a CudaFocus tuple, from the sentence cuda-gdb 12.4 answers ``-cuda-focus-query`` with
    (``^done,"kernel 0, grid 7, ..."``), or from CLI text."""
    if result is not None:
        return mi.focus(result.payload) or parse.coordinates(str(result.payload.get("text", "")))
    return parse.focus_line(text) or parse.coordinates(text)


def _fault_view(session: _Session, core: str, index: int, fault: model.Fault,
                context: int) -> DebuggerFaultView:
    section = session.section
    view = DebuggerFaultView(fault=index)
    if fault.warp is None or fault.lane is None:
        session.problem("no-focus", f"fault {index + 1}: no thread of it is left in the dump, so "
                                    "the debugger cannot focus on it")
        view.agreement = compare(fault, view)
        return view
    wanted = (fault.device, fault.sm, fault.warp, fault.lane)
    place = "device {} sm {} warp {} lane {}".format(*wanted)
    switch = mi_command(f"-cuda-focus-switch {place}")
    result, _text = session.ask(switch)
    # ^done,"CUDA focus unchanged.\n" (the lane already has the focus) is a success like
    # ^done,CudaFocus={...}; the focus query of the fault script says where the focus is
    if result is not None and not result.ok:
        session.problem("no-focus", f"fault {index + 1}: the debugger would not focus on {place}")
        view.agreement = compare(fault, view)
        return view
    session.debugger.setup = session.debugger.setup[:1] + [SetupCommand(switch, session.timeout)]
    for line in command_files.commands(command_files.FAULT) + [_disassemble(fault, context)]:
        _read_fault_line(view, line, *session.ask(line))
        focus = view.focus
        if "-cuda-focus-query" in line and (
                focus is None or (focus.device, focus.sm, focus.warp, focus.lane) != wanted):
            # nothing is read from a thread that is not the fault's
            session.problem("no-focus", f"fault {index + 1}: the debugger's focus is not on {place}"
                                        + (f" but on device {focus.device} sm {focus.sm} warp "
                                           f"{focus.warp} lane {focus.lane}" if focus else ""))
            view.focus = None
            view.agreement = compare(fault, view)
            return view
    view.kernel = _kernel_name(section, view)
    if view.error_pc is None:
        marked = [ins for ins in view.disassembly if ins.at_error_pc]
        view.error_pc = marked[0].address if marked else None
    if view.exception is None and section.load is not None and _same_lane(section.load.focus, view.focus):
        view.exception = section.load.exception
    note = None
    if fault.sass.source and not view.source_lines and fault.pc:
        note = unrelocated_line_table(core, int(fault.pc, 16))
    view.agreement = compare(fault, view, source_note=note)
    return view


def _disassemble(fault: model.Fault, context: int) -> str:
    """``x/Ni START`` over the native SASS window's addresses (it follows ``--context``, clipped
    at the function's ends); without one, ``context`` instructions each side of the errorPC."""
    window = fault.sass.instructions
    if window:
        return f"x/{len(window)}i {window[0].address}"
    return f"x/{2 * context + 1}i $errorpc-{context * INSTRUCTION_BYTES:#x}"


def _read_fault_line(view: DebuggerFaultView, line: str, result: mi.MiResult | None, text: str) -> None:
    if "-cuda-focus-query" in line:
        view.focus = _focus(result, text) or view.focus
    elif "-cuda-info-lanes" in line:
        exception = mi.current_lane_exception(result.payload) if result else parse.current_lane_exception(text)
        view.exception = exception if exception and exception != "None" else None
    elif "-data-evaluate-expression" in line:
        number = mi.value(result.payload) if result is not None and result.ok else None
        view.error_pc = f"{number:#x}" if number is not None else None
    elif line.startswith(("bt", "backtrace", "where")):
        view.backtrace = parse.backtrace(text)
    elif line.startswith("x/"):
        view.disassembly = parse.disassembly(text)
    elif line.startswith("info line"):
        chain = parse.line_info(text)
        view.source_lines = [places.SourceLine(file=file, line=number) for file, number in chain]
        view.source = (f"{chain[0][0]}:{chain[0][1]}" if chain
                       else next(iter(text.strip().splitlines()), None))
    elif line.startswith("info registers"):
        for name, value in parse.registers(text).items():
            if value is None:
                view.registers_unavailable.append(name)
            else:
                view.registers[name] = value


def _kernel_name(section: DebuggerSection, view: DebuggerFaultView) -> str | None:
    if view.focus is not None and view.focus.kernel is not None:
        for kernel in section.kernels:
            if kernel.kernel == view.focus.kernel:
                return kernel.name
    top = view.backtrace[-1] if view.backtrace else None
    return top.function if top else None


def _same_lane(a: DebuggerFocus | None, b: DebuggerFocus | None) -> bool:
    return (a is not None and b is not None and a.device is not None
            and (a.device, a.sm, a.warp, a.lane) == (b.device, b.sm, b.warp, b.lane))
