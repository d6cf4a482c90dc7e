"""Where a PC lies in a dump's code, and the listing and control-flow graph of its function.

The dump keeps every loaded module as a relocated cubin whose executable sections carry their
GPU addresses in sh_addr, so the cubin whose ``.text.*`` section holds the PC is the code that
ran. Each cubin is the dump's one opened object (crashlab.coredump.core.CoreDump.cubin); each
function's listing is read once per dump (crashlab.sass.listing) and its graph built once
(crashlab.sass.flow), whoever asks: the window, the explanation, the hang's readings.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from ..coredump.core import CoreDump
from ..coredump.model import Grid, Module
from ..cubin import Cubin, CubinError
from ..cubin.image import Text
from ..cubin.lines import LineTable, SourceLine
from .flow import FunctionCode
from .listing import CubinListings


@dataclass(frozen=True)
class CodeLocation:
    """Where a PC lies in the dump's code: which cubin, which section, which function."""

    image_section: int
    text_section: str
    text_address: int
    function_symbol: int
    function: str | None
    function_offset: int | None
    section_offset: int = 0


class CodeFinder:
    """Maps PCs to the relocated cubins of one dump; ``problems`` says what could not be read."""

    def __init__(self, core: CoreDump):
        self.core = core
        self.problems: list[str] = []
        self._unreadable: set[int] = set()
        self._line_tables: dict[int, LineTable | None] = {}
        self._listings: dict[int, CubinListings] = {}
        self._code: dict[tuple[int, str], FunctionCode | str] = {}

    def cubin(self, section: int) -> Cubin | None:
        """The relocated cubin in ``section`` with its code sections read, None (said once in
        ``problems``) where it is damaged."""
        try:
            cubin = self.core.cubin(section)
            cubin.texts  # noqa: B018 - read here so that a damaged symbol table is said here
        except CubinError as exc:
            if section not in self._unreadable:
                self._unreadable.add(section)
                self.problems.append(f"relocated cubin in section {section} is unreadable: {exc}")
            return None
        return cubin

    def line_table(self, section: int) -> LineTable | None:
        """The line table of the relocated cubin in ``section``, read once; None where it has
        none or it is unreadable (then ``problems`` says why)."""
        if section not in self._line_tables:
            table = None
            cubin = self.cubin(section)
            try:
                table = cubin.line_table if cubin else None
            except CubinError as exc:
                self.problems.append(f"the line table of the relocated cubin in section {section} "
                                     f"is unreadable ({exc}); its source lines are left out")
            self.problems += [f"relocated cubin in section {section}: {problem}"
                              for problem in (table.problems if table else [])]
            self._line_tables[section] = table
        return self._line_tables[section]

    def source_lines(self, location: CodeLocation) -> list[SourceLine]:
        """The inline chain at ``location``, innermost first, from the cubin's line table."""
        table = self.line_table(location.image_section)
        return list(table.chain(location.text_section, location.section_offset)) if table else []

    @cached_property
    def _images(self) -> list[tuple[int, Module]]:
        return self.core.relocated_images()

    def _candidates(self, grid: Grid | None) -> Iterator[int]:
        """The faulting grid's own module first, then the rest of its device, then all."""
        seen = set()
        everything = self._images
        if grid is not None:
            ordered = [s for s, m in everything if m.module_handle == grid.module_handle
                       and m.context.device is grid.device]
            ordered += [s for s, m in everything if m.context.device is grid.device]
        else:
            ordered = []
        ordered += [s for s, _ in everything]
        for section in ordered:
            if section not in seen:
                seen.add(section)
                yield section

    def locate(self, pc: int, grid: Grid | None = None) -> CodeLocation | None:
        for section in self._candidates(grid):
            cubin = self.cubin(section)
            if cubin is None:
                continue
            for text in cubin.texts:
                if text.address <= pc < text.address + text.size:
                    return _location(section, text, pc - text.address)
        return None

    def listings(self, section: int) -> CubinListings:
        """The listings of the relocated cubin in ``section`` (which locate found readable)."""
        if section not in self._listings:
            cubin = self.core.cubin(section)
            self._listings[section] = CubinListings(cubin.rebased, cubin.texts)
        return self._listings[section]

    def code(self, location: CodeLocation) -> FunctionCode | str:
        """The listing and control-flow graph of the text section holding ``location``
        (offsets into it), or why there is none."""
        key = (location.image_section, location.text_section)
        if key not in self._code:
            listing = self.listings(location.image_section).section(location.text_section)
            self._code[key] = listing if isinstance(listing, str) else FunctionCode(listing)
        return self._code[key]


def _location(section: int, text: Text, offset: int) -> CodeLocation:
    # A kernel's symbol can span the non-inlined callees nvcc places after it in its section
    # ($__internal_0_$__cuda_sm20_div_u64 and the like): the innermost holder names the PC.
    holders = [f for f in text.functions if f.start <= offset < f.start + max(f.size, 1)]
    holder = max(holders, key=lambda f: f.start, default=None)
    return CodeLocation(
        image_section=section,
        text_section=text.name,
        text_address=text.address,
        function_symbol=text.symbol,
        function=holder.name if holder else None,
        function_offset=offset - holder.start if holder else None,
        section_offset=offset,
    )


def function_code(finder: CodeFinder, pc: int,
                  grid: Grid | None = None) -> tuple[CodeLocation, FunctionCode] | str:
    """The code of the function holding ``pc``: its listing (addresses and branch targets as
    offsets into its text section; add ``location.text_address`` for GPU addresses) and its
    control-flow graph, or why there is none."""
    location = finder.locate(pc, grid)
    if location is None:
        return "no relocated cubin in the dump holds this PC"
    code = finder.code(location)
    return code if isinstance(code, str) else (location, code)
