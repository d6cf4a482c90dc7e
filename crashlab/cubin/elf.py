"""The ELF parts of a cubin the layer hands out: its section headers, read here with struct (the
ELF gABI's Elf32/Elf64 layouts; every inspect of a real dump reads them for each module the dump
holds, to name its kernels, where pyelftools would build an object per section), its symbols and
its relocations.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import CubinError

SHF_EXECINSTR = 0x4
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF
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
    type: str  # STT_FUNC, STT_OBJECT, ...


@dataclass(frozen=True)
class Relocation:
    offset: int
    symbol: Symbol
    addend: int


def section_headers(data: bytes) -> tuple[int, bool, list[Section]]:
    """(ELF class, little-endian, the section headers) of ``data``; CubinError where they do not
    read (a short file, a table or a name past its end)."""
    if data[:4] != b"\x7fELF" or len(data) < 0x40 or data[4] not in _LAYOUTS or data[5] not in (1, 2):
        raise CubinError("not an ELF file of a known class and byte order")
    bits, (shoff_at, shoff_format), (counts_at, counts_format), header_format = _LAYOUTS[data[4]]
    order = "<" if data[5] == 1 else ">"
    header = struct.Struct(order + header_format)
    (shoff,) = struct.unpack_from(order + shoff_format, data, shoff_at)
    entsize, count, names_index = struct.unpack_from(order + counts_format, data, counts_at)
    if shoff == 0:
        return bits, data[5] == 1, []
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
                                flags, address, offset, size, info, link, entry))
    return bits, data[5] == 1, sections
