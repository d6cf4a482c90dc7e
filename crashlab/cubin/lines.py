"""A cubin's line table, read without nvdisasm: the source line and inline chain of a SASS offset.

A cubin built with ``-lineinfo`` (or ``-G``) has a DWARF ``.debug_line`` with one sequence per
function section. Each sequence starts with ``DW_LNE_set_address``, whose operand an ``R_CUDA_64``
relocation (``.rela.debug_line``) points at the function's symbol: 0 in the cubin as ptxas wrote
it, the function's GPU address where whoever loaded the module applied the relocation. Both occur
in coredumps (a synthetic dump leaves the relocation unapplied; a driver may apply it), so a
sequence is placed by its relocation's symbol when there is one, else by the section whose
address it names.

Inlining is NVIDIA's extension of the line program. Its two extended opcodes are numbered in
NVIDIA's cuda-gdb, include/dwarf2.h: ``DW_LNE_inlined_call = 0x90`` and
``DW_LNE_set_function_name = 0x91`` (elfutils' dwarf.h calls them DW_LNE_NVIDIA_inlined_call and
DW_LNE_NVIDIA_set_function_name). ``inlined_call`` has two ULEB128 operands, the context and the
inlined function's name as an offset into ``.debug_str``; it sets a state register for the rows
that follow. The context is the 1-based number of the call-site row (0: not inlined), counted
from the start of the sequence; elfutils' libdw/dwarf_linecontext.c also takes it as a 1-based
row number, and the count from the sequence's start is what makes the chains agree with
``nvdisasm -gi`` on every instruction of the tests' cubins (tests/test_lineinfo.py). The chain
of a row is the row, its context row, that row's context row and so on: innermost first,
outermost last, the line in the function that holds the PC, which nvdisasm prints last, after
the "inlined at" lines.

The unit header (32- and 64-bit DWARF; ptxas writes version 2, and versions 2 to 4 are read) and
the line program are decoded here. pyelftools' LineProgram skips an extended opcode it does not
know (``stream.seek(inst_len - 1)``) and keeps neither its operands nor a hook to see them, so the
context each row needs is lost. It is also slower: 24-35 ms to decode the 18 KiB table of the CUB
cubin benchmarks/bench_lineinfo.py builds, where this whole reader, ELF included, takes 8 ms
(medians, the same run); and importing it costs every inspect more than reading a header does.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Protocol

from .elf import Relocation, Section
from .errors import CubinError


class Readable(Protocol):
    """What the line table reader reads of a cubin (crashlab.cubin.Cubin)."""

    bits: int
    little_endian: bool
    sections: list[Section]

    def section(self, name: str) -> Section | None: ...
    def section_data(self, section: Section) -> bytes: ...
    def relocations(self, name: str) -> list[Relocation]: ...

DW_LNS_COPY, DW_LNS_ADVANCE_PC, DW_LNS_ADVANCE_LINE, DW_LNS_SET_FILE = 1, 2, 3, 4
DW_LNS_CONST_ADD_PC, DW_LNS_FIXED_ADVANCE_PC = 8, 9
DW_LNE_END_SEQUENCE, DW_LNE_SET_ADDRESS = 1, 2
#: NVIDIA's extensions (cuda-gdb include/dwarf2.h)
DW_LNE_INLINED_CALL, DW_LNE_SET_FUNCTION_NAME = 0x90, 0x91
LINE_TABLE = ".debug_line"
LINE_RELOCATIONS = (".rela.debug_line", ".rel.debug_line")


def _damaged(message: str) -> CubinError:
    return CubinError(message, LINE_TABLE)


@dataclass(frozen=True)
class SourceLine:
    file: str
    line: int


@dataclass
class _Row:
    address: int
    file: str
    line: int
    context: int  # 1-based row of the call site in the same sequence, 0 if not inlined


@dataclass
class _Sequence:
    start: int  # the section offset of the sequence's first address
    end: int
    rows: list[_Row]
    #: the address of each run of rows nvdisasm shows as one, and the row whose chain it shows
    offsets: list[int] = field(default_factory=list)
    shown: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        # An instruction takes the last row at its address; nvdisasm -gi prints a chain only
        # where the innermost file:line changes, so a run of rows with one innermost line shows
        # the first one's chain (ptxas may repeat a row, which shifts the context numbers after
        # it: nvdisasm counts every row, and so does this reader).
        for index, row in enumerate(self.rows):
            if self.offsets and self.offsets[-1] == row.address:
                self.offsets.pop()
                self.shown.pop()
            first = self.shown[-1] if self.shown else None
            same = first is not None and (self.rows[first].file, self.rows[first].line) == (row.file, row.line)
            self.offsets.append(row.address)
            self.shown.append(index if first is None or not same else first)


@dataclass
class LineTable:
    """Rows by function section; ``chain`` answers one offset, ``problems`` says what was
    skipped (a sequence naming no section) without failing the rest."""

    sequences: dict[str, list[_Sequence]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def chain(self, section: str, offset: int) -> tuple[SourceLine, ...]:
        """The inline chain of the instruction at ``offset`` into ``section``, innermost first;
        empty where the table has no row for it."""
        for sequence in self.sequences.get(section, ()):
            if sequence.start <= offset < sequence.end:
                at = bisect_right(sequence.offsets, offset) - 1
                if at >= 0:
                    return _chain(sequence.rows, sequence.shown[at])
        return ()

    @property
    def sections(self) -> list[str]:
        return sorted(self.sequences)


def _chain(rows: list[_Row], at: int) -> tuple[SourceLine, ...]:
    chain, seen = [], set()
    while at not in seen:  # a damaged table could make the contexts a loop
        seen.add(at)
        row = rows[at]
        chain.append(SourceLine(row.file, row.line))
        if not 0 < row.context <= len(rows):
            break
        at = row.context - 1
    return tuple(chain)


def read_line_table(cubin: Readable) -> LineTable | None:
    """The line table of ``cubin`` (original or relocated), or None where it has none.
    Raises CubinError (part ``.debug_line``) for one that cannot be read."""
    section = cubin.section(LINE_TABLE)
    if section is None:
        return None
    placer = _Placer(cubin)
    data = cubin.section_data(section)
    table = LineTable()
    offset = 0
    while offset < len(data):
        try:
            offset = _unit(data, offset, placer, table)
        except CubinError:
            raise
        except Exception as exc:  # construct, IndexError, struct.error on damaged bytes
            raise _damaged(f"{LINE_TABLE} unit at {offset:#x} is damaged: "
                           f"{type(exc).__name__}: {exc}") from exc
    for sequences in table.sequences.values():
        sequences.sort(key=lambda s: s.start)
    return table


class _Placer:
    """Which function section a sequence's DW_LNE_set_address names, and its offset there."""

    def __init__(self, cubin: Readable):
        self.texts = {s.index: (s.name, s.address, s.size) for s in cubin.sections if s.executable}
        self.address_size = 8 if cubin.bits == 64 else 4
        self.little_endian = cubin.little_endian
        self.relocations: dict[int, tuple[int, int, int]] = {}  # offset -> (shndx, value, addend)
        for name in LINE_RELOCATIONS:
            for relocation in cubin.relocations(name):
                symbol = relocation.symbol
                if symbol.section is not None:
                    self.relocations[relocation.offset] = (symbol.section, symbol.value,
                                                           relocation.addend)

    def place(self, operand_at: int, stored: int) -> tuple[str, int] | None:
        """(section, offset into it of the address ``stored``) for a set_address operand at
        ``operand_at`` in .debug_line; None where no function section is named."""
        relocation = self.relocations.get(operand_at)
        if relocation is not None and relocation[0] in self.texts:
            shndx, value, addend = relocation
            name, address, _ = self.texts[shndx]
            start = value - address if address and value >= address else value
            if stored in (value + addend, address + start + addend):
                return name, start + addend  # the loader applied the relocation
            return name, start + addend + stored  # as written: the stored value is an addend
        holders = [(name, address) for name, address, size in self.texts.values()
                   if address and address <= stored < address + size]
        if holders:
            return holders[0][0], stored - holders[0][1]
        if not any(address for _, address, _ in self.texts.values()) and len(self.texts) == 1:
            (name, _, _), = self.texts.values()
            return name, stored
        return None


def _unit(data: bytes, offset: int, placer: _Placer, table: LineTable) -> int:
    """Reads the line program unit at ``offset`` into ``table``; returns the next unit's."""
    (length,) = struct.unpack_from("<I", data, offset)
    dwarf_format, length_size = (64, 12) if length == 0xFFFFFFFF else (32, 4)
    if dwarf_format == 64:
        (length,) = struct.unpack_from("<Q", data, offset + 4)
    end: int = offset + length_size + length
    if end > len(data):
        raise _damaged(f"{LINE_TABLE} unit at {offset:#x} claims {length} bytes, "
                             f"past the section's {len(data)}")
    (version,) = struct.unpack_from("<H", data, offset + length_size)
    if not 2 <= version <= 4:  # ptxas writes 2; DWARF 5 moved the file names to other forms
        raise _damaged(f"{LINE_TABLE} unit at {offset:#x} has DWARF version {version}, "
                             "not 2 to 4")
    header, header_end = _header(data, offset + length_size + 2, version, dwarf_format,
                                 "<" if placer.little_endian else ">")
    program: int = offset + length_size + 2 + (8 if dwarf_format == 64 else 4) + header.length
    if not header_end <= program <= end:
        raise _damaged(f"{LINE_TABLE} unit at {offset:#x}: its header overruns it")
    _Program(data, header, placer, table).run(program, end)
    return end


@dataclass
class _Header:
    """What the line program needs of its unit's header (DWARF 4, 6.2.4)."""

    length: int  # header_length: the bytes from after it to the program
    min_length: int
    line_base: int
    line_range: int
    opcode_base: int
    opcode_lengths: list[int]
    #: paths by file number less 1, as nvdisasm prints them: directory/name
    files: list[str]


def _header(data: bytes, at: int, version: int, dwarf_format: int, order: str) -> tuple[_Header, int]:
    """The unit header whose header_length field is at ``at``, and the offset after it."""
    (length,) = struct.unpack_from(order + ("Q" if dwarf_format == 64 else "I"), data, at)
    at += 8 if dwarf_format == 64 else 4
    min_length = data[at]
    at += 2 if version >= 4 else 1  # maximum_operations_per_instruction from version 4
    _default_is_stmt, line_base, line_range, opcode_base = struct.unpack_from("BbBB", data, at)
    at += 4
    opcode_lengths = list(data[at:at + max(opcode_base - 1, 0)])
    if len(opcode_lengths) < opcode_base - 1:
        raise _damaged(f"{LINE_TABLE}: the opcode lengths run past the section")
    at += len(opcode_lengths)
    directories = []
    while True:
        directory, at = _cstring(data, at)
        if not directory:
            break
        directories.append(directory)
    files = []
    while True:
        name, at = _cstring(data, at)
        if not name:
            break
        index, at = _uleb(data, at)
        _, at = _uleb(data, at)  # modification time
        _, at = _uleb(data, at)  # length
        directory = directories[index - 1] if 0 < index <= len(directories) else ""
        files.append(f"{directory}/{name}" if directory and not name.startswith("/") else name)
    return _Header(length, min_length, line_base, line_range, opcode_base, opcode_lengths, files), at


def _cstring(data: bytes, at: int) -> tuple[str, int]:
    """(the NUL-terminated string at ``at``, the offset after its NUL)."""
    end = data.index(b"\0", at)
    return data[at:end].decode("utf-8", "replace"), end + 1


class _Program:
    """The DWARF line state machine (DWARF 4, 6.2.2 and 6.2.5), with NVIDIA's inline context."""

    def __init__(self, data: bytes, header: _Header, placer: _Placer, table: LineTable) -> None:
        self.data, self.files, self.placer, self.table = data, header.files, placer, table
        self.opcode_base = header.opcode_base
        self.line_base, self.line_range = header.line_base, header.line_range
        self.min_length = header.min_length
        self.lengths = header.opcode_lengths
        if self.line_range == 0:
            raise _damaged(f"{LINE_TABLE}: line_range 0")
        self._reset()

    def _reset(self) -> None:
        self.address, self.file, self.line, self.context = 0, 1, 1, 0
        self.rows: list[_Row] = []
        self.placed: tuple[str, int] | None = None
        self.first_address: int | None = None

    def _row(self) -> None:
        index = self.file - 1
        name = self.files[index] if 0 <= index < len(self.files) else f"<file {self.file}>"
        self.rows.append(_Row(self.address, name, self.line, self.context))

    def _end_sequence(self) -> None:
        if self.placed is None:
            if self.rows:
                self.table.problems.append(f"a line sequence at {self.first_address or 0:#x} "
                                           "names no function section; left out")
        else:
            section, start = self.placed
            base = self.first_address or 0
            for row in self.rows:
                row.address = start + row.address - base
            sequence = _Sequence(start, start + self.address - base, self.rows)
            self.table.sequences.setdefault(section, []).append(sequence)
        self._reset()

    def run(self, at: int, end: int) -> None:
        data = self.data
        while at < end:
            opcode = data[at]
            at += 1
            if opcode >= self.opcode_base:
                adjusted = opcode - self.opcode_base
                self.address += (adjusted // self.line_range) * self.min_length
                self.line += self.line_base + adjusted % self.line_range
                self._row()
            elif opcode == 0:
                length, at = _uleb(data, at)
                if length == 0 or at + length > end:
                    raise _damaged(f"{LINE_TABLE}: extended opcode at {at:#x} runs past "
                                         "its unit")
                self._extended(at, length)
                at += length
            elif opcode == DW_LNS_COPY:
                self._row()
            elif opcode == DW_LNS_ADVANCE_PC:
                advance, at = _uleb(data, at)
                self.address += advance * self.min_length
            elif opcode == DW_LNS_ADVANCE_LINE:
                advance, at = _sleb(data, at)
                self.line += advance
            elif opcode == DW_LNS_SET_FILE:
                self.file, at = _uleb(data, at)
            elif opcode == DW_LNS_CONST_ADD_PC:
                self.address += ((255 - self.opcode_base) // self.line_range) * self.min_length
            elif opcode == DW_LNS_FIXED_ADVANCE_PC:
                (advance,) = struct.unpack_from("<H", data, at)
                self.address += advance
                at += 2
            else:  # set_column, negate_stmt, ..., or one this reader does not know: skip operands
                for _ in range(self.lengths[opcode - 1] if opcode - 1 < len(self.lengths) else 0):
                    _, at = _uleb(data, at)
        if self.rows:
            self.table.problems.append(f"a line sequence in the unit ending at {end:#x} has no "
                                       "end; left out")

    def _extended(self, at: int, length: int) -> None:
        opcode = self.data[at]
        if opcode == DW_LNE_END_SEQUENCE:
            self._end_sequence()
        elif opcode == DW_LNE_SET_ADDRESS:
            size = length - 1
            if size not in (4, 8):
                raise _damaged(f"{LINE_TABLE}: a {size}-byte address at {at:#x}")
            (stored,) = struct.unpack_from("<Q" if size == 8 else "<I", self.data, at + 1)
            if self.first_address is None:
                self.placed = self.placer.place(at + 1, stored)
                self.first_address = stored
            self.address = stored
        elif opcode == DW_LNE_INLINED_CALL:
            self.context, _ = _uleb(self.data, at + 1)


def _uleb(data: bytes, at: int) -> tuple[int, int]:
    return _leb128(data, at, signed=False)


def _sleb(data: bytes, at: int) -> tuple[int, int]:
    return _leb128(data, at, signed=True)


def _leb128(data: bytes, at: int, *, signed: bool) -> tuple[int, int]:
    """(value, the offset after it) of the LEB128 number at ``at`` (DWARF 4, 7.6)."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return (value - (1 << shift) if signed and byte & 0x40 else value), at
