"""What a SASS opcode does to memory: load, store, atomic or prefetch; which space; how many bytes
per lane. The explainer needs all three to judge a faulting address (an access of 8 bytes at the
last 4 bytes of an array is out of bounds; an 8-byte access at an address that is 4 mod 8 is
misaligned).

The table covers the opcode families nvdisasm prints for sm_70..sm_120 (LD/ST by space, atomics
and reductions, LDGSTS, LDSM/STSM, the mbarrier SYNCS ops, constant loads). Tensor-memory and
TMA/bulk-copy ops take their address from a descriptor or tensor memory, which the dump does not
tie to a lane's registers: they are listed with ``undecoded`` saying so, never given an address.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from .opcode import opcode as parsed_opcode

AccessKind = Literal["load", "store", "atomic", "prefetch"]
Space = Literal["shared", "global", "local", "generic", "constant", "unknown"]

NOT_DECODED = "address in a descriptor: not decoded"
_DEFAULT_BYTES = 4

#: opcode family -> kind, space, bytes when no modifier says
_FAMILIES: dict[str, tuple[AccessKind, Space, int | None]] = {
    "LD": ("load", "generic", _DEFAULT_BYTES),
    "ST": ("store", "generic", _DEFAULT_BYTES),
    "LDG": ("load", "global", _DEFAULT_BYTES),
    "STG": ("store", "global", _DEFAULT_BYTES),
    "LDS": ("load", "shared", _DEFAULT_BYTES),
    "STS": ("store", "shared", _DEFAULT_BYTES),
    "LDL": ("load", "local", _DEFAULT_BYTES),
    "STL": ("store", "local", _DEFAULT_BYTES),
    "LDC": ("load", "constant", _DEFAULT_BYTES),
    "ULDC": ("load", "constant", _DEFAULT_BYTES),
    "LDCU": ("load", "constant", _DEFAULT_BYTES),
    "ATOM": ("atomic", "generic", _DEFAULT_BYTES),
    "ATOMG": ("atomic", "global", _DEFAULT_BYTES),
    "ATOMS": ("atomic", "shared", _DEFAULT_BYTES),
    "RED": ("atomic", "generic", _DEFAULT_BYTES),
    "REDG": ("atomic", "global", _DEFAULT_BYTES),
    # LDGSTS copies global to shared; the global read is the access that can fault first
    "LDGSTS": ("load", "global", _DEFAULT_BYTES),
    # LDSM/STSM: each lane names one 16-byte row of an 8x8 matrix of 16-bit elements
    "LDSM": ("load", "shared", 16),
    "STSM": ("store", "shared", 16),
    # mbarrier operations: 64-bit atomics on a shared word
    "SYNCS": ("atomic", "shared", 8),
    "CCTL": ("prefetch", "generic", None),
}

#: ops whose address lives in a descriptor (TMA, bulk copy, surfaces) or tensor memory
_DESCRIPTOR_FAMILIES: dict[str, AccessKind] = {
    "UTMALDG": "load", "UTMASTG": "store", "UTMAREDG": "atomic", "UTMAPF": "prefetch",
    "UBLKCP": "load", "UBLKRED": "atomic", "UBLKPF": "prefetch",
    "LDTM": "load", "STTM": "store",
    "SULD": "load", "SUST": "store", "SUATOM": "atomic", "SURED": "atomic",
}

#: a modifier giving the size of each lane's access
_SIZES = {
    "U8": 1, "S8": 1, "U16": 2, "S16": 2, "F16": 2, "BF16": 2,
    "32": 4, "U32": 4, "S32": 4, "F32": 4, "B32": 4, "F16x2": 4, "BF16x2": 4, "F16X2": 4, "BF16X2": 4,
    "64": 8, "U64": 8, "S64": 8, "F64": 8, "B64": 8,
    "128": 16, "B128": 16,
}


@dataclass(frozen=True)
class MemoryAccess:
    kind: AccessKind
    space: Space
    #: bytes each lane reads or writes; None where the opcode does not say
    bytes: int | None
    #: why no address is decoded for this opcode (TMA, tensor memory), else None
    undecoded: str | None = None


def _size(modifiers: tuple[str, ...], default: int | None) -> int | None:
    sizes = [_SIZES[m] for m in modifiers if m in _SIZES]
    return max(sizes) if sizes else default


@lru_cache(maxsize=4096)
def memory_access(opcode: str) -> MemoryAccess | None:
    """How ``opcode`` (``LDG.E.64``, ``ATOMS.POPC.INC.32``, ``UTMALDG.2D``) touches memory, None
    for an opcode that does not."""
    op = parsed_opcode(opcode)
    family, modifiers = op.family, op.modifiers
    if family in _DESCRIPTOR_FAMILIES:
        return MemoryAccess(_DESCRIPTOR_FAMILIES[family], "unknown", None, NOT_DECODED)
    known = _FAMILIES.get(family)
    if known is None:
        return None
    kind, space, default = known
    if family == "CCTL" and not {"PF1", "PF2", "PF1_5", "PF2_5"} & set(modifiers):
        return None  # cache invalidation (CCTL.IVALL, .IV): no lane address is accessed
    return MemoryAccess(kind, space, _size(modifiers, default))


@dataclass(frozen=True)
class Side:
    """One memory operand of an instruction (``position`` counts the memory operands in the order
    nvdisasm prints them) and what the instruction does through it."""

    position: int
    access: MemoryAccess
    #: the address is a 64-bit pair even where the operand names one register: the global side
    #: of a bulk copy, ``[UR4]`` holding UR4:UR5
    wide: bool = False


def _descriptor_side(position: int, kind: AccessKind) -> Side:
    return Side(position, MemoryAccess(kind, "unknown", None, NOT_DECODED))


def _bulk_sides(modifiers: tuple[str, ...], global_kind: AccessKind) -> list[Side]:
    """UBLKCP/UBLKRED name the destination's space, then the source's (``.S.G``: global to
    shared, ``.G.S``: shared to global, as nvcc 13.0 writes them); the byte count is a register."""
    spaces = [m for m in modifiers if m in ("S", "G")][:2]
    if len(spaces) != 2 or spaces[0] == spaces[1]:
        return [_descriptor_side(0, global_kind)]
    sides = []
    for position, (space, role) in enumerate(zip(spaces, ("destination", "source"), strict=True)):
        kind: AccessKind = (global_kind if role == "destination" else "load") if space == "G" else (
            "store" if role == "destination" else "load")
        sides.append(Side(position, MemoryAccess(kind, "global" if space == "G" else "shared", None),
                          wide=space == "G"))
    return sides


def memory_sides(opcode: str) -> list[Side]:
    """Every memory operand ``opcode`` reads or writes through, in operand order: one for most
    ops; two for a copy between spaces (LDGSTS: the shared destination, then the global source;
    a bulk copy; a TMA op: the shared side, then the tensor map whose address is a descriptor).
    Empty for an opcode that touches no memory."""
    op = parsed_opcode(opcode)
    family, modifiers = op.family, op.modifiers
    if family == "LDGSTS":
        size = _size(modifiers, _DEFAULT_BYTES)
        return [Side(0, MemoryAccess("store", "shared", size)),
                Side(1, MemoryAccess("load", "global", size))]
    if family == "UBLKCP":
        return _bulk_sides(modifiers, "store")
    if family == "UBLKRED":
        return _bulk_sides(modifiers, "atomic")
    if family in ("UTMALDG", "UTMASTG", "UTMAREDG"):
        shared_kind: AccessKind = "store" if family == "UTMALDG" else "load"
        return [Side(0, MemoryAccess(shared_kind, "shared", None)),
                _descriptor_side(1, _DESCRIPTOR_FAMILIES[family])]
    access = memory_access(opcode)
    return [] if access is None else [Side(0, access)]
