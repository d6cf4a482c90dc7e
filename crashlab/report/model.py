"""TriageReport: the one versioned object every crashlab path ends in.

The JSON form is the contract of DESIGN.md (``schema_version: 1``): fields may be added, none of
the listed ones renamed. Terminal and Markdown views are renderings of this same object, never of
the reader's internals. Addresses are hex strings so that JSON consumers lose no bits.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
Dim3 = tuple[int, int, int]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tool(_Model):
    name: str = "crashlab"
    version: str


class Source(_Model):
    path: str
    size_bytes: int
    kind: Literal["cuda-coredump", "run"] | str
    compressed: bool = False


class Dump(_Model):
    abi_version: int
    driver_version: str | None = None
    cuda_version: str | None = None
    generator: str | None = None
    generation_flags: list[str] = Field(default_factory=list)
    timestamp: int | None = None
    section_count: int
    memory_sections: int = 0
    memory_bytes: int = Field(0, description="bytes of memory sections, listed but not read")


class Device(_Model):
    index: int = Field(description="devId, as cuda-gdb numbers devices")
    name: str
    sm_type: str
    num_sms: int
    warps_per_sm: int
    lanes_per_warp: int
    regs_per_lane: int


class WarpPosition(_Model):
    pc: str | None
    function_offset: int | None = None
    warps: int


class Kernel(_Model):
    device: int
    grid_id: int
    name: str
    mangled: str
    grid_dim: Dim3
    block_dim: Dim3
    cluster_dim: Dim3 | None = None
    status: int
    resident_sms: int = 0
    resident_blocks: int = 0
    resident_warps: int = 0
    warps_at: list[WarpPosition] = Field(
        default_factory=list, description="where the resident warps stand, most warps first"
    )


class ExceptionInfo(_Model):
    code: int = Field(description="CUDBG exception code, the driver's numbering")
    name: str = Field(description="CUDBG_EXCEPTION_* name")
    display: str = Field(description="the text cuda-gdb prints")
    display_from_cuda_gdb: bool = Field(
        True, description="false where cuda-gdb has no text for this code and crashlab made one")
    cuda_gdb_signal: str | None = Field(None, description="cuda-gdb's CUDA_EXCEPTION_n")
    scope: str
    known: bool = True


class KernelRef(_Model):
    name: str
    mangled: str


class SourceLine(_Model):
    file: str
    line: int


class SassInstruction(_Model):
    address: str
    text: str
    faulting: bool
    current: bool = False
    source: list[SourceLine] = Field(default_factory=list)


class Sass(_Model):
    instructions: list[SassInstruction] = Field(default_factory=list)
    source: list[SourceLine] = Field(
        default_factory=list, description="inline chain of the faulting instruction, innermost first"
    )
    section: str | None = None
    tool: str | None = None
    unavailable_reason: str | None = None


class Range(_Model):
    first: Dim3
    last: Dim3
    count: int


class Frame(_Model):
    level: int
    pc: str
    function: str | None = None
    function_offset: int | None = None


class Params(_Model):
    address: str
    size: int
    hex: str = Field(description="the parameter buffer's bytes (at most 32 KiB)")


class ConstBank(_Model):
    bank: int
    address: str
    size: int


class Fault(_Model):
    exception: ExceptionInfo
    device: int
    device_name: str
    sm_type: str
    sm: int
    warp: int | None
    lane: int | None
    grid_id: int | None
    kernel: KernelRef | None
    kernel_inferred: bool = Field(False, description="kernel deduced from the PC, not a block")
    function: str | None = Field(None, description="the function holding the PC (may be a device function)")
    block_idx: Dim3 | None
    thread_idx: Dim3 | None
    cluster_idx: Dim3 | None = None
    grid_dim: Dim3 | None = None
    block_dim: Dim3 | None = None
    cluster_dim: Dim3 | None = None
    cluster_target_block: Dim3 | None = None
    pc: str | None
    pc_source: str
    current_pc: str | None = Field(None, description="the shown lane's PC when the dump was taken")
    function_offset: int | None
    faulting_lanes: int
    faulting_warps: int
    blocks: Range | None = None
    threads: Range | None = None
    reported_by_sm: bool = False
    notes: list[str] = Field(default_factory=list)
    registers: dict[str, int] | None = None
    predicates: dict[str, bool] | None = None
    uniform_registers: dict[str, int] | None = None
    uniform_predicates: dict[str, bool] | None = None
    backtrace: list[Frame] = Field(default_factory=list)
    params: Params | None = None
    const_banks: list[ConstBank] = Field(default_factory=list)
    sass: Sass = Field(default_factory=Sass)


class TriageReport(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    tool: Tool
    status: Literal["fault", "no-exception"]
    summary: str
    source: Source
    dump: Dump
    devices: list[Device]
    kernels: list[Kernel]
    faults: list[Fault] = Field(description="most relevant first")
    omitted_faults: int = 0
    warnings: list[str] = Field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.faults)


def json_schema() -> dict:
    return TriageReport.model_json_schema()
