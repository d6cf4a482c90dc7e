"""Typed records of a coredump, one class per table row.

A record's fields are its table's layout in crashlab.coredump.layouts, so that a row decodes
straight into its record; a field that rows of the oldest generation lack is None where the row
does not have it. Every record also keeps the section and row it came from, and a reference to
its parent, so that a fault can be traced back to the bytes.

The layout's fields are written out here (between marker comments, by ``python -m
tests.declare_records``, which tests/test_layouts.py holds this file to) rather than made at
import time, so that a type checker sees every field a record has.
"""

from __future__ import annotations

import dataclasses

Dim3 = tuple[int, int, int]


def _dim(x, y, z) -> Dim3 | None:
    return None if x is None else (x, y, z)


@dataclasses.dataclass(slots=True, eq=False)
class Device:
    """A row of the device table (.cudbg.devtbl): one GPU."""

    section: int
    row: int
    # -- fields of layouts.DEVICE: written by `python -m tests.declare_records`
    name: str
    type: str
    sm_type: str
    dev_id: int
    pci_bus_id: int
    pci_dev_id: int
    num_sms: int
    num_warps_per_sm: int
    num_lanes_per_warp: int
    num_regs_per_lane: int
    num_predicates_per_lane: int
    sm_major: int
    sm_minor: int
    instruction_size: int
    status: int
    num_uniform_regs_per_warp: int | None = None
    num_uniform_predicates_per_warp: int | None = None
    num_convergence_barriers_per_warp: int | None = None
    # -- end of layouts.DEVICE


@dataclasses.dataclass(slots=True, eq=False)
class Context:
    """A row of a device's context table."""

    section: int
    row: int
    device: Device
    # -- fields of layouts.CONTEXT: written by `python -m tests.declare_records`
    context_id: int
    shared_window_base: int
    local_window_base: int
    global_window_base: int
    device_idx: int
    tid: int
    # -- end of layouts.CONTEXT


@dataclasses.dataclass(slots=True, eq=False)
class Module:
    """A row of a context's module table: one loaded cubin."""

    section: int
    row: int
    context: Context
    # -- fields of layouts.MODULE: written by `python -m tests.declare_records`
    module_handle: int
    # -- end of layouts.MODULE


@dataclasses.dataclass(slots=True, eq=False)
class Grid:
    """A row of a device's grid table: one kernel launch."""

    section: int
    row: int
    device: Device
    # -- fields of layouts.GRID: written by `python -m tests.declare_records`
    grid_id: int
    context_id: int
    function: str
    function_entry: int
    module_handle: int
    parent_grid_id: int
    params_offset: int
    kernel_type: int
    origin: int
    grid_status: int
    num_regs: int
    grid_dim_x: int
    grid_dim_y: int
    grid_dim_z: int
    block_dim_x: int
    block_dim_y: int
    block_dim_z: int
    attr_launch_blocking: int
    attr_host_tid: int
    cluster_dim_x: int | None = None
    cluster_dim_y: int | None = None
    cluster_dim_z: int | None = None
    preferred_cluster_dim_x: int | None = None
    preferred_cluster_dim_y: int | None = None
    preferred_cluster_dim_z: int | None = None
    # -- end of layouts.GRID

    @property
    def grid_dim(self) -> Dim3:
        return (self.grid_dim_x, self.grid_dim_y, self.grid_dim_z)

    @property
    def block_dim(self) -> Dim3:
        return (self.block_dim_x, self.block_dim_y, self.block_dim_z)

    @property
    def cluster_dim(self) -> Dim3 | None:
        return _dim(self.cluster_dim_x, self.cluster_dim_y, self.cluster_dim_z)


@dataclasses.dataclass(slots=True, eq=False)
class ConstBank:
    """A row of a grid's constant bank table."""

    section: int
    row: int
    # -- fields of layouts.CONST_BANK: written by `python -m tests.declare_records`
    address: int
    size: int
    bank_id: int
    # -- end of layouts.CONST_BANK


@dataclasses.dataclass(slots=True, eq=False)
class SM:
    """A row of a device's SM table."""

    section: int
    row: int
    device: Device
    # -- fields of layouts.SM: written by `python -m tests.declare_records`
    sm_id: int
    exception: int | None = None
    error_pc_valid: int | None = None
    error_pc: int | None = None
    cluster_target_block_valid: int | None = None
    cluster_target_block_x: int | None = None
    cluster_target_block_y: int | None = None
    cluster_target_block_z: int | None = None
    exception_string: str | None = None
    # -- end of layouts.SM

    @property
    def valid_error_pc(self) -> int | None:
        return self.error_pc if self.error_pc_valid else None


@dataclasses.dataclass(slots=True, eq=False)
class CTA:
    """A row of an SM's CTA table: one thread block."""

    section: int
    row: int
    sm: SM
    # -- fields of layouts.CTA: written by `python -m tests.declare_records`
    grid_id: int
    block_idx_x: int
    block_idx_y: int
    block_idx_z: int
    cluster_idx_x: int | None = None
    cluster_idx_y: int | None = None
    cluster_idx_z: int | None = None
    cluster_dim_x: int | None = None
    cluster_dim_y: int | None = None
    cluster_dim_z: int | None = None
    # -- end of layouts.CTA

    @property
    def block_idx(self) -> Dim3:
        return (self.block_idx_x, self.block_idx_y, self.block_idx_z)

    @property
    def cluster_idx(self) -> Dim3 | None:
        return _dim(self.cluster_idx_x, self.cluster_idx_y, self.cluster_idx_z)

    @property
    def cluster_dim(self) -> Dim3 | None:
        return _dim(self.cluster_dim_x, self.cluster_dim_y, self.cluster_dim_z)


@dataclasses.dataclass(slots=True, eq=False)
class Warp:
    """A row of a CTA's warp table."""

    section: int
    row: int
    cta: CTA
    # -- fields of layouts.WARP: written by `python -m tests.declare_records`
    error_pc: int
    warp_id: int
    valid_lanes_mask: int
    active_lanes_mask: int
    is_warp_broken: int
    error_pc_valid: int
    num_regs: int | None = None
    shared_mem_size: int | None = None
    in_syscall_lanes_mask: int | None = None
    cbu_active_lanes_mask: int | None = None
    cbu_exited_lanes_mask: int | None = None
    cbu_collective_lanes_mask: int | None = None
    barrier_scope: int | None = None
    additional_barrier_info: int | None = None
    # -- end of layouts.WARP

    @property
    def valid_error_pc(self) -> int | None:
        return self.error_pc if self.error_pc_valid else None


@dataclasses.dataclass(slots=True, eq=False)
class Lane:
    """A row of a warp's lane table: one thread."""

    section: int
    row: int
    warp: Warp
    # -- fields of layouts.LANE: written by `python -m tests.declare_records`
    virtual_pc: int
    phys_pc: int
    ln: int
    thread_idx_x: int
    thread_idx_y: int
    thread_idx_z: int
    exception: int
    call_depth: int
    syscall_call_depth: int
    cc_register: int
    cbu_thread_state: int | None = None
    rpc_lo: int | None = None
    rpc_hi: int | None = None
    # -- end of layouts.LANE

    @property
    def thread_idx(self) -> Dim3:
        return (self.thread_idx_x, self.thread_idx_y, self.thread_idx_z)


@dataclasses.dataclass(slots=True, eq=False)
class BacktraceFrame:
    """A row of a lane's backtrace."""

    section: int
    row: int
    # -- fields of layouts.BACKTRACE: written by `python -m tests.declare_records`
    return_address: int
    virtual_return_address: int
    level: int
    # -- end of layouts.BACKTRACE


@dataclasses.dataclass(slots=True, eq=False)
class Metadata:
    """The row of the metadata section (.cudbg.meta): what wrote the dump, and how."""

    section: int
    row: int
    # -- fields of layouts.METADATA: written by `python -m tests.declare_records`
    generator: str
    driver_version_major: int
    driver_version_minor: int
    cuda_version_major: int
    cuda_version_minor: int
    flags: int
    timestamp: int
    # -- end of layouts.METADATA


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryRegion:
    """A memory section, described but not read."""

    section: int
    kind: str
    address: int
    size: int


@dataclasses.dataclass(frozen=True, slots=True)
class ParamBlock:
    address: int
    size: int
    data: bytes
