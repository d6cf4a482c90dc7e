"""The launch ABI as the slice reads it: where constant bank 0 holds the launch dimensions, the
stack's top and the kernel's parameters on each architecture, which special registers name a
lane's coordinates, and the values a dump gives them for one lane.
"""

from __future__ import annotations

from dataclasses import dataclass

_LAUNCH_SLOTS = {0x0: "blockDim.x", 0x4: "blockDim.y", 0x8: "blockDim.z",
                 0xC: "gridDim.x", 0x10: "gridDim.y", 0x14: "gridDim.z"}
#: c[0x0][0x28]: the stack's top, where R1 starts (LDC R1, c[0x0][0x28] opens every kernel)
STACK_SLOT = 0x28
#: Where the parameters start in bank 0 on sm_100 and later (0x380): there the launch slots
#: sit just below them, blockDim at 0x360..0x368, gridDim at 0x370..0x378 and the stack top at
#: 0x37c, as nvcc 13.0's sm_100 SASS reads them (LDC R1, c[0x0][0x37c] opens each kernel)
_BLACKWELL_PARAMS = 0x380
_BLACKWELL_SLOTS = {0x360: "blockDim.x", 0x364: "blockDim.y", 0x368: "blockDim.z",
                    0x370: "gridDim.x", 0x374: "gridDim.y", 0x378: "gridDim.z"}
_BLACKWELL_STACK = 0x37C


def launch_slots(cbank_offset: int | None) -> tuple[dict[int, str], int]:
    """(launch slots by their bank-0 offset, offset of the stack top), by where the parameters
    start: the launch slots moved from the bank's start to below the parameters on sm_100."""
    if cbank_offset is not None and cbank_offset >= _BLACKWELL_PARAMS:
        moved = cbank_offset - _BLACKWELL_PARAMS
        return {offset + moved: name for offset, name in _BLACKWELL_SLOTS.items()}, \
            _BLACKWELL_STACK + moved
    return _LAUNCH_SLOTS, STACK_SLOT


SPECIALS = {"SR_TID.X": "threadIdx.x", "SR_TID.Y": "threadIdx.y", "SR_TID.Z": "threadIdx.z",
             "SR_CTAID.X": "blockIdx.x", "SR_CTAID.Y": "blockIdx.y", "SR_CTAID.Z": "blockIdx.z",
             "SR_CgaCtaId": "ctaRank", "SR_LANEID": "laneId"}


@dataclass(frozen=True)
class Launch:
    """The coordinates the dump records for the faulting lane, by special-register name."""

    specials: dict[str, int]
    #: blockDim and gridDim by name ("blockDim.x"), read from the grid row: what bank 0's launch
    #: slots hold, wherever the architecture puts them (launch_slots)
    dimensions: dict[str, int]


def cluster_rank(block_idx: tuple[int, int, int], shape: tuple[int, int, int]) -> int | None:
    """A block's rank in its cluster (SR_CgaCtaId: what bits 24+ of a shared address carry),
    from its index and the cluster's shape ((1,1,1) without clusters); None for a shape with a
    zero in it."""
    if not all(shape):
        return None
    x, y, z = (index % size for index, size in zip(block_idx, shape, strict=True))
    return x + y * shape[0] + z * shape[0] * shape[1]


def launch_dimensions(block_dim: tuple[int, int, int] | None,
                      grid_dim: tuple[int, int, int] | None) -> dict[str, int]:
    """Launch.dimensions from a grid's block and grid shapes (either may be unknown)."""
    named = {}
    for kind, shape in (("blockDim", block_dim), ("gridDim", grid_dim)):
        if shape is not None:
            named.update({f"{kind}.{axis}": value
                          for axis, value in zip("xyz", shape, strict=True)})
    return named


@dataclass(frozen=True)
class ParamSource:
    """The parameter area: its offset in constant bank 0, the dump's bytes of it, and each
    parameter's (ordinal, offset, size, type)."""

    cbank_offset: int | None
    data: bytes | None
    params: tuple[tuple[int, int, int, str | None], ...]
