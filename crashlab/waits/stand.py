"""Where each resident warp of a dump stands: its block, its warp row, the lane that speaks for it.

A hang dump is read per block, not per PC: a barrier after an early return shows as a block whose
warp table lists fewer warps than its launch has (the others exited), so the walk keeps each
warp with its CTA. Only the lane that stands for a warp is decoded (crashlab.coredump's bulk lane
scan); registers are read later, for one sample warp per PC.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..coredump.core import CoreDump
from ..coredump.model import CTA, Grid, Lane, Warp

LANES_PER_WARP = 32


@dataclass(frozen=True, slots=True)
class WarpAt:
    cta: CTA
    warp: Warp
    head: Lane | None

    @property
    def pc(self) -> int | None:
        return self.head.virtual_pc if self.head else None


@dataclass
class GridWarps:
    """One launch's resident warps, block by block."""

    grid: Grid
    blocks: list[list[WarpAt]] = field(default_factory=list)

    @property
    def warps(self) -> list[WarpAt]:
        return [w for block in self.blocks for w in block]

    @property
    def warps_per_block(self) -> int:
        threads = self.grid.block_dim_x * self.grid.block_dim_y * self.grid.block_dim_z
        return -(-threads // LANES_PER_WARP)


def resident_warps(core: CoreDump) -> list[GridWarps]:
    """Every launch with resident warps, in device and grid-table order."""
    found: dict[tuple[int, int], GridWarps] = {}
    for device in core.devices:
        grids = {grid.grid_id: grid for grid in core.grids(device)}
        for sm in core.sms(device):
            for cta in core.ctas(sm):
                grid = grids.get(cta.grid_id)
                if grid is None:
                    continue  # the fault stage warns about a block naming no known grid
                warps = [WarpAt(cta, warp, core.scan_lanes(warp).head) for warp in core.warps(cta)]
                if warps:
                    found.setdefault((device.row, grid.grid_id), GridWarps(grid)).blocks.append(warps)
    return list(found.values())


def expected_lanes(at: WarpAt, grid: Grid) -> int | None:
    """How many lanes the launch gives this warp (the last warp of a block may be partial),
    from the linear thread index of its speaking lane; None where no lane speaks."""
    if at.head is None:
        return None
    x, y, z = at.head.thread_idx
    linear = x + grid.block_dim_x * (y + grid.block_dim_y * z)
    threads = grid.block_dim_x * grid.block_dim_y * grid.block_dim_z
    first = linear - linear % LANES_PER_WARP
    return max(0, min(LANES_PER_WARP, threads - first))
