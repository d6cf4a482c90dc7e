"""Does the debugger see the fault crashlab found? Kernel, exception, block, thread and PC,
each compared as values, never hidden: a disagreement carries both values."""

from __future__ import annotations

import re

from ..report.model import Agreement, DebuggerFaultView, Fault
from ..report.text import dim
from .mi import split_invocation

_LAUNCH = re.compile(r"<<<[^>]*>>>")


def compare(fault: Fault, view: DebuggerFaultView) -> list[Agreement]:
    focus = view.focus
    return [
        _kernel(fault, view.kernel),
        _exception(fault, view.exception),
        _dims("block", fault.block_idx, focus.block_idx if focus else None),
        _dims("thread", fault.thread_idx, focus.thread_idx if focus else None),
        _pc(fault, view.error_pc),
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
    same = bool(debugger) and _normal(debugger) in known
    note = None
    if debugger and not same and _normal(debugger) == _normal("Device Unknown Exception"):
        note = "the debugger does not know this exception code: it is older than the driver"
    return _verdict("exception", native, debugger, same, note)


def _dims(field: str, native, debugger) -> Agreement:
    return _verdict(field, dim(native) if native else None, dim(debugger) if debugger else None,
                    native is not None and tuple(native) == tuple(debugger or ()))


def _pc(fault: Fault, debugger: str | None) -> Agreement:
    note = None
    if debugger is None and fault.pc_source.startswith("lane PC"):
        note = "the dump has no valid errorPC for this warp, so the debugger has none either"
    same = bool(fault.pc and debugger) and int(fault.pc, 16) == int(debugger, 16)
    return _verdict("pc", fault.pc, debugger, same, note)
