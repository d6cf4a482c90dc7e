"""Typed records of a coredump, one class per table row.

Field names are those of crashlab.coredump.layouts, so a row decodes straight into its record;
fields a generation of the format did not have are None. Every record keeps the section and row
it came from, and a reference to its parent, so that a fault can be traced back to the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

Dim3 = tuple[int, int, int]


def _dim(x, y, z) -> Dim3 | None:
    return None if x is None else (x, y, z)


@dataclass(slots=True, eq=False)
class Device:
    section: int
    row: int
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


@dataclass(slots=True, eq=False)
class Context:
    section: int
    row: int
    device: Device
    context_id: int
    shared_window_base: int
    local_window_base: int
    global_window_base: int
    device_idx: int
    tid: int


@dataclass(slots=True, eq=False)
class Module:
    section: int
    row: int
    context: Context
    module_handle: int


@dataclass(slots=True, eq=False)
class Grid:
    section: int
    row: int
    device: Device
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

    @property
    def grid_dim(self) -> Dim3:
        return (self.grid_dim_x, self.grid_dim_y, self.grid_dim_z)

    @property
    def block_dim(self) -> Dim3:
        return (self.block_dim_x, self.block_dim_y, self.block_dim_z)

    @property
    def cluster_dim(self) -> Dim3 | None:
        return _dim(self.cluster_dim_x, self.cluster_dim_y, self.cluster_dim_z)


@dataclass(slots=True, eq=False)
class ConstBank:
    section: int
    row: int
    address: int
    size: int
    bank_id: int


@dataclass(slots=True, eq=False)
class SM:
    section: int
    row: int
    device: Device
    sm_id: int
    exception: int | None = None
    error_pc_valid: int | None = None
    error_pc: int | None = None
    cluster_target_block_valid: int | None = None
    cluster_target_block_x: int | None = None
    cluster_target_block_y: int | None = None
    cluster_target_block_z: int | None = None
    exception_string: str | None = None

    @property
    def valid_error_pc(self) -> int | None:
        return self.error_pc if self.error_pc_valid else None


@dataclass(slots=True, eq=False)
class CTA:
    section: int
    row: int
    sm: SM
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

    @property
    def block_idx(self) -> Dim3:
        return (self.block_idx_x, self.block_idx_y, self.block_idx_z)

    @property
    def cluster_idx(self) -> Dim3 | None:
        return _dim(self.cluster_idx_x, self.cluster_idx_y, self.cluster_idx_z)

    @property
    def cluster_dim(self) -> Dim3 | None:
        return _dim(self.cluster_dim_x, self.cluster_dim_y, self.cluster_dim_z)


@dataclass(slots=True, eq=False)
class Warp:
    section: int
    row: int
    cta: CTA
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

    @property
    def valid_error_pc(self) -> int | None:
        return self.error_pc if self.error_pc_valid else None


@dataclass(slots=True, eq=False)
class Lane:
    section: int
    row: int
    warp: Warp
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

    @property
    def thread_idx(self) -> Dim3:
        return (self.thread_idx_x, self.thread_idx_y, self.thread_idx_z)


@dataclass(slots=True, eq=False)
class BacktraceFrame:
    section: int
    row: int
    return_address: int
    virtual_return_address: int
    level: int


@dataclass(slots=True, eq=False)
class Metadata:
    section: int
    row: int
    generator: str | None = None
    driver_version_major: int | None = None
    driver_version_minor: int | None = None
    cuda_version_major: int | None = None
    cuda_version_minor: int | None = None
    flags: int | None = None
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class MemoryRegion:
    """A memory section, described but not read."""

    section: int
    kind: str
    address: int
    size: int


@dataclass(frozen=True, slots=True)
class ParamBlock:
    address: int
    size: int
    data: bytes
