"""SASS around a faulting PC, and the instruction where a warp stands, as the report shows them.

Without nvdisasm's listing (none installed, or disassembly not asked for) the source line comes
from the cubin's own line table (crashlab.cubin.lines), which gives the same chains as
nvdisasm's ``-gi``, so a report and its signature do not depend on nvdisasm being installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..coredump.model import Grid
from ..cubin.lines import SourceLine
from .finder import CodeFinder, CodeLocation
from .instruction import Instruction


@dataclass
class SassView:
    location: CodeLocation | None = None
    instructions: list[Instruction] = field(default_factory=list)
    #: the faulting instruction's inline chain, innermost first
    source: list[SourceLine] = field(default_factory=list)
    unavailable_reason: str | None = None
    tool: str | None = None

    @property
    def function(self) -> str | None:
        return self.location.function if self.location else None


def disassemble(
    finder: CodeFinder,
    pc: int,
    *,
    grid: Grid | None = None,
    current_pc: int | None = None,
    context: int = 8,
) -> SassView:
    """A window of ``context`` instructions either side of ``pc``, the faulting one marked."""
    location = finder.locate(pc, grid)
    if location is None:
        reason = "no relocated cubin in the dump holds this PC"
        if finder.problems:
            reason += f" ({finder.problems[0]})"
        return SassView(unavailable_reason=reason)
    view = SassView(location=location)
    view.tool = finder.listings(location.image_section).tool[0]
    code = finder.code(location)
    base = location.text_address
    offset = pc - base
    at = None if isinstance(code, str) else code.at(offset)
    if isinstance(code, str) or at is None:
        view.unavailable_reason = code if isinstance(code, str) else (
            f"nvdisasm's listing has no instruction at offset {offset:#x}")
        view.source = finder.source_lines(location)
        return view
    listing = code.instructions
    window = listing[max(0, at - context) : at + context + 1]
    view.instructions = [
        Instruction(
            address=base + ins.address,
            text=ins.text,
            faulting=ins is listing[at],
            current=current_pc is not None and base + ins.address == current_pc,
            source=ins.source,
        )
        for ins in window
    ]
    view.source = list(listing[at].source)
    return view


def instruction_at(finder: CodeFinder, pc: int, grid: Grid | None = None, *,
                   sass: bool = True) -> Instruction | None:
    """The instruction at ``pc`` with its inline chain, as a fault's SASS window gives it: where
    warps stand in a dump with no fault. Without nvdisasm's listing (or with ``sass`` False) its
    text is empty and its chain comes from the line table; None where the code is missing."""
    location = finder.locate(pc, grid)
    if location is None:
        return None
    code = finder.code(location) if sass else "disassembly not requested"
    at = None if isinstance(code, str) else code.at(pc - location.text_address)
    if isinstance(code, str) or at is None:
        return Instruction(address=pc, text="", source=tuple(finder.source_lines(location)))
    ins = code.instructions[at]
    return Instruction(address=location.text_address + ins.address, text=ins.text, source=ins.source)
