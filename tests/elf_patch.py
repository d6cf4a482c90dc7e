"""Byte-level surgery on built dumps, for the bad-input and fuzz tests."""

from __future__ import annotations

import struct
from pathlib import Path

# Elf64_Shdr field -> (offset, struct code)
SHDR = {
    "name": (0, "I"), "type": (4, "I"), "flags": (8, "Q"), "addr": (16, "Q"), "offset": (24, "Q"),
    "size": (32, "Q"), "link": (40, "I"), "info": (44, "I"), "align": (48, "Q"), "entsize": (56, "Q"),
}
#: Row fields the attribution tests rewrite, by table (offsets from cudacoredump.h, the header
#: NVIDIA ships with cuda-gdb's source), for rows the builder cannot write wrong.
ROW_FIELDS = {
    "lane": {"virtualPC": (0, "Q"), "ln": (16, "I"), "threadIdxX": (20, "I"),
             "exception": (32, "I")},
    "warp": {"errorPC": (0, "Q"), "warpId": (8, "I"), "validLanesMask": (12, "I"),
             "activeLanesMask": (16, "I"), "errorPCValid": (24, "I")},
    "sm": {"smId": (0, "I"), "exception": (8, "I")},
}
EHDR = {"shoff": (0x28, "Q"), "shentsize": (0x3A, "H"), "shnum": (0x3C, "H"), "shstrndx": (0x3E, "H")}


def section_header_offset(data: bytes | bytearray, index: int) -> int:
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    return shoff + 64 * index


def read_section(data: bytes | bytearray, index: int, field: str) -> int:
    at, code = SHDR[field]
    return struct.unpack_from("<" + code, data, section_header_offset(data, index) + at)[0]


def set_section(data: bytearray, index: int, field: str, value: int) -> None:
    at, code = SHDR[field]
    struct.pack_into("<" + code, data, section_header_offset(data, index) + at, value)


def set_header(data: bytearray, field: str, value: int) -> None:
    at, code = EHDR[field]
    struct.pack_into("<" + code, data, at, value)


def set_row(data: bytearray, index: int, row: int, table: str, **values: int) -> None:
    """Rewrite fields of row ``row`` of table section ``index`` in place."""
    start = read_section(data, index, "offset") + row * read_section(data, index, "entsize")
    for name, value in values.items():
        at, code = ROW_FIELDS[table][name]
        struct.pack_into("<" + code, data, start + at, value)


def zero_row(data: bytearray, index: int, row: int) -> None:
    """Overwrite row ``row`` of table section ``index`` with zero bytes."""
    entsize = read_section(data, index, "entsize")
    start = read_section(data, index, "offset") + row * entsize
    data[start : start + entsize] = bytes(entsize)


def section_count(data: bytes | bytearray) -> int:
    count = struct.unpack_from("<H", data, 0x3C)[0]
    return count or read_section(data, 0, "size")


def structure_boundaries(data: bytes) -> list[int]:
    """Every offset where one structure of the file ends and another begins."""
    points = {0, 1, 4, 16, 63, 64, len(data) - 1}
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    for index in range(section_count(data)):
        start = read_section(data, index, "offset")
        points.update((start, start + read_section(data, index, "size"), shoff + 64 * index))
    return sorted(p for p in points if 0 <= p < len(data))


def patched(path: Path, out: Path, change) -> Path:
    data = bytearray(path.read_bytes())
    change(data)
    out.write_bytes(data)
    return out


#: SHT_LOUSER + 22: the driver's metadata section (.cudbg.meta), one CudbgMetaDataEntry; its
#: u32 timestamp at offset 28 (cudacoredump.h).
META_DATA = 0x80000000 + 22
META_TIMESTAMP = 28


def timestamp_at(data: bytes | bytearray) -> int:
    """The file offset of the timestamp the driver wrote in .cudbg.meta, read from the section
    headers with struct alone (not with crashlab's reader)."""
    [meta] = [index for index in range(section_count(data))
              if read_section(data, index, "type") == META_DATA]
    return read_section(data, meta, "offset") + META_TIMESTAMP


def header_timestamp(path: Path) -> int:
    """The timestamp the driver wrote in the dump at PATH (seconds since the epoch)."""
    data = path.read_bytes()
    return struct.unpack_from("<I", data, timestamp_at(data))[0]


def restamped(path: Path, out: Path, timestamp: int) -> Path:
    """Another crash of the same fault: PATH's bytes with the time its driver stamped set to
    TIMESTAMP, as a second dump of one bug written at another time differs (a copy of a dump
    is the same crash; this is not a copy)."""
    return patched(path, out, lambda data: struct.pack_into("<I", data, timestamp_at(data),
                                                            timestamp))
