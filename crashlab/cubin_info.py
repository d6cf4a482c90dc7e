"""A kernel's parameter layout, read from its cubin's ``.nv.info.<kernel>`` section.

The parameter buffer in a coredump is bytes; which parameter sits where is written by ptxas into
the cubin as EIATTR records. The format, as NVIDIA's cuobjdump decodes it (``cuobjdump -elf``
prints every record; tests/test_params.py holds this reader to its output on every fixture cubin):

- a section is a run of records, each ``u8 format, u8 attribute`` then a value by format:
  EIFMT_NVAL (1) two unused bytes, EIFMT_BVAL (2) one byte and one of padding, EIFMT_HVAL (3)
  a u16, EIFMT_SVAL (4) a u16 length and that many bytes;
- EIATTR_KPARAM_INFO (0x17, SVAL of 12 bytes): u32 index, u16 ordinal, u16 offset into the
  parameter area, u32 packing logAlignment (bits 0-7), space (8-11), cbank (12-16), a flag that
  is 0 for a parameter in the constant bank (bit 17) and the size in bytes (bits 18-31);
- EIATTR_PARAM_CBANK (0x0a, SVAL of 8 bytes): u32 symbol of ``.nv.constant0.<kernel>``, u16
  offset of the parameter area in that bank, u16 its size;
- EIATTR_CBANK_PARAM_SIZE (0x19, HVAL): the parameter area's size.

Offsets are relative to the start of the parameter area, which is where a coredump's parameter
buffer starts: real cuda-gdb reads ``*(long @parameter *)(paramsOffset + offset)`` from it.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

from elftools.elf.elffile import ELFFile

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_PARAM_CBANK = 0x0A
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
_KPARAM = struct.Struct("<IHHI")
_PARAM_CBANK = struct.Struct("<IHH")


@dataclass(frozen=True)
class Attribute:
    """One .nv.info record: its format, attribute id and value bytes (little-endian)."""

    format: int
    attribute: int
    value: bytes


@dataclass(frozen=True)
class KernelParam:
    ordinal: int
    offset: int
    size: int
    log_alignment: int
    space: int
    cbank: int
    in_cbank: bool


@dataclass
class ParamLayout:
    """Where each parameter of one kernel lies in its parameter area."""

    params: list[KernelParam] = field(default_factory=list)
    #: offset and size of the parameter area in constant bank 0 (EIATTR_PARAM_CBANK)
    cbank_offset: int | None = None
    cbank_size: int | None = None
    #: EIATTR_CBANK_PARAM_SIZE
    area_size: int | None = None


class NvInfoError(ValueError):
    """A .nv.info section whose records do not add up."""


def records(data: bytes) -> list[Attribute]:
    """Every record of a .nv.info section, in order; NvInfoError where one runs past the end
    or has a format no cuobjdump knows (the rest of the section cannot be framed then)."""
    found, at = [], 0
    while at < len(data):
        if at + 4 > len(data):
            raise NvInfoError(f"record at {at:#x} is cut short ({len(data) - at} bytes left)")
        fmt, attribute = data[at], data[at + 1]
        if fmt == EIFMT_SVAL:
            length = int.from_bytes(data[at + 2 : at + 4], "little")
            if at + 4 + length > len(data):
                raise NvInfoError(f"record at {at:#x} claims {length} bytes, past the section's end")
            found.append(Attribute(fmt, attribute, data[at + 4 : at + 4 + length]))
            at += 4 + length
        elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
            value = {EIFMT_NVAL: b"", EIFMT_BVAL: data[at + 2 : at + 3]}.get(fmt, data[at + 2 : at + 4])
            found.append(Attribute(fmt, attribute, value))
            at += 4
        else:
            raise NvInfoError(f"record at {at:#x} has unknown format {fmt}")
    return found


def _kparam(value: bytes) -> KernelParam:
    if len(value) != _KPARAM.size:
        raise NvInfoError(f"EIATTR_KPARAM_INFO of {len(value)} bytes, expected {_KPARAM.size}")
    _index, ordinal, offset, packed = _KPARAM.unpack(value)
    return KernelParam(ordinal=ordinal, offset=offset, size=packed >> 18,
                       log_alignment=packed & 0xFF, space=(packed >> 8) & 0xF,
                       cbank=(packed >> 12) & 0x1F, in_cbank=not (packed >> 17) & 1)


def layout(data: bytes) -> ParamLayout:
    """The parameter layout one ``.nv.info.<kernel>`` section describes, ordered by ordinal."""
    result = ParamLayout()
    for record in records(data):
        if record.attribute == EIATTR_KPARAM_INFO and record.format == EIFMT_SVAL:
            result.params.append(_kparam(record.value))
        elif record.attribute == EIATTR_PARAM_CBANK and len(record.value) == _PARAM_CBANK.size:
            _symbol, result.cbank_offset, result.cbank_size = _PARAM_CBANK.unpack(record.value)
        elif record.attribute == EIATTR_CBANK_PARAM_SIZE and record.format == EIFMT_HVAL:
            result.area_size = int.from_bytes(record.value, "little")
    result.params.sort(key=lambda p: p.ordinal)
    return result


def kernel_param_layout(cubin: bytes, kernel: str) -> tuple[ParamLayout | None, str]:
    """(layout, "") of ``kernel`` (its mangled name) in ``cubin``, or (None, why not)."""
    try:
        elf = ELFFile(io.BytesIO(cubin))
        section = elf.get_section_by_name(f".nv.info.{kernel}")
        data = section.data() if section is not None else None
    except Exception as exc:  # pyelftools raises many types on a damaged image
        return None, f"the kernel's cubin is unreadable: {exc}"
    if data is None:
        return None, "the kernel's cubin has no .nv.info section for it"
    try:
        return layout(data), ""
    except NvInfoError as exc:
        return None, f"the kernel's .nv.info section is damaged: {exc}"
