"""Does the debugger see the fault crashlab found? Kernel, exception, block, thread, PC, the
lane's registers and predicates, the backtrace, the disassembly window and the source line, each
compared as values, never hidden: a disagreement carries both values, and a fact that cannot be
compared says why in its note."""

from __future__ import annotations

import os
import re

from ..coredump.fault import DETAILED_GROUPS, PC_FROM_LANE
from ..notation import dim, marker, short_source
from ..report.debugger import Agreement, DebuggerFaultView, DebuggerFrame, DebuggerInstruction
from ..report.model import Fault
from ..report.places import SourceLine
from .mi import split_invocation

_LAUNCH = re.compile(r"<<<[^>]*>>>")
#: Differences shown in a register disagreement; the rest are counted.
SHOWN_DIFFERENCES = 4
#: What cuda-gdb 12.4 does with predicates of a coredump (fixtures/transcripts/PROVENANCE.md).
PREDICATES_UNREAD = ("the debugger prints every predicate as <unavailable>: cuda-gdb 12.4 never "
                     "asks its coredump reader for them (a CUCORE_DEBUG=30 trace shows no "
                     "readPredicates call), so they cannot be compared")


def compare(fault: Fault, view: DebuggerFaultView, *, source_note: str | None = None) -> list[Agreement]:
    """Every fact both sides have, in a fixed order. ``source_note`` says why the debugger may
    have no source line (crashlab.gdb.lineinfo)."""
    focus = view.focus
    uniform = None if fault.uniform_registers is None and fault.uniform_predicates is None else {
        **(fault.uniform_registers or {}), **(_numbers(fault.uniform_predicates) or {})}
    return [
        _kernel(fault, view.kernel),
        _exception(fault, view.exception),
        _dims("block", fault.block_idx, focus.block_idx if focus else None),
        _dims("thread", fault.thread_idx, focus.thread_idx if focus else None),
        _pc(fault, view.error_pc),
        _registers("registers", fault.registers, view),
        _registers("predicates", _numbers(fault.predicates), view, unread=PREDICATES_UNREAD),
        _registers("uniform", uniform, view),
        _backtrace(fault, view, source_note),
        _disassembly(fault, view.disassembly),
        _source(fault.sass.source, view.source_lines, source_note),
    ]


def kernel_key(name: str) -> str:
    """A kernel name reduced to what both sides print: no launch dims, no parameter list, no
    'void ' return type, no spaces. cuda-gdb names a kernel 'f', 'f(int*, int)' or
    'void f<4>(int)' depending on debug info; the native report gives the demangled signature."""
    text = _LAUNCH.sub("", name).strip()
    base, args = split_invocation(text)
    if args is not None and base:
        text = base
    text = text.removeprefix("void ")
    return re.sub(r"\s+", "", text)


def _verdict(field: str, native: str | None, debugger: str | None, same: bool,
             note: str | None = None) -> Agreement:
    if native is None or debugger is None:
        return Agreement(field=field, verdict="unknown", native=native, debugger=debugger, note=note)
    return Agreement(field=field, verdict="agree" if same else "disagree", native=native,
                     debugger=debugger, note=note)


def _kernel(fault: Fault, debugger: str | None) -> Agreement:
    native = fault.kernel.name if fault.kernel else None
    same = False
    if fault.kernel and debugger:
        ours = {kernel_key(fault.kernel.name), fault.kernel.mangled}
        same = kernel_key(debugger) in ours or debugger in ours
    return _verdict("kernel", native, debugger, same)


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _exception(fault: Fault, debugger: str | None) -> Agreement:
    native = fault.exception.display
    known = {_normal(native), _normal(fault.exception.cuda_gdb_signal or "")} - {""}
    same = debugger is not None and _normal(debugger) in known  # "" normalises to no known name
    note = None
    if debugger and not same and _normal(debugger) == _normal("Device Unknown Exception"):
        note = "the debugger does not know this exception code: it is older than the driver"
    return _verdict("exception", native, debugger, same, note)


def _dims(field: str, native, debugger) -> Agreement:
    return _verdict(field, dim(native) if native else None, dim(debugger) if debugger else None,
                    native is not None and tuple(native) == tuple(debugger or ()))


def _pc(fault: Fault, debugger: str | None) -> Agreement:
    note = None
    if debugger is None and fault.pc_source == PC_FROM_LANE:
        note = "the dump has no valid errorPC for this warp, so the debugger has none either"
    same = bool(fault.pc and debugger and int(fault.pc, 16) == int(debugger, 16))
    return _verdict("pc", fault.pc, debugger, same, note)


def _numbers(flags: dict[str, bool] | None) -> dict[str, int] | None:
    return None if flags is None else {name: int(value) for name, value in flags.items()}


def _registers(field: str, native: dict[str, int] | None, view: DebuggerFaultView, *,
               unread: str | None = None) -> Agreement:
    """Every register the dump holds for the lane (or warp) against the debugger's value of it.
    The debugger shows more (zeros past the section's end, up to the device's count): those are
    not facts of the dump and are not compared."""
    if not native:
        return Agreement(field=field, verdict="unknown", note=(
            "the dump holds none for this lane" if native is not None else
            "crashlab read none for this fault group (it reads registers for the "
            f"{DETAILED_GROUPS} most relevant groups)"))
    summary = f"{len(native)} ({_span(native)})"
    seen = {name: view.registers[name] for name in native if name in view.registers}
    differ = [name for name, value in seen.items() if value != native[name]]
    if differ:
        more = f" and {len(differ) - SHOWN_DIFFERENCES} more" if len(differ) > SHOWN_DIFFERENCES else ""
        return Agreement(field=field, verdict="disagree",
                         native=_values(native, differ) + more, debugger=_values(seen, differ) + more)
    missing = [name for name in native if name not in seen and name not in CONSTANT_REGISTERS]
    if not missing:
        return Agreement(field=field, verdict="agree", native=summary, debugger=summary)
    unavailable = set(view.registers_unavailable)
    if all(name in unavailable for name in missing) and unread and not seen:
        note = unread
    elif all(name in unavailable for name in missing):
        note = f"the debugger prints {_span(missing)} as <unavailable>"
    else:
        note = f"the debugger did not print {_span(missing)}"
    return Agreement(field=field, verdict="unknown", native=summary,
                     debugger=f"{len(seen)} of them" if seen else None, note=note)


#: The hardware's constant registers (PT, URZ, UPT, RZ): a dump holds a slot for each, and
#: cuda-gdb 13.0 does not print them (seen on H200 dumps, fixtures/gpu/h200), so their absence
#: from its output says nothing.
CONSTANT_REGISTERS = frozenset({"P7", "UP7", "UR63", "R255"})


def _span(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"


def _values(values: dict[str, int], names: list[str]) -> str:
    return ", ".join(f"{name}={values[name]:#x}" for name in names[:SHOWN_DIFFERENCES])


def _backtrace(fault: Fault, view: DebuggerFaultView, source_note: str | None) -> Agreement:
    """The lane's frames: the current PC, then each caller's return address, as both read them.
    The first frame's source chain (its inline frames) is compared where both sides have one.
    GDB leaves frame #0's PC out when it is the first address of a line (``#0  kernel<<<...>>> ()
    at f.cu:7``); it is then the ``pc`` register."""
    native_pcs = [fault.current_pc] + [frame.pc for frame in fault.backtrace] if fault.current_pc else []
    debugger_pcs = _debugger_pcs(view)
    if not native_pcs or not debugger_pcs:
        return _verdict("backtrace", " <- ".join(native_pcs) or None,
                        " <- ".join(debugger_pcs) or None, False)
    same = [int(pc, 16) for pc in native_pcs] == [int(pc, 16) for pc in debugger_pcs]
    native_chain = next((ins.source for ins in fault.sass.instructions if ins.current), [])
    debugger_chain = _frame_chain(view.backtrace)
    native, debugger = " <- ".join(native_pcs), " <- ".join(debugger_pcs)
    note = None
    if native_chain and debugger_chain:
        same = same and _chain(native_chain) == _chain(debugger_chain)
        native += f" at {short_source(native_chain)}"
        debugger += f" at {short_source(debugger_chain)}"
    elif native_chain:
        note = f"frame #0's source ({short_source(native_chain)}) not compared: " + (
            source_note or "the debugger shows none")
    return _verdict("backtrace", native, debugger, same,
                    _stopped_at_level_0(fault, len(debugger_pcs), len(native_pcs)) or note)


def _debugger_pcs(view: DebuggerFaultView) -> list[str]:
    """The PCs of the debugger's frames, innermost first, an inline frame's repeat of its
    caller's PC dropped; frame #0 without a printed PC takes the ``pc`` register."""
    pcs: list[str] = []
    for frame in view.backtrace:
        pc = int(frame.pc, 16) if frame.pc else view.registers.get("pc") if frame.level == 0 else None
        if pc is not None and (not pcs or int(pcs[-1], 16) != pc):
            pcs.append(f"{pc:#x}")
    return pcs


def _stopped_at_level_0(fault: Fault, debugger_count: int, native_count: int) -> str | None:
    """Why cuda-gdb shows fewer frames than the dump, where the dump's first return address has
    a level above 0; None otherwise."""
    first_level = min((frame.level - 1 for frame in fault.backtrace), default=0)  # the dump's row level
    if debugger_count < native_count and first_level > 0:
        return (f"the dump numbers its first return address level {first_level}; cuda-gdb asks "
                "for level 0 first and stops there (CUDBG_ERROR_INVALID_CALL_LEVEL)")
    return None


def _frame_chain(frames: list[DebuggerFrame]) -> list[SourceLine]:
    """Source of frame #0 and of the inline frames GDB puts at the same PC, innermost first."""
    chain: list[SourceLine] = []
    first = frames[0].pc
    for frame in frames:
        if frame.pc != first and frame is not frames[0]:
            break
        if frame.file and frame.line:
            chain.append(SourceLine(file=frame.file, line=frame.line))
        inlined = re.search(r"inlined from (\S+):(\d+)", frame.inlined or "")
        if inlined:
            chain.append(SourceLine(file=inlined.group(1), line=int(inlined.group(2))))
    return chain


def _chain(lines: list[SourceLine]) -> list[tuple[str, int]]:
    return [(os.path.basename(line.file), line.line) for line in lines]


def _source(native: list[SourceLine], debugger: list[SourceLine], note: str | None) -> Agreement:
    """The faulting instruction's source line and the calls it is inlined in (file names only:
    the paths are the build machine's)."""
    if native and not debugger:
        note = note or "the debugger has no line information for the errorPC"
    elif not native and not debugger:
        note = "neither crashlab nor the debugger names a source line for the errorPC"
    return _verdict("source", short_source(native) or None, short_source(debugger) or None,
                    _chain(native) == _chain(debugger), note)


def _disassembly(fault: Fault, instructions: list[DebuggerInstruction]) -> Agreement:
    """The native SASS window against the debugger's ``x/Ni`` over the same addresses: the same
    instruction at each address, ``*>`` on the faulting one and ``=>`` on the current one."""
    native = fault.sass.instructions
    if not native:
        return Agreement(field="disassembly", verdict="unknown", note=fault.sass.unavailable_reason or (
            f"crashlab disassembles the {DETAILED_GROUPS} most relevant fault groups, or none "
            "without SASS (--no-sass)"))
    if not instructions:
        return _verdict("disassembly", _window(native), None, False)
    by_address = {int(ins.address, 16): ins for ins in instructions}
    for ins in native:
        theirs = by_address.get(int(ins.address, 16))
        if theirs is None:
            return _verdict("disassembly", f"{ins.address}: {ins.text}", None, False,
                            note="the debugger did not disassemble this address")
        marks = ins.faulting == theirs.at_error_pc and ins.current == theirs.at_current_pc
        if not (marks and same_instruction(ins.text, theirs.text)):
            ours = marker(ins)
            return _verdict("disassembly", f"{ins.address}: {ours + ' ' if ours else ''}{ins.text}",
                            f"{ins.address}: {theirs.marker + ' ' if theirs.marker else ''}{theirs.text}",
                            False)
    return _verdict("disassembly", _window(native), _window(native), True)


def _window(native) -> str:
    return f"{len(native)} instructions {native[0].address}..{native[-1].address}"


def same_instruction(native: str, debugger: str) -> bool:
    """nvdisasm and cuda-gdb print the same SASS but name branch targets differently
    (``BRA `(.L_x_5)`` against ``BRA 0x1c0``): up to a label, the texts must be equal. cuda-gdb
    13.0 writes no space after an operand's comma (``S2UR UR4,SR_CTAID.X``), 12.4 and nvdisasm
    one: spaces after commas do not count."""
    ours, theirs = (" ".join(text.strip().rstrip(";").split()).replace(", ", ",")
                    for text in (native, debugger))
    if "`" in ours:
        head = ours.split("`", 1)[0].rstrip()
        return theirs.startswith(head) and len(theirs) > len(head)
    return ours == theirs
