"""TriageReport: the one versioned object every crashlab path ends in.

The JSON form is a contract (``schema_version: 1``; crashlab/report/schema.py publishes it and
says what stays stable): fields may be added, none renamed. Terminal and Markdown views are
renderings of this same object, never of the reader's internals. Addresses are hex strings so
that JSON consumers lose no bits. Sets of named values are Literal types, so that crashlab's own
code cannot write a value the set lacks.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..coredump.exceptions import ExceptionScope
from ..coredump.fault import PcSource
from ..signature.model import CrashSignature

SCHEMA_VERSION: Final = 1
Dim3 = tuple[int, int, int]
#: A code or data address: '0x' and hex digits, never a JSON number (which loses bits past 2**53).
HexAddress = Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]+$")]
#: What a report was made from.
SourceKind = Literal["cuda-coredump", "run"]
#: What kept part of the debugger's view from the report.
#: The memory space a faulting access went to (``generic`` where the window bases could not tell).
MemorySpace = Literal["shared", "global", "local", "generic", "constant", "param", "unknown"]
#: What the explainer concluded about a faulting address, against the bound the dump holds.
VerdictKind = Literal["out-of-bounds", "inside", "undetermined", "misaligned", "null", "not-a-pointer"]
#: Where a value of the address came from, at the end of the backward slice.
RootKind = Literal["param", "special", "load", "constant", "unknown"]
#: Where a value the explanation shows was read: the dumped registers, recomputed from the
#: slice, the parameter buffer, or the launch (blockIdx, threadIdx, dimensions) the dump records.
Provenance = Literal["dump", "recomputed", "parameter buffer", "launch"]
#: How warps of a dump with no exception stand.
WaitKind = Literal["barrier-after-exit", "barrier", "polling-memory", "collective-wait", "other"]
ProblemKind = Literal["not-cuda-gdb", "start-failed", "cannot-read-dump", "format-too-new",
                      "unknown-exception", "timeout", "died", "command-error", "no-focus", "given-up"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tool(_Model):
    name: str = "crashlab"
    version: str


class Source(_Model):
    path: str
    size_bytes: int
    kind: SourceKind
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


class SourceLine(_Model):
    file: str
    line: int


class WarpPosition(_Model):
    """Where a group of warps stands: what a dump with no exception (a hang) is read for."""

    pc: HexAddress | None
    function_offset: int | None = None
    warps: int
    function: str | None = Field(None, description="the function holding the PC (may be a device function)")
    source: list[SourceLine] = Field(
        default_factory=list, description="inline chain of the instruction at the PC, innermost first")
    instruction: str | None = Field(None, description="the SASS instruction at the PC (nvdisasm)")


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
    waits: list[Wait] = Field(default_factory=list, description="a dump with no exception: what "
                              "the resident warps wait for, one entry per class")


class ExceptionInfo(_Model):
    code: int = Field(description="CUDBG exception code, the driver's numbering")
    name: str = Field(description="CUDBG_EXCEPTION_* name")
    display: str = Field(description="the text cuda-gdb prints")
    display_from_cuda_gdb: bool = Field(
        True, description="false where cuda-gdb has no text for this code and crashlab made one")
    cuda_gdb_signal: str | None = Field(None, description="cuda-gdb's CUDA_EXCEPTION_n")
    scope: ExceptionScope
    known: bool = True


class KernelRef(_Model):
    name: str
    mangled: str


class SassInstruction(_Model):
    address: HexAddress
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
    level: int = Field(description="frame number as cuda-gdb shows it: #0 is the faulting function, "
                                   "the dump's backtrace row of level L is frame L+1")
    pc: HexAddress
    function: str | None = None
    function_offset: int | None = None


class Param(_Model):
    """One kernel parameter: where the cubin's parameter info puts it, and its bytes."""

    ordinal: int
    offset: int = Field(description="offset into the parameter buffer (EIATTR_KPARAM_INFO)")
    size: int
    type: str | None = Field(None, description="from the demangled kernel signature, where its "
                                               "argument count matches the cubin's")
    value: int | None = Field(None, description="little-endian unsigned integer of a 1, 2, 4 or "
                                                "8-byte parameter")
    hex: str | None = Field(None, description="the parameter's bytes; null where the dump's "
                                              "buffer ends before them")
    shown: str = Field(description="the value as the views print it: hex for 8 bytes and pointers, "
                                   "decimal (signed for signed types) for smaller integers, a "
                                   "float for float/double, bytes for structs")
    suspect: str | None = Field(None, description="why this value is not what its type says (a "
                                "null, small-integer, packed or misaligned pointer, or one outside "
                                "every address window the dump knows); null where nothing is seen")


class Verdict(_Model):
    kind: VerdictKind
    basis: str = Field(description="one sentence: the bound compared with and where the dump "
                                   "holds it, or why there is none")


class Root(_Model):
    """Where one input of the faulting address came from, at the end of the backward slice."""

    kind: RootKind
    name: str = Field(description="what a reader calls it: 'param 0 (int const*)', "
                                  "'threadIdx.x', 'LDG at +0x1d0', '0x400'")
    param_ordinal: int | None = None
    value: str | None = Field(None, description="hex, where known")
    provenance: Provenance | None = None
    detail: str | None = Field(None, description="for a load: what it read, e.g. 'element 288 "
                                                 "of param 0'")


class Explanation(_Model):
    """Why a faulting access faulted, read from the dump: its address, memory space, the bound
    it broke and where its address came from. A recomputed address that contradicts the dumped
    registers makes trust 'mismatch', and then nothing here is a cause."""

    instruction: str = Field(description="the faulting instruction's text (nvdisasm)")
    pc: HexAddress
    access: Literal["load", "store", "atomic", "prefetch"]
    space: MemorySpace
    access_bytes: int | None = None
    address: HexAddress | None = None
    address_provenance: Provenance | None = None
    operand: str | None = Field(None, description="the memory operand, as nvdisasm prints it")
    verdict: Verdict
    roots: list[Root] = Field(default_factory=list)
    stops: list[str] = Field(default_factory=list,
                             description="where the backward slice stopped short, and why")
    trust: Literal["consistent", "mismatch"]
    formula: str | None = Field(None, description="one line: address = arg0[i]*4 + 0x400")
    story: list[str] = Field(default_factory=list, description="the 'why', a few short sentences")
    compare_with: list[str] = Field(
        default_factory=list, description="integer parameters to compare the index with: "
                                          "candidates, never asserted as the bound")


class Wait(_Model):
    """One class of where a hung kernel's warps stand, with its evidence."""

    kind: WaitKind
    warps: int
    pcs: list[HexAddress] = Field(default_factory=list)
    summary: str = Field(description="one line, e.g. '48 warps at BAR.SYNC while 16 exited'")
    evidence: list[str] = Field(default_factory=list)
    address: HexAddress | None = Field(None, description="the polled address, where known")
    root: Root | None = Field(None, description="where the polled address came from")


class Params(_Model):
    address: HexAddress
    size: int
    hex: str = Field(description="the parameter buffer's bytes (at most 32 KiB)")
    values: list[Param] = Field(default_factory=list, description="the buffer split into the "
                                "kernel's parameters, ordinal order")
    layout_unavailable: str | None = Field(None, description="why values is empty")


class ConstBank(_Model):
    bank: int
    address: HexAddress
    size: int


class Candidate(_Model):
    """A warp still resident on the SM of an SM-level exception: listed, not blamed."""

    sm: int
    warp: int
    grid_id: int | None
    kernel: str | None = None
    block_idx: Dim3
    error_pc: HexAddress | None = Field(None, description="the warp's errorPC where it is valid")
    broken: bool = False


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
    pc: HexAddress | None
    pc_source: PcSource
    current_pc: HexAddress | None = Field(None, description="the shown lane's PC when the dump was taken")
    function_offset: int | None
    faulting_lanes: int
    faulting_warps: int
    blocks: Range | None = None
    threads: Range | None = None
    reported_by_sm: bool = False
    sms: list[int] = Field(default_factory=list, description="every SM (smId) of this fault group")
    candidates: list[Candidate] = Field(
        default_factory=list,
        description="SM-level exception only: the warps still on that SM, candidates, not culprits")
    notes: list[str] = Field(default_factory=list)
    registers: dict[str, int] | None = None
    predicates: dict[str, bool] | None = None
    uniform_registers: dict[str, int] | None = None
    uniform_predicates: dict[str, bool] | None = None
    backtrace: list[Frame] = Field(default_factory=list)
    params: Params | None = None
    const_banks: list[ConstBank] = Field(default_factory=list)
    sass: Sass = Field(default_factory=Sass)
    explanation: Explanation | None = Field(
        None, description="why the access faulted (crashlab.explain); null where the faulting "
                          "instruction is not a memory access, nothing could be read, or "
                          "--no-explain")
    params_missing: str | None = Field(
        None, description="why the dump has no parameter buffer for this kernel, and the flag to "
                          "drop next time")


class DebuggerProblem(_Model):
    """Something the debugger did or said that kept part of its view from the report."""

    kind: ProblemKind
    message: str
    command: str | None = None


class DebuggerCommand(_Model):
    """One command of the session, as sent, with what came back (cut to a few KiB)."""

    command: str
    status: Literal["ok", "timeout", "died", "not-run"]
    seconds: float
    output: str
    note: str | None = None


class DebuggerFocus(_Model):
    """cuda-gdb's focus: physical (device, sm, warp, lane) and logical coordinates."""

    device: int | None = None
    sm: int | None = None
    warp: int | None = None
    lane: int | None = None
    kernel: int | None = None
    grid: int | None = None
    cluster_idx: Dim3 | None = None
    block_idx: Dim3 | None = None
    thread_idx: Dim3 | None = None


class DebuggerFrame(_Model):
    level: int
    pc: HexAddress | None = None
    function: str | None = None
    launch: str | None = Field(None, description="cuda-gdb's <<<grid,block>>> of a kernel frame")
    file: str | None = None
    line: int | None = None
    inlined: str | None = Field(None, description="cuda-gdb's 'in F inlined from FILE:LINE' tail")


class DebuggerInstruction(_Model):
    address: HexAddress
    function: str | None = None
    offset: int | None = None
    text: str
    marker: Literal["", "=>", "*>", "*=>"] = Field(
        "", description="cuda-gdb's markers: => current PC, *> errorPC, *=> both")

    @property
    def at_error_pc(self) -> bool:
        return self.marker in ("*>", "*=>")

    @property
    def at_current_pc(self) -> bool:
        return self.marker in ("=>", "*=>")


class DebuggerLoad(_Model):
    """What the debugger printed while opening the dump, whatever the order it printed it in."""

    exception: str | None = Field(None, description="'CUDA Exception: ...' or the signal's text")
    signal: str | None = Field(None, description="e.g. CUDA_EXCEPTION_14, or SIGTRAP for no exception")
    triggered_pc: HexAddress | None = None
    triggered_function: str | None = None
    triggered_source: str | None = None
    triggered_device: int | None = None
    assertion: bool = False
    focus: DebuggerFocus | None = None
    frame: DebuggerFrame | None = None
    warnings: list[str] = Field(default_factory=list)


class DebuggerKernel(_Model):
    kernel: int
    device: int | None = None
    grid: int | None = None
    status: str | None = None
    grid_dim: Dim3 | None = None
    block_dim: Dim3 | None = None
    name: str
    args: str | None = None
    current: bool = False


class Agreement(_Model):
    """One fact read natively and by the debugger, and whether the two agree."""

    field: Literal["kernel", "exception", "block", "thread", "pc", "registers", "predicates",
                   "uniform", "backtrace", "disassembly", "source"]
    verdict: Literal["agree", "disagree", "unknown"]
    native: str | None = None
    debugger: str | None = None
    note: str | None = None


class DebuggerFaultView(_Model):
    """The debugger's view of one natively found fault, taken with its focus on that fault."""

    fault: int = Field(description="index into faults")
    focus: DebuggerFocus | None = None
    exception: str | None = None
    error_pc: HexAddress | None = None
    kernel: str | None = None
    source: str | None = Field(None, description="'info line *$errorpc', as printed")
    source_lines: list[SourceLine] = Field(
        default_factory=list, description="'info line *$errorpc' as a chain, innermost first")
    backtrace: list[DebuggerFrame] = Field(default_factory=list)
    disassembly: list[DebuggerInstruction] = Field(default_factory=list)
    registers: dict[str, int] = Field(default_factory=dict)
    registers_unavailable: list[str] = Field(
        default_factory=list, description="registers the debugger printed as <unavailable>")
    agreement: list[Agreement] = Field(default_factory=list)


class DebuggerSection(_Model):
    """cuda-gdb's answers beside crashlab's own; the native report stands whatever happens here."""

    tool: str | None = Field(None, description="the debugger's path")
    version: str | None = None
    status: Literal["ok", "partial", "failed", "unavailable"]
    reason: str | None = Field(None, description="why the section is empty or partial, in one sentence")
    load: DebuggerLoad | None = None
    kernels: list[DebuggerKernel] = Field(default_factory=list)
    faults: list[DebuggerFaultView] = Field(default_factory=list)
    problems: list[DebuggerProblem] = Field(default_factory=list)
    transcript: list[DebuggerCommand] = Field(default_factory=list)
    seconds: float = 0.0


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
    debugger: DebuggerSection | None = Field(
        None, description="cuda-gdb's view and its agreement with the native one (inspect --debugger)")
    signature: CrashSignature | None = Field(
        None, description="what makes this crash the same bug as another (crashlab.signature); "
                          "absent from reports older than it")

    @property
    def found(self) -> bool:
        return bool(self.faults)
