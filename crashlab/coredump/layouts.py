"""Row layouts of the coredump tables, declared as data.

Each driver generation appended fields to the rows, and a table's sh_entsize says which
generation wrote it. A field therefore exists only where ``offset + size <= entsize``; bytes past
the last known field are ignored, so a newer driver's longer rows still decode. Offsets are those
of shared/reference/cuda-coredump.md section 1.5 (from cudacoredump.h).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .constants import SectionType


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    offset: int
    #: struct code: "I" (u32) or "Q" (u64)
    code: str
    #: the driver release that appended the field ("r346" is the original format)
    since: str = "r346"
    #: the value is an offset into .strtab
    string: bool = False

    @property
    def end(self) -> int:
        return self.offset + struct.calcsize("<" + self.code)


@dataclass(frozen=True, slots=True)
class RowLayout:
    table: str
    fields: tuple[Field, ...]
    #: every row size a known driver generation wrote, oldest first
    generations: tuple[int, ...]
    by_name: dict[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})

    @property
    def min_size(self) -> int:
        return self.generations[0]

    def present(self, entsize: int) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.end <= entsize)


@dataclass(frozen=True, slots=True)
class RowDecoder:
    """A compiled reader for one (layout, entsize) pair."""

    layout: RowLayout
    entsize: int
    names: tuple[str, ...]
    string_names: tuple[str, ...]
    packer: struct.Struct

    def decode(self, buffer, offset: int = 0) -> dict[str, int]:
        return dict(zip(self.names, self.packer.unpack_from(buffer, offset)))

    def decode_all(self, buffer) -> list[dict[str, int]]:
        names = self.names
        return [dict(zip(names, values)) for values in self.packer.iter_unpack(buffer)]


_DECODERS: dict[tuple[str, int], RowDecoder] = {}


def decoder(layout: RowLayout, entsize: int) -> RowDecoder:
    """The compiled reader for ``layout`` at ``entsize``, built once per pair."""
    key = (layout.table, entsize)
    found = _DECODERS.get(key)
    if found is None:
        found = _DECODERS[key] = _compile(layout, entsize)
    return found


def _compile(layout: RowLayout, entsize: int) -> RowDecoder:
    fields = sorted(layout.present(entsize), key=lambda f: f.offset)
    fmt, cursor = ["<"], 0
    for f in fields:
        fmt.append(f"{f.offset - cursor}x{f.code}")
        cursor = f.end
    fmt.append(f"{entsize - cursor}x")
    return RowDecoder(
        layout=layout,
        entsize=entsize,
        names=tuple(f.name for f in fields),
        string_names=tuple(f.name for f in fields if f.string),
        packer=struct.Struct("".join(fmt)),
    )


def _u32(name, offset, since="r346"):
    return Field(name, offset, "I", since)


def _u64(name, offset, since="r346", string=False):
    return Field(name, offset, "Q", since, string)


DEVICE = RowLayout(
    "device",
    (
        _u64("name", 0, string=True),
        _u64("type", 8, string=True),
        _u64("sm_type", 16, string=True),
        _u32("dev_id", 24),
        _u32("pci_bus_id", 28),
        _u32("pci_dev_id", 32),
        _u32("num_sms", 36),
        _u32("num_warps_per_sm", 40),
        _u32("num_lanes_per_warp", 44),
        _u32("num_regs_per_lane", 48),
        _u32("num_predicates_per_lane", 52),
        _u32("sm_major", 56),
        _u32("sm_minor", 60),
        _u32("instruction_size", 64),
        _u32("status", 68),
        _u32("num_uniform_regs_per_warp", 72, "r400"),
        _u32("num_uniform_predicates_per_warp", 76, "r400"),
        _u32("num_convergence_barriers_per_warp", 80, "r575"),
    ),
    (72, 80, 88),
)

CONTEXT = RowLayout(
    "context",
    (
        _u64("context_id", 0),
        _u64("shared_window_base", 8),
        _u64("local_window_base", 16),
        _u64("global_window_base", 24),
        _u32("device_idx", 32),
        _u32("tid", 36),
    ),
    (40,),
)

MODULE = RowLayout("module", (_u64("module_handle", 0),), (8,))

GRID = RowLayout(
    "grid",
    (
        _u64("grid_id", 0),
        _u64("context_id", 8),
        _u64("function", 16, string=True),
        _u64("function_entry", 24),
        _u64("module_handle", 32),
        _u64("parent_grid_id", 40),
        _u64("params_offset", 48),
        _u32("kernel_type", 56),
        _u32("origin", 60),
        _u32("grid_status", 64),
        _u32("num_regs", 68),
        _u32("grid_dim_x", 72),
        _u32("grid_dim_y", 76),
        _u32("grid_dim_z", 80),
        _u32("block_dim_x", 84),
        _u32("block_dim_y", 88),
        _u32("block_dim_z", 92),
        _u32("attr_launch_blocking", 96),
        _u32("attr_host_tid", 100),
        _u32("cluster_dim_x", 104, "r525"),
        _u32("cluster_dim_y", 108, "r525"),
        _u32("cluster_dim_z", 112, "r525"),
        _u32("preferred_cluster_dim_x", 120, "r565"),
        _u32("preferred_cluster_dim_y", 124, "r565"),
        _u32("preferred_cluster_dim_z", 128, "r565"),
    ),
    (104, 120, 136),
)

CONST_BANK = RowLayout(
    "const_bank", (_u64("address", 0), _u32("size", 8), _u32("bank_id", 12)), (16,)
)

SM = RowLayout(
    "sm",
    (
        _u32("sm_id", 0),
        _u32("exception", 8, "r555"),
        _u32("error_pc_valid", 12, "r555"),
        _u64("error_pc", 16, "r555"),
        _u32("cluster_target_block_valid", 24, "r565"),
        _u32("cluster_target_block_x", 28, "r565"),
        _u32("cluster_target_block_y", 32, "r565"),
        _u32("cluster_target_block_z", 36, "r565"),
        _u64("exception_string", 40, "r580", string=True),
    ),
    (8, 24, 40, 48),
)

CTA = RowLayout(
    "cta",
    (
        _u64("grid_id", 0),
        _u32("block_idx_x", 8),
        _u32("block_idx_y", 12),
        _u32("block_idx_z", 16),
        _u32("cluster_idx_x", 24, "r525"),
        _u32("cluster_idx_y", 28, "r525"),
        _u32("cluster_idx_z", 32, "r525"),
        _u32("cluster_dim_x", 40, "r565"),
        _u32("cluster_dim_y", 44, "r565"),
        _u32("cluster_dim_z", 48, "r565"),
    ),
    (24, 40, 56),
)

WARP = RowLayout(
    "warp",
    (
        _u64("error_pc", 0),
        _u32("warp_id", 8),
        _u32("valid_lanes_mask", 12),
        _u32("active_lanes_mask", 16),
        _u32("is_warp_broken", 20),
        _u32("error_pc_valid", 24),
        _u32("num_regs", 32, "r525"),
        _u32("shared_mem_size", 40, "r570"),
        _u32("in_syscall_lanes_mask", 48, "r575"),
        _u32("cbu_active_lanes_mask", 52, "r575"),
        _u32("cbu_exited_lanes_mask", 56, "r575"),
        _u32("cbu_collective_lanes_mask", 60, "r575"),
        _u32("barrier_scope", 64, "r590"),
        _u64("additional_barrier_info", 72, "r590"),
    ),
    (32, 40, 48, 64, 80),
)

LANE = RowLayout(
    "lane",
    (
        _u64("virtual_pc", 0),
        _u64("phys_pc", 8),
        _u32("ln", 16),
        _u32("thread_idx_x", 20),
        _u32("thread_idx_y", 24),
        _u32("thread_idx_z", 28),
        _u32("exception", 32),
        _u32("call_depth", 36),
        _u32("syscall_call_depth", 40),
        _u32("cc_register", 44),
        _u32("cbu_thread_state", 48, "r575"),
        _u32("rpc_lo", 56, "r615"),
        _u32("rpc_hi", 60, "r615"),
    ),
    (48, 56, 64),
)

BACKTRACE = RowLayout(
    "backtrace",
    (_u64("return_address", 0), _u64("virtual_return_address", 8), _u32("level", 16)),
    (24,),
)

METADATA = RowLayout(
    "metadata",
    (
        _u64("generator", 0, "r565", string=True),
        _u32("driver_version_major", 8, "r565"),
        _u32("driver_version_minor", 12, "r565"),
        _u32("cuda_version_major", 16, "r565"),
        _u32("cuda_version_minor", 20, "r565"),
        _u32("flags", 24, "r565"),
        _u32("timestamp", 28, "r565"),
    ),
    (32,),
)

#: The tables whose rows are records (as opposed to arrays of registers or raw memory).
TABLE_LAYOUTS: dict[SectionType, RowLayout] = {
    SectionType.DEV_TABLE: DEVICE,
    SectionType.CTX_TABLE: CONTEXT,
    SectionType.MOD_TABLE: MODULE,
    SectionType.GRID_TABLE: GRID,
    SectionType.CB_TABLE: CONST_BANK,
    SectionType.SM_TABLE: SM,
    SectionType.CTA_TABLE: CTA,
    SectionType.WP_TABLE: WARP,
    SectionType.LN_TABLE: LANE,
    SectionType.BT: BACKTRACE,
    SectionType.META_DATA: METADATA,
}
