"""One cubin, opened once: its sections, symbols, code sections and their functions, relocations,
notes, line table and ``.nv.info`` records, each read on first use and kept.

Every part is read with struct (crashlab.cubin.elf; the DWARF line program in crashlab.cubin.lines).
Whatever a reader raises on a damaged image leaves this class as a CubinError naming the part that
could not be read, so a caller catches one type and says it in its own words.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from . import elf
from .elf import Relocation, Section, Symbol
from .errors import CubinError, reading
from .lines import LineTable, read_line_table
from .nvinfo import (
    Attribute,
    ParamLayout,
    SharedLayout,
    frame_sizes,
    layout,
    records,
    shared_layout,
)

#: A cubin's ``.text.*`` sh_info names its function's symbol; cubins before Hopper also pack the
#: function's register count into the top byte (``(regs << 24) | symbol``), which nvdisasm's
#: ``-fun`` refuses ("No symbol with index 469762087"), so only the low 24 bits are an index.
TEXT_SYMBOL_BITS = 0xFFFFFF
#: Where sh_addr lies in a section header and st_value in a symbol, and their width, by ELF
#: class (the ELF gABI's Elf32_Shdr/Elf64_Shdr and Elf32_Sym/Elf64_Sym).
_ADDRESS_FIELDS = {32: ((12, "I"), (4, "I")), 64: ((16, "Q"), (8, "Q"))}
#: NVIDIA's note with the toolkit that built a cubin
TOOLKIT_NOTE = ".note.nv.tkinfo"

Read = TypeVar("Read")


@dataclass(frozen=True)
class Function:
    """A function symbol of a code section, as an offset into that section."""

    name: str
    start: int
    size: int


@dataclass(frozen=True)
class Text:
    """A code section and the functions its symbols place in it."""

    section: Section
    #: its function's symbol index, from sh_info (what nvdisasm's ``-fun`` takes)
    symbol: int
    functions: tuple[Function, ...]

    @property
    def name(self) -> str:
        return self.section.name

    @property
    def address(self) -> int:
        return self.section.address

    @property
    def size(self) -> int:
        return self.section.size


class Cubin:
    """``Cubin(data)`` reads the ELF header and the section headers, or raises CubinError; the rest
    is read on first use and kept (a damaged part raises CubinError on every use)."""

    def __init__(self, data: bytes):
        self.data = data
        self._headers = elf.section_headers(data)
        self.bits, self.little_endian = self._headers.bits, self._headers.little_endian
        self.sections = self._headers.sections
        self._by_name: dict[str, Section] = {}
        for section in self.sections:
            self._by_name.setdefault(section.name, section)
        self._read: dict[str, object] = {}

    def section(self, name: str) -> Section | None:
        return self._by_name.get(name)

    def section_data(self, section: Section) -> bytes:
        """The section's bytes as the file holds them (none for SHT_NOBITS); CubinError where
        the header points past the end of the file."""
        if section.nobits:
            return b""
        if section.offset + section.size > len(self.data):
            raise CubinError(f"section {section.name} runs past the end of the cubin", section.name)
        return self.data[section.offset:section.offset + section.size]

    def _kept(self, key: str, part: str | None, read: Callable[[], Read]) -> Read:
        """``read()`` once, its value or its failure kept (a failure is raised on each call)."""
        if key not in self._read:
            try:
                with reading(part):
                    self._read[key] = read()
            except CubinError as exc:
                self._read[key] = exc
        found = self._read[key]
        if isinstance(found, CubinError):
            raise CubinError(str(found), found.part)
        return found  # type: ignore[return-value]

    # -- symbols and code ----------------------------------------------------------------
    @cached_property
    def symbols(self) -> list[Symbol]:
        """The symbol table, by symbol number (empty where there is none)."""
        return self._kept("symbols", ".symtab", self._read_symbols)

    def _read_symbols(self) -> list[Symbol]:
        table = self.section(".symtab")
        if table is None or table.kind != elf.SHT_SYMTAB:
            return []
        return elf.symbols(self.data, self._headers, table)

    @cached_property
    def texts(self) -> list[Text]:
        """The code sections, each with its function symbols as offsets into it."""
        functions: dict[int, list[Function]] = {}
        for symbol in self.symbols:
            if symbol.type == "STT_FUNC" and symbol.section is not None:
                start = self._relative(symbol)
                functions.setdefault(symbol.section, []).append(Function(symbol.name, start, symbol.size))
        return [Text(section, section.info & TEXT_SYMBOL_BITS, tuple(functions.get(section.index, ())))
                for section in self.sections if section.executable]

    def _relative(self, symbol: Symbol) -> int:
        """A symbol's value as an offset into its section: a relocated cubin's symbols hold GPU
        addresses, an original one's hold offsets already."""
        base = self.sections[symbol.section].address \
            if symbol.section is not None and symbol.section < len(self.sections) else 0
        return symbol.value - base if base and symbol.value >= base else symbol.value

    @cached_property
    def rebased(self) -> bytes:
        """A copy at address 0: every sh_addr 0 and every symbol's value an offset into its
        section, as nvdisasm always accepts (and its printed addresses are offsets then), the
        two fields patched in place."""
        (header_at, header_format), (value_at, value_format) = _ADDRESS_FIELDS[self.bits]
        order = "<" if self.little_endian else ">"
        image = bytearray(self.data)
        with reading(None):
            shoff, shentsize = self._headers.table, self._headers.entsize
            for section in self.sections:
                if section.address:
                    struct.pack_into(order + header_format, image,
                                     shoff + section.index * shentsize + header_at, 0)
            table = self.section(".symtab")
            if table is not None and self.symbols:
                for number, symbol in enumerate(self.symbols):
                    relative = self._relative(symbol)
                    if relative != symbol.value:
                        struct.pack_into(order + value_format, image,
                                         table.offset + number * table.entsize + value_at, relative)
        return bytes(image)

    def relocations(self, name: str) -> list[Relocation]:
        """The entries of relocation section ``name`` with their symbols (none where there is
        no such section)."""
        return self._kept(f"relocations {name}", name, lambda: self._read_relocations(name))

    def _read_relocations(self, name: str) -> list[Relocation]:
        found = self.section(name)
        if found is None:
            return []
        return elf.relocations(self.data, self._headers, found, self.symbols)

    # -- what the cubin says about itself ------------------------------------------------
    @cached_property
    def toolchain(self) -> str | None:
        """The toolchain line of the producer note (the tool, the release, its build and the
        options: ``ptxas, Cuda compilation tools, release 13.0, V13.0.88, ...``), None where
        there is none."""
        return self._kept("toolchain", TOOLKIT_NOTE, self._read_toolchain)

    def _read_toolchain(self) -> str | None:
        found = self.section(TOOLKIT_NOTE)
        if found is None or found.kind != elf.SHT_NOTE:
            return None
        for data in elf.note_descriptions(self.data, self._headers, found):
            words = [piece.decode("utf-8", "replace") for piece in data.split(b"\0")]
            strings = [word.strip() for word in words if word.strip() and word.isprintable()]
            if strings:
                return ", ".join(strings[-4:])
        return None

    @cached_property
    def line_table(self) -> LineTable | None:
        """The DWARF line table with NVIDIA's inline chains (crashlab.cubin.lines), None where
        the cubin has none."""
        return self._kept("line table", ".debug_line", lambda: read_line_table(self))

    def attributes(self, kernel: str | None = None) -> list[Attribute] | None:
        """The records of ``.nv.info`` (the cubin's) or ``.nv.info.<kernel>`` (one kernel's);
        None where there is no such section."""
        name = f".nv.info.{kernel}" if kernel else ".nv.info"
        found = self.section(name)
        if found is None:
            return None
        return self._kept(name, ".nv.info", lambda: records(self.section_data(found)))

    def param_layout(self, kernel: str) -> ParamLayout | None:
        """Where each parameter of ``kernel`` (its mangled name) lies in its parameter area;
        None where the cubin has no ``.nv.info`` section for it."""
        found = self.attributes(kernel)
        return None if found is None else self._kept(f"layout {kernel}", ".nv.info",
                                                     lambda: layout(found))

    @cached_property
    def frame_sizes(self) -> dict[int, int]:
        """Bytes of stack frame per function symbol index (EIATTR_FRAME_SIZE)."""
        return frame_sizes(self.attributes() or [])

    def shared_layout(self, kernel: str, sm_type: str) -> SharedLayout | None:
        """The static shared allocation of ``kernel`` (mangled) on ``sm_type``; None where it
        has none."""
        found = self.section(f".nv.shared.{kernel}")
        return None if found is None else shared_layout(found.name, found.size, sm_type)
