"""The signature of a CUDA coredump's triage (a TriageReport).

- a fault: the exception, the kernel, the function holding the PC where it is not the kernel (a
  non-inlined device function), and the faulting site: the source line of the function holding
  the PC where the cubin has line information (nvdisasm's, or the cubin's line table read
  natively: the same line), else the offset into that function. The opcode there is shown in
  the title but not hashed: the same offset of the same function of the same cubin is the same
  instruction, and naming it takes nvdisasm, which a machine may lack. Never a PC (the driver loads a module at another address every
  run), a device, SM, warp, lane, block or thread (another rank, node or launch shape faults the
  same way);
- a dump without an exception in which a collective kernel is resident: collateral, named by
  the collective(s) it waits in (where in them depends on timing, so not the position);
- a dump without an exception and no collective: a hang, named by each resident kernel and the
  site where most of its warps stand.
"""

from __future__ import annotations

import os

from ..report.model import Fault, TriageReport, WarpPosition
from ..report.places import SourceLine
from ..report.signature import CrashSignature, seal
from ..report.suspects import suspect_items
from ..sass.instruction import Instruction
from .collective import collectives
from .names import base_name, normalise

#: What a user's log or issue says for an exception (the CUDA runtime's error strings), by a
#: word of its CUDBG name, first match.
RUNTIME_WORDS = (("MISALIGNED", "misaligned address"), ("ADDRESS", "illegal memory access"),
                 ("ILLEGAL_INSTRUCTION", "illegal instruction"), ("ASSERT", "device-side assert"))
_EXCEPTION_PREFIX = "CUDBG_EXCEPTION_"


def of_triage(report: TriageReport) -> CrashSignature:
    if report.faults:
        return _fault(report.faults[0])
    waiting = collectives(report)
    if waiting:
        return _collateral(report, waiting)
    return _hang(report)


def _fault(fault: Fault) -> CrashSignature:
    notes: list[str] = []
    exception = fault.exception.name.removeprefix(_EXCEPTION_PREFIX)
    parts = [exception]
    kernel = fault.kernel.name if fault.kernel else None
    if kernel is None:
        parts.append("unknown kernel")
        notes.append("the fault is in no kernel the dump names")
    else:
        parts.append(_named(kernel, "kernel", notes))
    if fault.function and kernel and fault.function != kernel:
        parts.append(_named(fault.function, "function", notes))
    coarse = list(parts)
    site, shown_site = _site(fault, notes)
    if site:
        parts.append(site)
    where = base_name(fault.function or kernel or "unknown kernel")
    shown_kernel = base_name(kernel) if kernel else "an unknown kernel"
    title = f"{fault.exception.display} in {shown_kernel}"
    if fault.function and kernel and fault.function != kernel:
        title += f" ({where})"
    if shown_site:
        title += f" at {shown_site}"
    notes += [f"suspect argument {argument}: {reason} (a note: values differ per run, never hashed)"
              for argument, reason in suspect_items(fault.params)]
    words = next((said for word, said in RUNTIME_WORDS if word in exception), fault.exception.display)
    search = f'"{shown_kernel}" "{words}"' if kernel else f'"{words}"'
    return seal("gpu-fault", parts, title, search, notes, coarse)


def _site(fault: Fault, notes: list[str]) -> tuple[str | None, str | None]:
    """The site as hashed, and as the title shows it (with the opcode where one is known)."""
    if fault.pc is None:
        notes.append("no valid PC: no faulting site")
        return None, None
    line = _own_line(fault.sass.source)
    if line is not None:
        notes.append("site: the source line of the function holding the PC (file basename: "
                     "paths differ per build machine; inlined callees' lines left out: "
                     "they move with CUDA's headers)")
        return line, line
    offset = f"+{fault.function_offset:#x}" if fault.function_offset is not None else "+?"
    notes.append("site: offset into the function (the cubin has no source line for it)")
    opcode = _opcode(fault)
    if opcode is None:
        return offset, offset
    notes.append(f"opcode {opcode} shown in the title, not hashed: nvdisasm names it, and a "
                 "signature must not depend on nvdisasm being installed")
    return offset, f"{offset} {opcode}"


def _own_line(chain: list[SourceLine]) -> str | None:
    """The outermost entry of the inline chain: the line in the function holding the PC."""
    if not chain:
        return None
    own = chain[-1]
    return f"{os.path.basename(own.file)}:{own.line}"


def _opcode(fault: Fault) -> str | None:
    faulting = next((i for i in fault.sass.instructions if i.faulting), None)
    if faulting is None:
        return None
    return Instruction(0, faulting.text.strip()).opcode or None


def _named(name: str, what: str, notes: list[str]) -> str:
    normal, fired = normalise(name)
    if fired:
        rules = "rule" if len(fired) == 1 else "rules"
        notes.append(f"{what} name normalised by the {rules} " + ", ".join(fired)
                     + " (crashlab's signature rules)")
    return normal


def _collateral(report: TriageReport, waiting) -> CrashSignature:
    notes = ["no exception in this dump; a collective kernel is resident: collateral of a "
             "fault elsewhere (collectives are recognised by name)"]
    names = sorted({_named(kernel.name, "kernel", notes) for kernel in waiting})
    shown = ", ".join(sorted({base_name(kernel.name) for kernel in waiting}))
    return seal("collateral", names, f"waiting in {shown} (collateral)", f'"{shown}" hang', notes)


def _hang(report: TriageReport) -> CrashSignature:
    notes = ["no exception and no collective kernel: a hang, named by each resident kernel and "
             "where most of its warps stand"]
    parts, coarse = [], []
    for kernel in sorted(report.kernels, key=lambda k: normalise(k.name)[0]):
        site = _position_site(kernel.warps_at[0]) if kernel.warps_at else None
        named = _named(kernel.name, "kernel", notes)
        parts.append(f"{named} @ {site}" if site else named)
        coarse.append(named)
    if not parts:
        parts, notes = ["no resident kernel"], notes + ["the dump holds no kernel"]
    shown = ", ".join(dict.fromkeys(base_name(k.name) for k in report.kernels)) or "no kernel"
    return seal("gpu-hang", sorted(parts), f"GPU hang in {shown}", f'"{shown}" hang', notes,
                sorted(coarse))


def _position_site(position: WarpPosition) -> str | None:
    line = _own_line(position.source)
    if line is not None:
        return line
    return f"+{position.function_offset:#x}" if position.function_offset is not None else None
