"""The ELF parts of a cubin the layer hands out, read with struct (the ELF gABI's Elf32/Elf64
layouts): its section headers (every inspect of a real dump reads them for each module the dump
holds, to name its kernels, where pyelftools would build an object per section), its symbols, its
relocations and its notes. pyelftools is not used here: importing it (and construct, which
imports pdb) cost every inspect more than reading these few tables does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from .errors import CubinError

SHF_EXECINSTR = 0x4
SHT_SYMTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS, SHT_REL = 2, 4, 7, 8, 9
SHN_XINDEX = 0xFFFF
#: st_shndx values that name no section (pyelftools' ENUM_ST_SHNDX)
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
#: st_info's low nibble by name, as pyelftools names them (ENUM_ST_INFO_TYPE)
SYMBOL_TYPES = {0: "STT_NOTYPE", 1: "STT_OBJECT", 2: "STT_FUNC", 3: "STT_SECTION", 4: "STT_FILE",
                5: "STT_COMMON", 6: "STT_TLS", 7: "STT_NUM", 8: "STT_RELC", 9: "STT_SRELC",
                10: "STT_LOOS", 12: "STT_HIOS", 13: "STT_LOPROC", 15: "STT_HIPROC"}
#: Elf_Sym: (name, value, size, info, shndx) in field order; Elf_Rel(a): offset, info[, addend];
#: the bits r_info's symbol number is shifted by; by ELF class
_SYMBOL = {32: ("IIIBBH", (0, 1, 2, 3, 5)), 64: ("IBBHQQ", (0, 4, 5, 1, 3))}
_RELOCATION = {32: ("II", "IIi", 8), 64: ("QQ", "QQq", 32)}
#: ELF header: e_shoff, then e_shentsize, e_shnum, e_shstrndx; a section header; by ELF class
_LAYOUTS = {1: (32, (0x20, "I"), (0x2E, "HHH"), "IIIIIIIIII"),
            2: (64, (0x28, "Q"), (0x3A, "HHH"), "IIQQQQIIQQ")}


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    #: SHT_NOBITS: the section takes no bytes of the file (.nv.shared.*, .bss)
    nobits: bool
    flags: int
    address: int
    offset: int
    size: int
    info: int
    link: int
    entsize: int
    #: sh_type (SHT_REL and SHT_RELA tell a relocation section's entries apart)
    kind: int = 0

    @property
    def executable(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR) and self.size > 0


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    #: the index of the section it is defined in; None for an undefined or absolute one
    section: int | None
    type: str  # STT_FUNC, STT_OBJECT, ... (STT_<n> for a number pyelftools has no name for)


@dataclass(frozen=True)
class Relocation:
    offset: int
    symbol: Symbol
    addend: int


class Headers(NamedTuple):
    bits: int
    little_endian: bool
    #: where the section header table lies and the size of one entry (e_shoff, e_shentsize)
    table: int
    entsize: int
    sections: list[Section]


def section_headers(data: bytes) -> Headers:
    """The ELF class, byte order and section headers of ``data``; CubinError where they do not
    read (a short file, a table or a name past its end)."""
    if data[:4] != b"\x7fELF" or len(data) < 0x40 or data[4] not in _LAYOUTS or data[5] not in (1, 2):
        raise CubinError("not an ELF file of a known class and byte order")
    bits, (shoff_at, shoff_format), (counts_at, counts_format), header_format = _LAYOUTS[data[4]]
    order = "<" if data[5] == 1 else ">"
    header = struct.Struct(order + header_format)
    (shoff,) = struct.unpack_from(order + shoff_format, data, shoff_at)
    entsize, count, names_index = struct.unpack_from(order + counts_format, data, counts_at)
    if shoff == 0:
        return Headers(bits, data[5] == 1, shoff, entsize, [])
    if entsize < header.size or shoff + header.size > len(data):
        raise CubinError(f"section header table at {shoff:#x} does not fit the file")
    first = header.unpack_from(data, shoff)
    count = count or first[5]  # e_shnum 0: the count is section 0's sh_size
    names_index = first[6] if names_index == SHN_XINDEX else names_index
    if shoff + count * entsize > len(data):
        raise CubinError(f"{count} section headers at {shoff:#x} run past the end of the file")
    rows = [header.unpack_from(data, shoff + k * entsize) for k in range(count)]
    if not 0 <= names_index < count:
        raise CubinError(f"section name table {names_index} is not a section")
    names = rows[names_index]
    if names[4] + names[5] > len(data):
        raise CubinError("the section name table runs past the end of the file")
    table = data[names[4]:names[4] + names[5]]
    sections = []
    for index, (name, kind, flags, address, offset, size, link, info, _align, entry) in enumerate(rows):
        end = table.find(b"\0", name) if name < len(table) else -1
        if end < 0:
            raise CubinError(f"section {index}'s name is outside the section name table")
        sections.append(Section(index, table[name:end].decode("utf-8", "replace"), kind == SHT_NOBITS,
                                flags, address, offset, size, info, link, entry, kind))
    return Headers(bits, data[5] == 1, shoff, entsize, sections)


def _contents(data: bytes, section: Section) -> bytes:
    if section.nobits:
        return b""
    if section.offset + section.size > len(data):
        raise CubinError(f"section {section.name} runs past the end of the file", section.name)
    return data[section.offset:section.offset + section.size]


def _string(table: bytes, at: int) -> str:
    """The NUL-terminated name at ``at`` of a string table, '' where it lies outside it (as
    pyelftools reads an empty name)."""
    end = table.find(b"\0", at)
    return table[at:end if end >= 0 else len(table)].decode("utf-8", "replace") if at < len(table) else ""


def symbols(data: bytes, headers: Headers, table: Section) -> list[Symbol]:
    """The entries of symbol table ``table``, by symbol number, named from its linked string
    table."""
    layout, (name_at, value_at, size_at, info_at, shndx_at) = _SYMBOL[headers.bits]
    entry = struct.Struct(("<" if headers.little_endian else ">") + layout)
    if table.entsize < entry.size:
        raise CubinError(f"symbol table entries of {table.entsize} bytes, not {entry.size}", table.name)
    if not 0 <= table.link < len(headers.sections):
        raise CubinError(f"the symbol table's string table {table.link} is not a section", table.name)
    strings = _contents(data, headers.sections[table.link])
    body = _contents(data, table)
    found = []
    for at in range(0, len(body) - entry.size + 1, table.entsize):
        fields = entry.unpack_from(body, at)
        shndx = fields[shndx_at]
        kind = fields[info_at] & 0xF
        found.append(Symbol(_string(strings, fields[name_at]), fields[value_at], fields[size_at],
                            None if shndx in (SHN_UNDEF, SHN_ABS, SHN_COMMON) else shndx,
                            SYMBOL_TYPES.get(kind, f"STT_{kind}")))
    return found


def relocations(data: bytes, headers: Headers, section: Section,
                symbol_table: list[Symbol]) -> list[Relocation]:
    """The entries of relocation section ``section`` (SHT_REL or SHT_RELA) with their symbols;
    none for a section of another type."""
    if section.kind not in (SHT_REL, SHT_RELA):
        return []
    plain, with_addend, shift = _RELOCATION[headers.bits]
    entry = struct.Struct(("<" if headers.little_endian else ">")
                          + (with_addend if section.kind == SHT_RELA else plain))
    if section.entsize < entry.size:
        raise CubinError(f"relocation entries of {section.entsize} bytes, not {entry.size}", section.name)
    body = _contents(data, section)
    found = []
    for at in range(0, len(body) - entry.size + 1, section.entsize):
        offset, info, *addend = entry.unpack_from(body, at)
        number = info >> shift
        if number >= len(symbol_table):
            raise CubinError(f"a relocation at {offset:#x} names symbol {number}, past the table",
                             section.name)
        found.append(Relocation(offset, symbol_table[number], addend[0] if addend else 0))
    return found


def note_descriptions(data: bytes, headers: Headers, section: Section) -> list[bytes]:
    """The descriptor bytes of each note of a note section (Elf_Nhdr, its name and descriptor
    padded to 4 bytes)."""
    header = struct.Struct(("<" if headers.little_endian else ">") + "III")
    body = _contents(data, section)
    found, at = [], 0
    while at + header.size < len(body):
        name_size, description_size, _kind = header.unpack_from(body, at)
        at += header.size + (name_size + 3) // 4 * 4
        if at + description_size > len(body):
            raise CubinError(f"a note at {at:#x} runs past its section", section.name)
        found.append(body[at:at + description_size])
        at += (description_size + 3) // 4 * 4
    return found
