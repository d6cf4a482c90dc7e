"""What a cubin's ``.nv.info`` records say: a kernel's parameter layout, each function's stack frame,
and (from ``.nv.shared.<kernel>``) its static shared allocation.

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

- EIATTR_FRAME_SIZE (0x11, SVAL of 8 bytes) in the cubin's ``.nv.info``: u32 function symbol,
  u32 bytes of stack frame.

Offsets are relative to the start of the parameter area, which is where a coredump's parameter
buffer starts: real cuda-gdb reads ``*(long @parameter *)(paramsOffset + offset)`` from it.

On sm_90+ the ``.nv.shared.<kernel>`` section spans the 1 KiB the system reserves at the start of a
block's shared window as well as the kernel's own arrays (moe_align.sm_90.cubin: 0x500 bytes for one
``int[64]``), so the arrays span [0x400, size).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Protocol

from .errors import CubinError

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_PARAM_CBANK = 0x0A
EIATTR_FRAME_SIZE = 0x11
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
SHARED_RESERVE_SM90 = 0x400
_KPARAM = struct.Struct("<IHHI")
_PARAM_CBANK = struct.Struct("<IHH")
_SYMBOL_AND_SIZE = struct.Struct("<II")


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


@dataclass(frozen=True)
class SharedLayout:
    """The static shared allocation of one kernel, as offsets into the block's shared window."""

    start: int  # where the kernel's arrays start (0x400 on sm_90+, else 0)
    declared: int  # bytes of the kernel's own static arrays
    section: str


def _damaged(message: str) -> CubinError:
    return CubinError(message, ".nv.info")


def records(data: bytes) -> list[Attribute]:
    """Every record of a .nv.info section, in order; CubinError where one runs past the end
    or has a format no cuobjdump knows (the rest of the section cannot be framed then)."""
    found, at = [], 0
    while at < len(data):
        if at + 4 > len(data):
            raise _damaged(f"record at {at:#x} is cut short ({len(data) - at} bytes left)")
        fmt, attribute = data[at], data[at + 1]
        if fmt == EIFMT_SVAL:
            length = int.from_bytes(data[at + 2 : at + 4], "little")
            if at + 4 + length > len(data):
                raise _damaged(f"record at {at:#x} claims {length} bytes, past the section's end")
            found.append(Attribute(fmt, attribute, data[at + 4 : at + 4 + length]))
            at += 4 + length
        elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
            value = {EIFMT_NVAL: b"", EIFMT_BVAL: data[at + 2 : at + 3]}.get(fmt, data[at + 2 : at + 4])
            found.append(Attribute(fmt, attribute, value))
            at += 4
        else:
            raise _damaged(f"record at {at:#x} has unknown format {fmt}")
    return found


def _kparam(value: bytes) -> KernelParam:
    if len(value) != _KPARAM.size:
        raise _damaged(f"EIATTR_KPARAM_INFO of {len(value)} bytes, expected {_KPARAM.size}")
    _index, ordinal, offset, packed = _KPARAM.unpack(value)
    return KernelParam(ordinal=ordinal, offset=offset, size=packed >> 18,
                       log_alignment=packed & 0xFF, space=(packed >> 8) & 0xF,
                       cbank=(packed >> 12) & 0x1F, in_cbank=not (packed >> 17) & 1)


def layout(found: list[Attribute]) -> ParamLayout:
    """The parameter layout one ``.nv.info.<kernel>`` section's records describe, ordered by
    ordinal."""
    result = ParamLayout()
    for record in found:
        if record.attribute == EIATTR_KPARAM_INFO and record.format == EIFMT_SVAL:
            result.params.append(_kparam(record.value))
        elif record.attribute == EIATTR_PARAM_CBANK and len(record.value) == _PARAM_CBANK.size:
            _symbol, result.cbank_offset, result.cbank_size = _PARAM_CBANK.unpack(record.value)
        elif record.attribute == EIATTR_CBANK_PARAM_SIZE and record.format == EIFMT_HVAL:
            result.area_size = int.from_bytes(record.value, "little")
    result.params.sort(key=lambda p: p.ordinal)
    return result


class Laid(Protocol):
    """What kernel_param_layout asks of a cubin (crashlab.cubin.Cubin)."""

    def param_layout(self, kernel: str) -> ParamLayout | None: ...


def kernel_param_layout(cubin: Laid, kernel: str) -> tuple[ParamLayout | None, str]:
    """(layout, "") of ``kernel`` (its mangled name) in ``cubin``, or (None, why not)."""
    try:
        found = cubin.param_layout(kernel)
    except CubinError as exc:
        if exc.part == ".nv.info":
            return None, f"the kernel's .nv.info section is damaged: {exc}"
        return None, f"the kernel's cubin is unreadable: {exc}"
    if found is None:
        return None, "the kernel's cubin has no .nv.info section for it"
    return found, ""


def frame_sizes(found: list[Attribute]) -> dict[int, int]:
    """Bytes of stack frame per function symbol index, from the cubin's .nv.info records."""
    return {symbol: size for symbol, size in (
        _SYMBOL_AND_SIZE.unpack(r.value) for r in found
        if r.attribute == EIATTR_FRAME_SIZE and r.format == EIFMT_SVAL
        and len(r.value) == _SYMBOL_AND_SIZE.size)}


def shared_reserve(sm_type: str) -> int:
    """Bytes reserved at the start of a block's shared window: 0x400 from sm_90 on."""
    digits = "".join(c for c in sm_type.removeprefix("sm_") if c.isdigit())
    return SHARED_RESERVE_SM90 if digits and int(digits) >= 90 else 0


def shared_layout(section: str, size: int, sm_type: str) -> SharedLayout:
    """The kernel's arrays in a ``.nv.shared.<kernel>`` section of ``size`` bytes on ``sm_type``."""
    reserve = shared_reserve(sm_type)
    start = reserve if size >= reserve else 0
    return SharedLayout(start=start, declared=size - start, section=section)
