"""Small phrases both human renderings (terminal and Markdown) build their lines from."""

from __future__ import annotations

import re

from ..demangle import demangle
from ..notation import counted, dim, short_source
from .model import Fault, Owner, Params, Range
from .places import SourceLine

MAX_REGISTERS_SHOWN = 64


def span(value: Range | None) -> str:
    if value is None:
        return "-"
    if value.first == value.last:
        return dim(value.first)
    return f"{dim(value.first)}..{dim(value.last)} ({value.count})"


def exception_line(fault: Fault) -> str:
    e = fault.exception
    signal = f", cuda-gdb {e.cuda_gdb_signal}" if e.cuda_gdb_signal else ""
    return f"{e.display} ({e.name} = {e.code}{signal})"


def sm_phrase(fault: Fault) -> str:
    """``SM 17``, or ``SMs 10, 17`` for a fault group on several SMs."""
    return f"SMs {', '.join(map(str, fault.sms))}" if len(fault.sms) > 1 else f"SM {fault.sm}"


def place(fault: Fault) -> str:
    parts = [f"device {fault.device} ({fault.device_name}, {fault.sm_type})", sm_phrase(fault)]
    if fault.warp is not None:
        parts.append(f"warp {fault.warp}")
    if fault.lane is not None:
        parts.append(f"lane {fault.lane}")
    return " ".join(parts)


#: Longest C++ name the human views print whole; CUTLASS 3.x kernels demangle to ~10,000 characters.
MAX_NAME_SHOWN = 200


def readable_name(name: str, limit: int = MAX_NAME_SHOWN) -> str:
    """A demangled name short enough to read: past ``limit``, template arguments are shown as
    ``<…>`` (the name stays whole in the JSON report), then the rest is cut."""
    if len(name) <= limit:
        return name
    short = _folded(name)
    return short if len(short) <= limit else short[: limit - 1] + "…"


def _folded(name: str) -> str:
    """``name`` with its template arguments shown as ``<…>``."""
    kept, depth = [], 0
    for char in name:
        if char == "<":
            if depth == 0:
                kept.append("<…>")
            depth += 1
        elif char == ">" and depth:
            depth -= 1
        elif depth == 0:
            kept.append(char)
    return "".join(kept) if depth == 0 else name  # an operator< leaves them unbalanced


#: Longest symbol the human views print as nvdisasm does; CUTLASS's run past 1,400 characters.
MAX_SYMBOL_SHOWN = 64
_SYMBOL_OPERAND = re.compile(r"`\(([^()`\s]+)\)")


def symbol(name: str) -> str:
    """A symbol as it is, or past ``MAX_SYMBOL_SHOWN`` its qualified name with templates folded
    (``cutlass::device_kernel<…>``): no return type, no parameters."""
    if len(name) <= MAX_SYMBOL_SHOWN:
        return name
    readable = demangle(name)
    if readable == name:
        return name
    folded = _folded(readable).split("(", 1)[0]
    return folded.rsplit(" ", 1)[-1] or readable


def instruction(text: str) -> str:
    """nvdisasm's text of an instruction, a long symbol operand (a CUTLASS kernel's return
    label) named by :func:`symbol`; the JSON report keeps nvdisasm's text."""
    return _SYMBOL_OPERAND.sub(lambda m: f"`({symbol(m[1])})", text)


def section_name(name: str | None) -> str:
    """``.text.<function>``, the function named by :func:`symbol`."""
    if not name:
        return ""
    prefix = ".text." if name.startswith(".text.") else ""
    return prefix + symbol(name[len(prefix):])


def frame_line(frame) -> str:
    """A native backtrace frame: ``scatter_rows(float*, int const*, int) +0xc0 (0x7fff3a0000c0)``."""
    return code_address(frame.function_offset, frame.pc, frame.function)


def frame_function(frame) -> str:
    """A backtrace frame's function (native or cuda-gdb's) as the human views print it."""
    return readable_name(frame.function) if frame.function else "?"


def kernel_name(name: str, grid_id: int | None) -> str:
    """A kernel as a phrase: a grid row whose function string is empty is not printed as ''."""
    if name:
        return readable_name(name)
    if grid_id is None:
        return "an unidentified kernel"
    return f"an unnamed kernel (grid {grid_id})"


def kernel_line(fault: Fault) -> str:
    if fault.kernel is None:
        if fault.candidates:
            return "not attributed (SM-level exception; see the candidate warps)"
        return "unknown (no block of it is left in the dump)"
    guess = " (deduced from the PC)" if fault.kernel_inferred else ""
    return f"{kernel_name(fault.kernel.name, fault.grid_id)}, grid {fault.grid_id}{guess}"


def function_line(fault: Fault) -> str:
    kernel = kernel_name(fault.kernel.name, fault.grid_id) if fault.kernel else "?"
    name = readable_name(fault.function) if fault.function else kernel
    offset = f" +{fault.function_offset:#x}" if fault.function_offset is not None else ""
    return f"{name}{offset}"


#: Kernel parameters the human views list; the JSON report has them all.
MAX_PARAMS_SHOWN = 16


def param_items(params: Params | None) -> list[str]:
    """``#0 int const* = 0x7fff00001000`` per kernel parameter (``#2 (4 bytes) = 1024`` where the
    signature gives no type); the buffer's size and address where no layout splits it."""
    if params is None:
        return []
    if not params.values:
        why = params.layout_unavailable or "the kernel takes no parameters"
        return [f"{params.size} bytes at {params.address} ({why})"]
    items = [f"#{p.ordinal} {readable_name(p.type, 60) if p.type else f'({p.size} bytes)'} = {p.shown}"
             for p in params.values[:MAX_PARAMS_SHOWN]]
    hidden = len(params.values) - MAX_PARAMS_SHOWN
    return items + ([f"... {hidden} more in the JSON report"] if hidden > 0 else [])


def spread(fault: Fault) -> str:
    lanes = f"{counted(fault.faulting_lanes, 'lane')} marked" if fault.faulting_lanes else "no lane marked"
    return (f"{lanes} in {counted(fault.faulting_warps, 'warp')}; blocks {span(fault.blocks)}; "
            f"threads {span(fault.threads)}")


def candidate_lines(fault: Fault) -> list[str]:
    """The warps on the SM of an SM-level exception, each labelled a candidate, not the culprit."""
    return [f"candidate (not attributed): SM {c.sm} warp {c.warp}, block {dim(c.block_idx)} of "
            f"{kernel_name(c.kernel or '', c.grid_id)}"
            + (f", errorPC {c.error_pc}" if c.error_pc else "") + (", broken" if c.broken else "")
            for c in fault.candidates]


# -- one rule for places in code, in every view ------------------------------------------------
# A place in code is written function and offset first, the absolute PC beside them:
# ``helper(int) +0x30 (0x7fff3a000030)``. A source file is written as the line table holds it;
# only where the width forces it (a SASS listing's column, the one-line summary, a narrow
# terminal) does the whole chain go to basenames.


def code_address(offset: int | None, pc: str | None, function: str | None = None) -> str:
    """``helper(int) +0x30 (0x7fff3a000030)``; without ``function`` (it goes without saying)
    ``+0x30 (0x7fff3a000030)``; the PC alone where no offset is known."""
    where = " ".join(filter(None, [readable_name(function) if function else None,
                                   f"+{offset:#x}" if offset is not None else None]))
    if not where:
        return pc or "?"
    return f"{where} ({pc})" if pc else where


def source_chain(chain: list[SourceLine], room: int | None = None) -> str:
    """``/src/inner.h:10 <- /src/caller.cu:24``: innermost first, as the inline chain runs, each
    file as the line table holds it; basenames when that is longer than ``room``."""
    if not chain:
        return "-"
    full = " <- ".join(f"{s.file}:{s.line}" for s in chain)
    return full if room is None or len(full) <= room else short_source(chain)


def position_line(kernel, position, room: int | None = None, devices: int = 1) -> str:
    """``grid 1: 12 warps at +0x30 (0x7fff3a000030), hang.cu:6``: where a group of warps stands;
    the function is named where it is not the kernel itself (a non-inlined device function)."""
    grid = f"dev {kernel.device} grid {kernel.grid_id}" if devices > 1 else f"grid {kernel.grid_id}"
    function = position.function if position.function and position.function != kernel.name else None
    head = f"{grid}: {counted(position.warps, 'warp')} at {code_address(position.function_offset, position.pc, function)}"
    if not position.source:
        return head
    return f"{head}, {source_chain(position.source, None if room is None else room - len(head) - 2)}"


def register_blocks(fault) -> list[tuple[str, dict[str, int]]]:
    """(heading, registers): the focused lane's, and the culprit lane's where the explanation
    explains another lane (each lane's access is judged on its own registers)."""
    blocks = [(f"registers of lane {fault.lane}:", fault.registers)] if fault.registers else []
    culprit = fault.explanation.culprit_lane if fault.explanation is not None else None
    if culprit is not None and culprit.registers and culprit.lane != fault.lane:
        blocks.append((f"registers of lane {culprit.lane} (the culprit, warp {culprit.warp} on "
                       f"SM {culprit.sm}):", culprit.registers))
    return blocks


def register_rows(values: dict[str, int] | None, per_row: int = 4) -> list[str]:
    if not values:
        return []
    items = [f"{name:>4}={value:#010x}" for name, value in list(values.items())[:MAX_REGISTERS_SHOWN]]
    rows = ["  ".join(items[i : i + per_row]) for i in range(0, len(items), per_row)]
    if len(values) > MAX_REGISTERS_SHOWN:
        rows.append(f"... {len(values) - MAX_REGISTERS_SHOWN} more in the JSON report")
    return rows


def predicate_line(values: dict[str, bool] | None) -> str:
    if not values:
        return ""
    return " ".join(f"{name}={int(v)}" for name, v in values.items())


def agreement_verdict(agreement) -> str:
    """``agrees``, ``differs: ours (1,0,0), cuda-gdb (0,0,0)`` (both values of a disagreement,
    always) or ``not compared: why``; a note on an agreement or a difference follows it."""
    note = agreement.note
    if agreement.verdict == "unknown":
        return "not compared" + (f": {note}" if note else "")
    verdict = ("agrees" if agreement.verdict == "agree" else
               f"differs: ours {agreement.native}, cuda-gdb {agreement.debugger}")
    return verdict + (f"; {note}" if note else "")


def debugger_status(section) -> str:
    """``cuda-gdb 12.4: ok`` or ``cuda-gdb: unavailable: why``."""
    tool = section.version or section.tool or "cuda-gdb"
    reason = f": {section.reason}" if section.reason else ""
    return f"{tool}: {section.status}{reason}"


def debugger_headline(section) -> str:
    return f"debugger {debugger_status(section)}"


def backtrace_heading(view) -> str:
    """``cuda-gdb's backtrace, at the focus's current PC``: where the warp stands past its
    faulting instruction, the first frame's line is not the error PC's, which the source
    comparison is of; the heading then names that line."""
    heading = "cuda-gdb's backtrace, at the focus's current PC"
    top = view.backtrace[0] if view.backtrace else None
    fault_line = view.source_lines[0] if view.source_lines else None
    if top is not None and top.line and fault_line is not None and (
            top.line != fault_line.line or not fault_line.file.endswith(top.file or "")):
        heading += (f", past the error PC (whose line, {short_source([fault_line])}, is the one "
                    "'source' compares)")
    return heading


def missing_source_note(path: str) -> str:
    """A source file the debugger could not list: said, never counted as a problem, since the
    line table names the build machine's paths and the dump was read all the same."""
    return (f"note: the debugger could not open {path} to list its lines (a path of the machine "
            "that built the program); line numbers are still read from the dump")


def focus_text(focus) -> str:
    if focus is None:
        return "-"
    return (f"kernel {focus.kernel}, grid {focus.grid}, block {dim(focus.block_idx)}, thread "
            f"{dim(focus.thread_idx)}, device {focus.device}, sm {focus.sm}, warp {focus.warp}, "
            f"lane {focus.lane}")


def load_line(load) -> str:
    """What the debugger said on opening the dump, in one line."""
    if load is None:
        return "-"
    said = [f"CUDA Exception: {load.exception}" if load.exception else
            ("no exception (SIGTRAP)" if load.signal == "SIGTRAP" else "no exception named")]
    if load.triggered_pc:
        where = " ".join(filter(None, [load.triggered_function,
                                       f"({load.triggered_source})" if load.triggered_source else None]))
        said.append(f"triggered at PC {load.triggered_pc}" + (f" {where}" if where else ""))
    if load.triggered_device is not None:
        said.append(f"triggered in device {load.triggered_device}")
    said.append(f"focus {focus_text(load.focus)}")
    return "; ".join(said)


def owner_line(owner: Owner) -> str:
    """``flashinfer 0.6.12; a fix is in flashinfer 0.6.18, this runs 0.6.12: LINK (summary)``;
    ``unknown`` where no artifact is named (its version is then no question)."""
    line = owner.artifact if owner.artifact == "unknown" else (
        f"{owner.artifact} {owner.version or '(version unknown)'}")
    fix = owner.fix
    if fix is None:
        return line
    where = (f"a fix is in {fix.artifact} {fix.fixed_in}" if fix.fixed_in else
             f"no release of {fix.artifact} holds a fix yet")
    if owner.fix_status == "fixed-in-later":
        where += f", this runs {owner.version}"
    elif owner.fix_status == "fixed-in-this":
        where += ": this release holds it (another bug, or a regression)"
    elif owner.fix_status == "version-unknown":
        where += " (the running version is unknown)"
    return f"{line}; {where}: {fix.link} ({fix.summary})"
