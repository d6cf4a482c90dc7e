"""TriageReport: the one versioned object every crashlab path ends in.

The JSON form is a contract (``schema_version: 1``; crashlab/report/schema.py publishes it and
says what stays stable): fields may be added, none renamed. Terminal and Markdown views are
renderings of this same object, never of the reader's internals. Addresses are hex strings so
that JSON consumers lose no bits. Sets of named values are Literal types, so that crashlab's own
code cannot write a value the set lacks. cuda-gdb's section (debugger.py) and the places every
part points at (places.py) live beside it; this module assembles them.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from ..published import ClosedModel as _Model
from ..published import empty_list
from ..vocabulary import ExceptionScope, PcSource
from .advice import Advice
from .debugger import DebuggerSection
from .kernellog import KernelLog
from .places import Dim3, HexAddress, SourceLine
from .signature import CrashSignature
from .tool import Tool

SCHEMA_VERSION: Final = 1
#: What a report was made from.
SourceKind = Literal["cuda-coredump", "run"]
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


class Source(_Model):
    """The file or directory the report was made from."""

    path: str
    """The coredump file (inspect) or run directory (serve) as crashlab was given it."""
    size_bytes: int
    """Size of the file on disk in bytes, compressed size for a .gz dump; for a run directory,
    the total of the files it collected."""
    kind: SourceKind
    """cuda-coredump: a CUDA GPU coredump; run: a run directory written by crashlab serve."""
    compressed: bool = False
    """True where the dump file was gzip-compressed (CUDA's gzip_compress flag, or gzip by hand)
    and crashlab read it decompressed."""


class Dump(_Model):
    """Facts about the coredump file itself: its ELF header, its section table and the driver's
    metadata section."""

    abi_version: int
    """The ELF header's EI_ABIVERSION byte (7 for the current CUDA coredump ABI); crashlab reads
    other versions and warns."""
    driver_version: str | None = None
    """The driver version that wrote the dump, 'major.minor' (e.g. '570.86'), from the
    .cudbg.meta section; null where the dump has none (drivers before r565)."""
    cuda_version: str | None = None
    """The CUDA version of that driver, 'major.minor', from .cudbg.meta; null where the dump has
    no metadata section."""
    generator: str | None = None
    """The name of the program that wrote the dump, from .cudbg.meta; null where the section is
    absent or the name empty."""
    generation_flags: list[str] = Field(default_factory=empty_list)
    """Names of the CUcoredumpGenerationFlags the dump was made with (e.g. skip_global_memory),
    from .cudbg.meta; empty where none were set or the section is absent."""
    timestamp: int | None = None
    """When the driver wrote the dump, in seconds since the epoch (UTC): the timestamp field of
    .cudbg.meta (the crash index's time of a dump recorded on its own); null where the dump has
    no metadata section."""
    section_count: int
    """Number of ELF sections in the dump (e_shnum)."""
    memory_sections: int = 0
    """Number of device memory sections (global, shared, local, managed, ...) the dump lists."""
    memory_bytes: int = 0
    """bytes of memory sections, listed but not read"""


class Device(_Model):
    """One GPU the dump describes, from the device table (.cudbg.devtbl)."""

    index: int
    """devId, as cuda-gdb numbers devices"""
    name: str
    """The device's marketing name, e.g. 'NVIDIA H100 80GB HBM3'."""
    sm_type: str
    """The SM architecture, e.g. 'sm_90'."""
    num_sms: int
    """Number of streaming multiprocessors on the device."""
    warps_per_sm: int
    """Warp slots per SM (numWarpsPerSM)."""
    lanes_per_warp: int
    """Lanes (threads) per warp, 32 on every NVIDIA GPU so far."""
    regs_per_lane: int
    """Registers per lane the hardware offers (numRegsPerLane), not what a kernel uses."""
    pci_bus_id: int | None = None
    """The GPU's PCI bus number (pciBusId); null in a triage made before crashlab read it."""
    pci_dev_id: int | None = None
    """The GPU's PCI device number on that bus (pciDevId); null likewise."""


class WarpPosition(_Model):
    """Where a group of warps stands: what a dump with no exception (a hang) is read for."""

    pc: HexAddress | None
    """The PC the warps stand at, the head lane's virtual PC; null where no lane of the warp has
    one."""
    function_offset: int | None = None
    """Bytes from the start of the function holding the PC; null where no cubin in the dump
    holds it."""
    warps: int
    """How many resident warps of the kernel stand at this PC."""
    function: str | None = None
    """the function holding the PC (may be a device function)"""
    source: list[SourceLine] = Field(default_factory=empty_list)
    """inline chain of the instruction at the PC, innermost first"""
    instruction: str | None = None
    """the SASS instruction at the PC (nvdisasm)"""


class Kernel(_Model):
    """One grid (kernel launch) the dump records, from the grid table, with where its resident
    warps stand."""

    device: int
    """The device (devId) the grid runs on."""
    grid_id: int
    """The grid's id (gridId64), as cuda-gdb's 'info cuda kernels' shows it."""
    name: str
    """The kernel's demangled name."""
    mangled: str
    """The kernel's mangled (symbol) name, as the grid table records it."""
    grid_dim: Dim3
    """The launch's gridDim (x, y, z), in blocks."""
    block_dim: Dim3
    """The launch's blockDim (x, y, z), in threads."""
    cluster_dim: Dim3 | None = None
    """The launch's cluster shape (x, y, z), in blocks; null where the kernel was launched
    without clusters or the dump predates clusters (r525)."""
    status: int
    """The grid table's gridStatus, the driver's CUDBGGridStatus number."""
    resident_sms: int = 0
    """Number of SMs holding at least one of the grid's blocks when the dump was taken."""
    resident_blocks: int = 0
    """Number of the grid's blocks resident on the SMs when the dump was taken."""
    resident_warps: int = 0
    """Number of the grid's warps resident on the SMs when the dump was taken."""
    warps_at: list[WarpPosition] = Field(default_factory=empty_list)
    """where the resident warps stand, most warps first"""
    waits: list[Wait] = Field(default_factory=empty_list)
    """a dump with no exception: what the resident warps wait for, one entry per class"""


class ExceptionInfo(_Model):
    """The CUDA exception of a fault, as the driver numbers it and cuda-gdb names it."""

    code: int
    """CUDBG exception code, the driver's numbering"""
    name: str
    """CUDBG_EXCEPTION_* name"""
    display: str
    """the text cuda-gdb prints"""
    display_from_cuda_gdb: bool = True
    """false where cuda-gdb has no text for this code and crashlab made one"""
    cuda_gdb_signal: str | None = None
    """cuda-gdb's CUDA_EXCEPTION_n"""
    scope: ExceptionScope
    """What the exception belongs to: a lane, a warp, a cluster, or the device (device-level
    exceptions, and codes crashlab does not know)."""
    known: bool = True
    """False where the code is newer than crashlab's table: name and display are then made up."""


class KernelRef(_Model):
    """The kernel of a fault, by name."""

    name: str
    """The kernel's demangled name."""
    mangled: str
    """The kernel's mangled (symbol) name, from the grid table."""


class SassInstruction(_Model):
    """One instruction of the SASS window around a faulting PC, as nvdisasm prints it."""

    address: HexAddress
    """The instruction's virtual address on the device."""
    text: str
    """The instruction as nvdisasm prints it, e.g. 'LDG.E R2, desc[UR4][R2.64]'."""
    faulting: bool
    """True for the instruction at the fault's PC."""
    current: bool = False
    """True for the instruction at the shown lane's current PC (often a few past the faulting
    one)."""
    source: list[SourceLine] = Field(default_factory=empty_list)
    """Inline chain of this instruction, innermost first; empty where the cubin has no line
    table."""


class Sass(_Model):
    """The disassembly window around a fault's PC: the relocated cubin in the dump that holds
    the PC, read with nvdisasm."""

    instructions: list[SassInstruction] = Field(default_factory=empty_list)
    """The instructions either side of the faulting one (8 each side unless inspect --context
    says otherwise), in address order; empty where the disassembly is unavailable."""
    source: list[SourceLine] = Field(default_factory=empty_list)
    """inline chain of the faulting instruction, innermost first"""
    section: str | None = None
    """The cubin's .text section holding the PC (.text.<mangled>); null where no cubin in the
    dump holds it."""
    tool: str | None = None
    """nvdisasm's version, the tool that made the listing; null where nvdisasm was not found."""
    unavailable_reason: str | None = None
    """Why there are no instructions (no cubin holds the PC, nvdisasm missing or failed, only
    the most relevant faults are disassembled); null where instructions are listed."""


class Range(_Model):
    """The first and last of a set of 3D indices (blocks or threads) a fault group spans, and
    how many there are."""

    first: Dim3
    """The smallest index (x, y, z) of the set, z-major as CUDA numbers blocks and threads."""
    last: Dim3
    """The largest index (x, y, z) of the set."""
    count: int
    """How many distinct indices the set holds (not the volume between first and last)."""


class Frame(_Model):
    """One caller of the faulting function, from the lane's backtrace section (.cudbg.bt)."""

    level: int
    """frame number as cuda-gdb shows it: #0 is the faulting function, the dump's backtrace row
    of level L is frame L+1"""
    pc: HexAddress
    """The frame's return address on the device."""
    function: str | None = None
    """The demangled function holding that address; null where no cubin symbol holds it."""
    function_offset: int | None = None
    """Bytes from that function's start; null where no cubin in the dump holds the address."""


class Param(_Model):
    """One kernel parameter: where the cubin's parameter info puts it, and its bytes."""

    ordinal: int
    """The parameter's position in the kernel's argument list, from 0 (EIATTR_KPARAM_INFO)."""
    offset: int
    """offset into the parameter buffer (EIATTR_KPARAM_INFO)"""
    size: int
    """The parameter's size in bytes (EIATTR_KPARAM_INFO)."""
    type: str | None = None
    """from the demangled kernel signature, where its argument count matches the cubin's"""
    value: int | None = None
    """little-endian unsigned integer of a 1, 2, 4 or 8-byte parameter"""
    hex: str | None = None
    """the parameter's bytes; null where the dump's buffer ends before them"""
    shown: str
    """the value as the views print it: hex for 8 bytes and pointers, decimal (signed for signed
    types) for smaller integers, a float for float/double, bytes for structs"""
    suspect: str | None = None
    """why this value is not what its type says (a null, small-integer, packed or misaligned
    pointer, or one outside every address window the dump knows); null where nothing is seen"""


class Verdict(_Model):
    """What the explainer concluded about the faulting address."""

    kind: VerdictKind
    """out-of-bounds: past a bound the dump holds; inside: within it (the fault lies elsewhere);
    null / not-a-pointer / misaligned: the address itself is wrong; undetermined: no bound
    was found."""
    basis: str
    """one sentence: the bound compared with and where the dump holds it, or why there is none"""
    past_bound: int | None = None
    """For out-of-bounds against a size the dump holds: how many bytes the access's end lies past
    that bound; null for every other verdict and where the bound is not a size (a CTA rank)."""


class LaneAccess(_Model):
    """One lane's faulting access: which lane of which warp, its thread, and its address."""

    lane: int
    """the lane's laneId in its warp"""
    warp: int
    """the warp's warpId on its SM"""
    sm: int
    """the SM's smId"""
    block_idx: Dim3
    """the lane's block"""
    thread_idx: Dim3
    """the lane's thread"""
    address: HexAddress | None = None
    """the address this lane's access named; null where it could not be read or recomputed"""
    registers: dict[str, int] | None = None
    """the lane's registers R0..Rn as unsigned 32-bit integers, for the culprit lane whose
    access is explained (Explanation.culprit_lane); null in a group's first lane"""


class LaneVerdict(_Model):
    """The marked lanes whose access got one verdict. The driver marks a warp exception on every
    lane of the warp without saying which lane broke the bound, so each lane's access is judged
    on its own registers."""

    kind: VerdictKind
    """the verdict these lanes' accesses got"""
    lanes: list[int]
    """their laneIds, ascending (over every warp judged: see count and warps)"""
    count: int
    """how many lanes (a lane of each warp counted once)"""
    warps: int
    """in how many warps"""
    first: LaneAccess
    """the first of them, in cuda-gdb's order (SM, warp, lane)"""
    past_bound: list[int] | None = None
    """for out-of-bounds: the least and the most bytes past the bound, over these lanes"""


class OtherOperand(_Model):
    """The memory operand of a two-sided instruction (LDGSTS, a bulk or TMA copy) that did not
    fault, as the faulting lane's registers give it."""

    operand: str
    """the operand, as nvdisasm prints it"""
    access: Literal["load", "store", "atomic", "prefetch"]
    """what the instruction does through it"""
    space: MemorySpace
    """the memory space it names"""
    address: HexAddress | None = None
    """its address; null where the dump does not give it (a descriptor, an overwritten register)"""
    verdict: Verdict
    """how it stands against the bounds the dump holds"""


class Root(_Model):
    """Where one input of the faulting address came from, at the end of the backward slice."""

    kind: RootKind
    """What the slice ended at: a kernel parameter, a special register (threadIdx, blockIdx,
    ...), a load from memory, a constant, or something it could not follow."""
    name: str
    """what a reader calls it: 'param 0 (int const*)', 'threadIdx.x', 'LDG at +0x1d0', '0x400'"""
    param_ordinal: int | None = None
    """For a param root: the parameter's ordinal; null for every other kind."""
    value: str | None = None
    """hex, where known"""
    provenance: Provenance | None = None
    """Where value was read; null where it has no value."""
    detail: str | None = None
    """for a load: what it read, e.g. 'element 288 of param 0'"""


class Explanation(_Model):
    """Why a faulting access faulted, read from the dump: its address, memory space, the bound
    it broke and where its address came from. A recomputed address that contradicts the dumped
    registers makes trust 'mismatch', and then nothing here is a cause."""

    instruction: str
    """the faulting instruction's text (nvdisasm)"""
    pc: HexAddress
    """The faulting instruction's address."""
    access: Literal["load", "store", "atomic", "prefetch"]
    """What the instruction does to memory."""
    space: MemorySpace
    """The memory space the address falls in, from the instruction and the shared/local window
    bases (generic where they could not tell)."""
    access_bytes: int | None = None
    """Bytes the instruction reads or writes; null where the opcode's width is unknown."""
    address: HexAddress | None = None
    """The faulting address: read from the dumped registers or recomputed from the slice; null
    where neither could be done."""
    address_provenance: Provenance | None = None
    """Where address was read: dump (the registers) or recomputed; null where address is null."""
    operand: str | None = None
    """the memory operand, as nvdisasm prints it"""
    verdict: Verdict
    """What the address is, against the bound the dump holds."""
    roots: list[Root] = Field(default_factory=empty_list)
    """The inputs the address was computed from, in the order the slice met them."""
    stops: list[str] = Field(default_factory=empty_list)
    """where the backward slice stopped short, and why"""
    trust: Literal["consistent", "mismatch"]
    """consistent: the recomputed address matches the dumped registers; mismatch: it does not,
    and nothing here is a cause."""
    formula: str | None = None
    """one line: address = arg0[i]*4 + 0x400"""
    story: list[str] = Field(default_factory=empty_list)
    """the 'why', a few short sentences"""
    compare_with: list[str] = Field(default_factory=empty_list)
    """integer parameters to compare the index with: candidates, never asserted as the bound"""
    culprit_lane: LaneAccess | None = None
    """The lane explained: the first lane whose access breaks a bound in the way that explains
    the exception; where no marked lane's does, the lane cuda-gdb focuses. Null where the lanes
    could not be judged (no registers in the dump)."""
    focus_lane: int | None = None
    """the laneId cuda-gdb focuses (Fault.lane)"""
    lanes: list[LaneVerdict] = Field(default_factory=empty_list)
    """Every marked lane judged alike, grouped by verdict, the verdict that explains the exception
    first."""
    lanes_judged: int = 0
    """How many marked lanes were judged (at most a bound; see lanes_not_judged)."""
    lanes_not_judged: int = 0
    """Marked lanes beyond the bound on the work, not judged."""
    breaks_bound: bool = False
    """Whether some marked lane's access breaks a bound the dump holds (or is null, not a
    pointer or misaligned): false says plainly that none does, and verdict is then the focused
    lane's."""
    other_operands: list[OtherOperand] = Field(default_factory=empty_list)
    """For an instruction with two memory operands: the side that did not fault."""


class Wait(_Model):
    """One class of where a hung kernel's warps stand, with its evidence."""

    kind: WaitKind
    """What the warps wait at: a barrier other warps exited past, a barrier, a loop polling
    memory, a collective (NCCL) wait, or other."""
    warps: int
    """How many of the kernel's resident warps stand so."""
    pcs: list[HexAddress] = Field(default_factory=empty_list)
    """The PCs those warps stand at."""
    summary: str
    """one line, e.g. '48 warps at BAR.SYNC while 16 exited'"""
    evidence: list[str] = Field(default_factory=empty_list)
    """The facts read from the dump that make this the class, one sentence each."""
    address: HexAddress | None = None
    """the polled address, where known"""
    root: Root | None = None
    """where the polled address came from"""
    value_registers: list[str] = Field(default_factory=empty_list)
    """the registers the polling loop's load writes (``R0``): where a warp keeps the value it
    polled last, so that live snapshots of its registers show whether that value changes"""


class Params(_Model):
    """A fault's kernel parameter buffer, from the grid's parameter section
    (.cudbg.param.devD.gridG)."""

    address: HexAddress
    """Device address of the parameter buffer."""
    size: int
    """Size of the buffer in bytes, as the dump records it."""
    hex: str
    """the parameter buffer's bytes (at most 32 KiB)"""
    values: list[Param] = Field(default_factory=empty_list)
    """the buffer split into the kernel's parameters, ordinal order"""
    layout_unavailable: str | None = None
    """why values is empty"""


class ConstBank(_Model):
    """One constant bank of the fault's grid, from the constant-bank table (r550 and later)."""

    bank: int
    """The bank's number (bankId)."""
    address: HexAddress
    """Device address of the bank."""
    size: int
    """Size of the bank in bytes."""


#: How a known upstream fix stands against the version that crashed (syzbot's "patched on /
#: missing on"): the fix came in a later release; this release holds it already (so this crash is
#: another bug or a regression); no fix is known for this kernel; the running version is unknown.
#: A fix is known but no release holds it yet (not-released).
FixStatus = Literal["fixed-in-later", "fixed-in-this", "no-known-fix", "version-unknown",
                    "not-released"]


class KnownFix(_Model):
    """One upstream fix from crashlab's table of known fixes (shipped as data, easy to extend)."""

    artifact: str
    """The artifact the fix is in, as Owner.artifact names it (e.g. 'flashinfer')."""
    fixed_in: str | None
    """The first release of that artifact holding the fix (e.g. '0.6.18'); null where no
    release holds one yet."""
    link: str
    """Where the fix is described: the upstream pull request, issue or release note."""
    summary: str
    """One line on what was fixed."""
    workaround: str | None = None
    """A flag, setting or release that avoids the crash until the fix is in (e.g.
    '--disable-cuda-graph'); null where none is known."""
    workaround_source: str | None = None
    """Where the workaround is given (an http(s) address); null without a workaround."""
    fatal: bool = False
    """True where a restart cannot help (the crash comes back on every start): stop restarting."""


class Owner(_Model):
    """The artifact (a wheel or library) that owns the faulting kernel, and whether a known fix
    for it is missing from the version that crashed."""

    artifact: str
    """What shipped the kernel: 'sgl-kernel', 'flashinfer' (AOT cubins), 'flashinfer-jit' (its JIT
    cache), 'cudnn', 'cublas', 'torch', 'triton-jit', 'nccl', 'cutlass', or another package's
    name; 'unknown' where nothing the crash left names it."""
    version: str | None = None
    """The artifact's version where the crash left it (the environment's package list, a library's
    file name or ELF note); null where unknown."""
    evidence: list[str] = Field(default_factory=empty_list)
    """What named the owner, one fact per line: the module image's producer or ELF note, the
    kernel name's prefix, a path in the server's /proc/PID/maps, the package list."""
    fix: KnownFix | None = None
    """The known upstream fix that matches this fault; null where none does."""
    fix_status: FixStatus = "no-known-fix"
    """How the fix stands against the version that crashed."""


class Candidate(_Model):
    """A warp still resident on the SM of an SM-level exception: listed, not blamed."""

    sm: int
    """The SM (smId) the warp is on."""
    warp: int
    """The warp's slot on that SM (warpId)."""
    grid_id: int | None
    """The grid (gridId64) of the warp's block; null where the block table has none."""
    kernel: str | None = None
    """The demangled kernel name of that grid; null where it is unknown."""
    block_idx: Dim3
    """The warp's block index (x, y, z)."""
    error_pc: HexAddress | None = None
    """the warp's errorPC where it is valid"""
    broken: bool = False
    """True where the warp table marks the warp broken (isWarpBroken)."""


class Fault(_Model):
    """One fault group: the lanes that faulted alike (one device, grid, PC and exception), shown
    through one of them, the head lane."""

    exception: ExceptionInfo
    """The CUDA exception the driver recorded for the group."""
    device: int
    """The device (devId) the fault happened on."""
    device_name: str
    """That device's name, e.g. 'NVIDIA H100 80GB HBM3'."""
    sm_type: str
    """That device's SM architecture, e.g. 'sm_90'."""
    sm: int
    """The SM (smId) of the head lane, or of the SM-level exception."""
    warp: int | None
    """The head lane's warp slot on its SM (warpId); null for an SM-level exception no warp
    claims."""
    lane: int | None
    """The head lane's number in its warp (laneId); null where no lane is marked."""
    grid_id: int | None
    """The grid (gridId64) that faulted; null where neither a block nor the PC names one."""
    kernel: KernelRef | None
    """The kernel of that grid; null where the grid is unknown."""
    kernel_inferred: bool = False
    """kernel deduced from the PC, not a block"""
    function: str | None = None
    """the function holding the PC (may be a device function)"""
    block_idx: Dim3 | None
    """The head lane's block index (x, y, z); null where no warp claims the fault."""
    thread_idx: Dim3 | None
    """The head lane's thread index in its block (x, y, z); null where no lane is marked."""
    cluster_idx: Dim3 | None = None
    """The block's cluster index (x, y, z); null where the kernel uses no clusters."""
    grid_dim: Dim3 | None = None
    """The grid's gridDim (x, y, z), in blocks; null where the grid is unknown."""
    block_dim: Dim3 | None = None
    """The grid's blockDim (x, y, z), in threads; null where the grid is unknown."""
    cluster_dim: Dim3 | None = None
    """The cluster shape (x, y, z) in blocks, from the block or else the grid; null where the
    launch used no clusters."""
    cluster_target_block: Dim3 | None = None
    """For a cluster exception: the block (x, y, z) the access targeted, from the SM table (r565
    and later); null where the SM does not record one."""
    pc: HexAddress | None
    """The faulting PC, from where pc_source says; null where no PC is recorded."""
    pc_source: PcSource
    """Which table the PC was read from: the SM's errorPC (r555+), the warp's errorPC, or the
    lane's current PC where no errorPC is valid."""
    current_pc: HexAddress | None = None
    """the shown lane's PC when the dump was taken"""
    function_offset: int | None
    """Bytes from the start of the function holding the PC (or from the kernel's entry where no
    cubin symbol holds it); null where the PC or the grid is unknown."""
    faulting_lanes: int
    """How many lanes the group holds."""
    faulting_warps: int
    """How many warps those lanes are in."""
    blocks: Range | None = None
    """The blocks the group's lanes run, first to last; null where no warp claims the fault."""
    threads: Range | None = None
    """The threads (within their blocks) the group's lanes run, first to last; null where no
    lane is marked."""
    reported_by_sm: bool = False
    """True where the SM table, not a warp, recorded the exception (an SM-level exception, r555
    and later)."""
    sms: list[int] = Field(default_factory=empty_list)
    """every SM (smId) of this fault group"""
    candidates: list[Candidate] = Field(default_factory=empty_list)
    """SM-level exception only: the warps still on that SM, candidates, not culprits"""
    notes: list[str] = Field(default_factory=empty_list)
    """Facts a reader needs to weigh this fault: an inferred kernel, an errorPC that is not
    valid, what cuda-gdb would show instead, the driver's own message."""
    registers: dict[str, int] | None = None
    """The head lane's registers R0..Rn as unsigned 32-bit integers, from its .cudbg.regs
    section; null where the dump has none (e.g. no lane is marked)."""
    predicates: dict[str, bool] | None = None
    """The head lane's predicates P0..Pn, from its .cudbg.pred section; null where the dump has
    none."""
    uniform_registers: dict[str, int] | None = None
    """The warp's uniform registers UR0..URn as unsigned 32-bit integers, from .cudbg.uregs
    (Turing and later); null where the dump has none."""
    uniform_predicates: dict[str, bool] | None = None
    """The warp's uniform predicates UP0..UPn, from .cudbg.upred; null where the dump has none."""
    backtrace: list[Frame] = Field(default_factory=empty_list)
    """The head lane's callers, from its .cudbg.bt section, innermost first; empty where the
    dump records no caller."""
    params: Params | None = None
    """The kernel's parameter buffer; null where the dump holds none for this grid (see
    params_missing)."""
    const_banks: list[ConstBank] = Field(default_factory=empty_list)
    """The grid's constant banks (r550 and later); empty where the dump has no constant-bank
    table."""
    sass: Sass = Field(default_factory=Sass)
    """The disassembly around the PC."""
    explanation: Explanation | None = None
    """why the access faulted (crashlab.explain); null where the faulting instruction is not a
    memory access, nothing could be read, or --no-explain"""
    owner: Owner | None = None
    """The artifact that owns the faulting kernel and its known-fix status; null where the kernel
    is unknown."""
    params_missing: str | None = None
    """why the dump has no parameter buffer for this kernel, and the flag to drop next time"""


class TriageReport(_Model):
    """What crashlab found in one CUDA GPU coredump: the dump, its devices and kernels, the
    faults most relevant first, and optionally cuda-gdb's view beside it."""

    schema_version: Literal[1] = SCHEMA_VERSION
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the report."""
    status: Literal["fault", "no-exception"]
    """fault: the dump records at least one exception; no-exception: none (a dump taken on a
    hang, an abort or by hand)."""
    summary: str
    """One line a human reads first: the first fault, where it happened and its source line, or
    the resident kernels."""
    source: Source
    """The coredump file the report was made from."""
    dump: Dump
    """Facts about the coredump file: its ABI, driver and generation flags."""
    devices: list[Device]
    """Every device in the dump's device table, in table order."""
    kernels: list[Kernel]
    """Every grid in the dump's grid table, with its resident warps."""
    faults: list[Fault]
    """most relevant first"""
    omitted_faults: int = 0
    """Fault groups past the first 256, counted but not listed."""
    warnings: list[str] = Field(default_factory=empty_list)
    """What crashlab met while reading the dump and reports instead of failing (an unknown ABI
    version, rows cuda-gdb would show differently, a missing tool)."""
    analysis_skipped: str | None = None
    """Why the faults have no explanation (faults[].explanation) or, in a dump with no
    exception, the kernels no classification of what their warps wait for (kernels[].waits):
    both read the SASS, which --no-sass leaves out, or --no-explain was given; null where they
    were computed (an explanation may still be null where the fault is no memory access)."""
    debugger: DebuggerSection | None = None
    """cuda-gdb's view and its agreement with the native one (inspect --debugger)"""
    signature: CrashSignature | None = None
    """what makes this crash the same bug as another (crashlab.signature); absent from reports
    older than it"""
    advice: Advice | None = None
    """What to do next and why (crashlab.advice), from what the dump says: its owner's known
    fix or workaround; serve and show add the Xid lines, the index's history and the server's
    recent crashes. Null in reports older than it."""
    kernel_log: KernelLog | None = None
    """the Xid lines of a kernel log given with --kernel-log, decoded and held against the
    faults (kernel_log.checks); null without one"""

    @property
    def found(self) -> bool:
        return bool(self.faults)
