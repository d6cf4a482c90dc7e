"""What a kernel's cubin says about its memory: the static shared allocation (``.nv.shared.<kernel>``)
and each function's stack frame (EIATTR_FRAME_SIZE in ``.nv.info``). These are the bounds the dump
itself holds, since the dump carries the relocated cubin.

On sm_90+ the ``.nv.shared.<kernel>`` section spans the 1 KiB the system reserves at the start of a
block's shared window as well as the kernel's own arrays (moe_align.sm_90.cubin: 0x500 bytes for one
``int[64]``), so the arrays span [0x400, size).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from elftools.elf.elffile import ELFFile

from ..cubin_info import EIFMT_SVAL, NvInfoError, records

EIATTR_FRAME_SIZE = 0x11
SHARED_RESERVE_SM90 = 0x400
_SYMBOL_AND_SIZE = struct.Struct("<II")


@dataclass(frozen=True)
class SharedLayout:
    """The static shared allocation of one kernel, as offsets into the block's shared window."""

    start: int  # where the kernel's arrays start (0x400 on sm_90+, else 0)
    declared: int  # bytes of the kernel's own static arrays
    section: str


@dataclass(frozen=True)
class KernelFacts:
    shared: SharedLayout | None
    #: bytes of stack frame per function symbol index (EIATTR_FRAME_SIZE)
    frame_sizes: dict[int, int]


def shared_reserve(sm_type: str) -> int:
    """Bytes reserved at the start of a block's shared window: 0x400 from sm_90 on."""
    digits = "".join(c for c in sm_type.removeprefix("sm_") if c.isdigit())
    return SHARED_RESERVE_SM90 if digits and int(digits) >= 90 else 0


def kernel_facts(cubin: bytes, kernel: str, sm_type: str) -> KernelFacts:
    """The facts of ``kernel`` (mangled) in ``cubin``; missing or damaged parts read as absent."""
    try:
        elf = ELFFile(io.BytesIO(cubin))
        shared = elf.get_section_by_name(f".nv.shared.{kernel}")
        info = elf.get_section_by_name(".nv.info")
        info_data = info.data() if info is not None else b""
        layout = None
        if shared is not None:
            reserve = shared_reserve(sm_type)
            size = shared["sh_size"]
            start = reserve if size >= reserve else 0
            layout = SharedLayout(start=start, declared=size - start, section=shared.name)
    except Exception:  # pyelftools raises many types on a damaged image
        return KernelFacts(None, {})
    return KernelFacts(layout, _frame_sizes(info_data))


def _frame_sizes(data: bytes) -> dict[int, int]:
    try:
        found = records(data)
    except NvInfoError:
        return {}
    return {symbol: size for symbol, size in (
        _SYMBOL_AND_SIZE.unpack(r.value) for r in found
        if r.attribute == EIATTR_FRAME_SIZE and r.format == EIFMT_SVAL
        and len(r.value) == _SYMBOL_AND_SIZE.size)}
