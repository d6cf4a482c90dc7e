"""SYNTHETIC crash scenarios for tests, benchmarks and the bundled example.

Each scenario describes a coredump (tests.coredump_builder.Spec) around a real nvcc-built cubin
and returns, beside it, what was planted: the values crashlab must find. The faulting PC is the
instruction a FAULT marker names in fixtures/kernels, so the expected source line comes from
the .cu file itself, not from crashlab.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .coredump_builder import (
    CTA,
    CUBINS,
    REGISTERS_PER_LANE,
    SM,
    Context,
    Device,
    Grid,
    Lane,
    Marker,
    Module,
    Spec,
    Warp,
    load_cubin,
    markers,
    relocate,
)

CODE_BASE = 0x7FFF_3A00_0000
WARP_ILLEGAL_ADDRESS = 14
WARP_OUT_OF_RANGE_ADDRESS = 5
WARP_MISALIGNED_ADDRESS = 6
WARP_ASSERT = 12
WARP_ILLEGAL_INSTRUCTION = 4


@dataclass
class Planted:
    """What a scenario put in the dump, for tests to compare crashlab's report with."""

    exception: int
    device: int
    sm: int
    warp: int
    lane: int
    block_idx: tuple[int, int, int]
    thread_idx: tuple[int, int, int]
    grid_id: int
    kernel: str
    pc: int
    function_offset: int
    marker: Marker
    registers: list[int] = field(default_factory=list)
    faulting_lanes: int = 0
    faulting_warps: int = 1


@dataclass
class Scenario:
    spec: Spec
    planted: Planted | None
    notes: dict = field(default_factory=dict)


def _kernel_section(cubin_name: str, kernel: str | None, marker: Marker) -> str:
    return ".text." + kernel if kernel else marker.text_section


def _lane_registers(ln: int, salt: int) -> list[int]:
    return [(salt * 0x10000 + ln * 0x100 + r) & 0xFFFFFFFF for r in range(32)]


def fault(
    marker_key: str = "illegal_address.sm_90.cubin:illegal-address",
    exception: int = WARP_ILLEGAL_ADDRESS,
    *,
    kernel: str | None = None,
    rows: dict[str, int] | None = None,
    sm_reports: bool = True,
    warp_error_pc: bool = True,
    marked_lanes: tuple[int, ...] = (0, 1, 2, 3),
    absolute_symbols: bool = True,
    cluster: bool = False,
    device_count: int = 1,
    faulting_device: int = 0,
    bystander_blocks: int = 3,
    metadata: bool = True,
    code_base: int = CODE_BASE,
) -> Scenario:
    """One kernel faulting in one warp of block (1,0,0), with bystander blocks elsewhere;
    ``code_base``: where the driver loaded the first device's module."""
    marker = markers()[marker_key]
    rows = rows or {}
    devices = []
    planted = None
    for dev in range(device_count):
        base = code_base + dev * 0x1000_0000
        cubin = relocate(load_cubin(marker.cubin), base, absolute_symbols=absolute_symbols)
        kernel_section = _kernel_section(marker.cubin, kernel, marker)
        mangled = kernel_section[len(".text."):]
        entry = cubin.addresses[kernel_section]
        fault_pc = cubin.addresses[marker.text_section] + marker.offset
        module = Module(handle=0x5550_0000 + dev, relocated=cubin.data)
        grid = Grid(grid_id=7 + dev, function=mangled, function_entry=entry,
                    module_handle=module.handle, grid_dim=(4, 1, 1), block_dim=(256, 1, 1),
                    cluster_dim=(2, 1, 1) if cluster else (0, 0, 0),
                    params=bytes(range(16)) + (1024).to_bytes(4, "little"),
                    const_banks=[(0x7E00_0000_1000, 0x400, 0)])
        device = Device(dev_id=dev, contexts=[Context(0x1000 + dev, [module])], grids=[grid])
        cluster_dim = (2, 1, 1) if cluster else (0, 0, 0)
        for block in range(bystander_blocks + 1):
            sm_id = 10 + 7 * block
            warps = []
            for warp_id in range(2):
                lanes = [Lane(ln, (warp_id * 32 + ln, 0, 0), pc=entry + 0x40,
                              registers=_lane_registers(ln, block), predicates=[0, 1, 0, 0, 0, 0, 0])
                         for ln in range(32)]
                warps.append(Warp(warp_id + 4 * block, lanes, uniform_registers=[0x11, 0x22],
                                  uniform_predicates=[1, 0]))
            cta = CTA(grid.grid_id, (block, 0, 0), warps,
                      cluster_idx=(block // 2, 0, 0) if cluster else (0, 0, 0), cluster_dim=cluster_dim)
            sm = SM(sm_id, [cta])
            if block == 1 and dev == faulting_device:
                victim = warps[1]
                victim.broken = 1
                if warp_error_pc:
                    victim.error_pc = fault_pc
                else:
                    victim.error_pc, victim.error_pc_valid = fault_pc + 0x30, False
                for lane in victim.lanes:
                    lane.pc = fault_pc + 0x20
                    if lane.ln in marked_lanes:
                        lane.exception = exception
                if sm_reports:
                    sm.exception, sm.error_pc = exception, fault_pc
                    sm.exception_string = "synthetic: access to 0x7fff00001000 out of bounds"
                    if cluster:
                        sm.cluster_target = (3, 0, 0)
                shown = victim.lanes[marked_lanes[0] if marked_lanes else 0]
                planted = Planted(
                    exception=exception, device=dev, sm=sm_id, warp=victim.warp_id,
                    lane=shown.ln, block_idx=cta.block_idx, thread_idx=shown.thread_idx,
                    grid_id=grid.grid_id, kernel=mangled,
                    pc=fault_pc if warp_error_pc else shown.pc,
                    function_offset=marker.function_offset + (0 if warp_error_pc else shown.pc - fault_pc),
                    marker=marker, registers=shown.registers,
                    faulting_lanes=len(marked_lanes),
                )
            device.sms.append(sm)
        devices.append(device)
    spec = Spec(devices, rows=rows, metadata=metadata)
    return Scenario(spec, planted)


def moe_align(registers: list[int], uniform_registers: list[int], params: bytes,
              shared_mem_size: int = 0, lane_pc_after: int = 0x20) -> Scenario:
    """The MoE shared out-of-range fault of ``fault`` with the faulting lane's registers, its
    warp's uniform registers and sharedMemSize, and the parameter buffer given: tests compute
    them from chosen roots by hand from the kernel's SASS, so the dump is consistent with the
    code (unlike the pattern registers of the bundled example)."""
    scenario = fault("moe_align.sm_90.cubin:shared-out-of-range", WARP_OUT_OF_RANGE_ADDRESS,
                     marked_lanes=(0,))
    planted = scenario.planted
    device = scenario.spec.devices[planted.device]
    device.grids[0].params = params
    warp = next(w for sm in device.sms for cta in sm.ctas for w in cta.warps
                if w.warp_id == planted.warp and sm.sm_id == planted.sm)
    lane = next(lane for lane in warp.lanes if lane.ln == planted.lane)
    lane.registers = planted.registers = list(registers)
    for each in warp.lanes:
        each.pc = planted.pc + lane_pc_after
    warp.uniform_registers = list(uniform_registers)
    warp.shared_mem_size = shared_mem_size
    return scenario


def hang() -> Scenario:
    """No exception anywhere: one kernel spinning on a flag, one waiting in a fake all-reduce."""
    spin = markers()["hang.sm_90.cubin:spin"]
    wait = markers()["tp_ranks.sm_90.cubin:tp-rank1"]
    spin_code = relocate(load_cubin(spin.cubin), CODE_BASE)
    wait_code = relocate(load_cubin(wait.cubin), CODE_BASE + 0x100_0000)
    grids = [
        Grid(1, spin.text_section[6:], spin_code.addresses[spin.text_section], 0xA1,
             grid_dim=(8, 1, 1), block_dim=(64, 1, 1)),
        Grid(2, wait.text_section[6:], wait_code.addresses[wait.text_section], 0xA2,
             grid_dim=(1, 1, 1), block_dim=(32, 1, 1)),
    ]
    spin_pc = spin_code.addresses[spin.text_section] + spin.offset
    wait_pc = wait_code.addresses[wait.text_section] + wait.offset
    sms = []
    for block in range(8):
        warps = [Warp(w, [Lane(ln, (32 * w + ln, 0, 0), pc=spin_pc + (0x10 if block % 4 == 3 else 0))
                          for ln in range(32)]) for w in range(2)]
        sms.append(SM(2 * block, [CTA(1, (block, 0, 0), warps)]))
    sms.append(SM(40, [CTA(2, (0, 0, 0), [Warp(0, [Lane(ln, (ln, 0, 0), pc=wait_pc) for ln in range(32)])])]))
    device = Device(contexts=[Context(0x1000, [Module(0xA1, spin_code.data), Module(0xA2, wait_code.data)])],
                    grids=grids, sms=sms)
    return Scenario(Spec([device], flags=47), None,
                    notes={"spin_pc": spin_pc, "wait_pc": wait_pc, "spin_marker": spin,
                           "wait_marker": wait})


def exited_warp() -> Scenario:
    """The SM saw the exception after its warp had exited: only the SM row remembers it."""
    base = fault()
    device = base.spec.devices[0]
    sm = device.sms[1]
    pc = base.planted.pc
    sm.ctas = []
    sm.exception, sm.error_pc = WARP_ILLEGAL_ADDRESS, pc
    return Scenario(base.spec, base.planted, notes={"pc": pc, "sm": sm.sm_id})


def device_function(debug_build: bool = False) -> Scenario:
    """The bad store is in a non-inlined device function: frame 0 is the callee, frame 1 the kernel."""
    cubin = "device_function.sm_90.G.cubin" if debug_build else "device_function.sm_90.cubin"
    scenario = fault(f"{cubin}:device-function", kernel="_Z12scatter_rowsPfPKii")
    device = scenario.spec.devices[0]
    code = relocate(load_cubin(cubin), CODE_BASE)
    kernel_text = code.addresses[".text._Z12scatter_rowsPfPKii"]
    return_pc = kernel_text + 0xC0
    for sm in device.sms:
        for cta in sm.ctas:
            for warp in cta.warps:
                for lane in warp.lanes:
                    if lane.exception:
                        lane.backtrace = [(0xC0, return_pc)]
    scenario.notes["return_pc"] = return_pc
    scenario.notes["kernel_text"] = kernel_text
    return scenario


def every_section_type() -> Scenario:
    """The fault scenario with at least one section of each of the 23 CUDBG types."""
    scenario = fault()
    spec = scenario.spec
    spec.global_memory = [(0x7F00_0000_0000, 1 << 20)]
    spec.managed_memory = [(0x7F80_0000_0000, 4096)]
    device = spec.devices[0]
    module = device.contexts[0].modules[0]
    module.unrelocated = load_cubin(scenario.planted.marker.cubin)
    cta = device.sms[1].ctas[0]
    cta.shared_memory = 48 * 1024
    victim = cta.warps[1]
    victim.cbu_bar = bytes(64)
    for lane in victim.lanes:
        lane.local_memory = 256
        lane.backtrace = [(0x40, device.grids[0].function_entry + 0x40)]
    return scenario


# -- the fault explained: planted kernels, registers from a forward run -----------
#: The architectures every planted case is built for (fixtures/kernels/build_cubins.sh, EXPLAINED).
EXPLAINED_ARCHS = ("sm_80", "sm_90", "sm_100")
EXPLAINED_DEVICES = {"sm_80": "NVIDIA A100-SXM4-80GB", "sm_90": "NVIDIA H100 80GB HBM3",
                     "sm_100": "NVIDIA B200"}
#: Chosen roots: three cudaMalloc'd buffers, the initial stack pointer (bank 0) and the global
#: memory descriptor the `desc[UR]` operands name (it is no part of an address).
BUFFER = 0x7F40_0000_0000
OTHER_BUFFER = 0x7F40_0010_0000
INDEX_BUFFER = 0x7F40_0020_0000
STACK_TOP = 0xFFFCC0
MEMORY_DESCRIPTOR = 0x10_0000_0000_0020
#: What a register the forward run never wrote holds in the dump (R0..R31 as UNWRITTEN + n).
UNWRITTEN = 0xBAD0_0000
#: The garbage expert id of the MoE story, read at the second trip through its loop.
MOE_GARBAGE_ID = 1999
#: moe_align.cu's shared memory: `__shared__ int counts[kNumExperts]`, 64 experts.
MOE_SHARED_BYTES = 64 * 4
#: local_overflow.cu's pick (its main() fills the picks with 0x40 bytes) and its array's length.
LOCAL_PICK = 0x40404040
LOCAL_SLOTS = 16
#: own_address.cu's index (its main() fills idx with 0x7f bytes, as tp_ranks.cu's route).
GARBAGE_INDEX = 0x7F7F7F7F
#: loop_store.cu's input (its main() fills in[] with 0x01 bytes).
LOOP_INPUT = 0x01010101
#: shared_pair.cu's index (its main() sets every index to 1 << 28).
STAGED_INDEX = 1 << 28


def local_frame() -> int:
    """Where pick_from_local's scratch[] starts: its frame is the array, below the stack top."""
    return STACK_TOP - LOCAL_SLOTS * 4


@dataclass(frozen=True)
class PlantedRoot:
    """One root of the faulting address: a parameter (ordinal), a special register ('blockIdx.x')
    or a value a load read (from parameter ``param_ordinal`` at ``element``); ``value`` is what
    it held for the shown lane."""

    kind: str
    value: int
    param_ordinal: int | None = None
    name: str | None = None
    element: int | None = None


@dataclass(frozen=True)
class PlantedTruth:
    """What the source says the faulting access was, for the shown lane."""

    case: str
    arch: str
    kernel: str
    access: str
    space: str
    address: int
    access_bytes: int
    verdict: str
    roots: tuple[PlantedRoot, ...]
    #: registers of the shown lane the forward run never wrote (they hold UNWRITTEN + n)
    never_written: tuple[int, ...] = ()
    #: the address as the .cu source computes it (the emulator's must equal it)
    source_address: int = 0
    #: whether the dumped registers still give the address (not where the lanes stand past a
    #: faulting load that wrote its own address register)
    address_in_registers: bool = True


@dataclass(frozen=True)
class _Recipe:
    """How one planted case is launched and what its source says about the shown lane."""

    program: str
    tag: str
    params: tuple[int, ...]
    grid_dim: tuple[int, int, int]
    block_dim: tuple[int, int, int]
    block_idx: tuple[int, int, int]
    warp: int
    exception: int
    access: str
    space: str
    access_bytes: int
    verdict: str
    visit: int = 1
    global_memory: tuple[tuple[int, int], ...] = ()
    #: a warp row with sharedMemSize (48 bytes); otherwise the 40-byte rows of drivers before it
    shared_mem_size: int | None = None
    #: a cluster launch (sm_90+): the CTA's rank in it lands in bits 24+ of shared addresses
    cluster_dim: tuple[int, int, int] = (0, 0, 0)
    archs: tuple[str, ...] = EXPLAINED_ARCHS
    #: the lanes stand one instruction past the faulting one, its destination words reading 0:
    #: how the H200 dumped tp_ranks.cu's lanes (fixtures/gpu/h200/tp_ranks.explain: R0 reads 0
    #: after the faulting LDG.E R0, where the code had left threadIdx.x 0xc0)
    past_fault: bool = False

    @property
    def cta_rank(self) -> int:
        return self.block_idx[0] % self.cluster_dim[0] if self.cluster_dim[0] else 0


def _recipes() -> dict[str, _Recipe]:
    """The planted cases; the launch of each is its .cu file's main()."""
    return {
        # write_past_end<<<4, 256>>>(data, 1024): block 1, thread 32, idx 288. The dump holds
        # the 4 KiB allocation as a global segment and the store lands 1.1 GiB past it; a dump
        # has no allocation table (the driver writes none), so even outside every
        # segment it holds no bound is asserted
        "global-store": _Recipe("illegal_address", "illegal-address", (BUFFER, 1024), (4, 1, 1),
                                (256, 1, 1), (1, 0, 0), 1, WARP_ILLEGAL_ADDRESS, "store", "global",
                                4, "undetermined", global_memory=((BUFFER, 4096),)),
        # ... and with no global memory in the dump (skip_global_memory)
        "global-store-undumped": _Recipe("illegal_address", "illegal-address", (BUFFER, 1024),
                                         (4, 1, 1), (256, 1, 1), (1, 0, 0), 1,
                                         WARP_ILLEGAL_ADDRESS, "store", "global", 4,
                                         "undetermined"),
        # pick_from_local<<<1, 64>>>(picks, out, 7), every pick 0x40404040
        "local-overflow": _Recipe("local_overflow", "local-overflow", (BUFFER, OTHER_BUFFER, 7),
                                  (1, 1, 1), (64, 1, 1), (0, 0, 0), 1, WARP_OUT_OF_RANGE_ADDRESS,
                                  "load", "local", 4, "out-of-bounds"),
        # spread_dynamic_shared<<<1, 64, 256>>>(out, 4096)
        "dynamic-shared": _Recipe("dynamic_shared", "dynamic-shared", (BUFFER, 4096), (1, 1, 1),
                                  (64, 1, 1), (0, 0, 0), 1, WARP_OUT_OF_RANGE_ADDRESS, "store",
                                  "shared", 4, "undetermined"),
        # ... with the warp row's sharedMemSize (r570+) holding the launch's 256 dynamic bytes;
        # whether a driver counts sm_90's 1 KiB reserve in it is unverified: the address is past
        # either reading
        "dynamic-shared-recorded": _Recipe("dynamic_shared", "dynamic-shared", (BUFFER, 4096),
                                           (1, 1, 1), (64, 1, 1), (0, 0, 0), 1,
                                           WARP_OUT_OF_RANGE_ADDRESS, "store", "shared", 4,
                                           "out-of-bounds", shared_mem_size=64 * 4),
        # scale_rows<<<1, 64>>>(nullptr, out, 64)
        "null-argument": _Recipe("null_argument", "null-argument", (0, BUFFER, 64), (1, 1, 1),
                                 (64, 1, 1), (0, 0, 0), 1, WARP_ILLEGAL_ADDRESS, "load", "global",
                                 4, "null"),
        # fill_counts<<<1, 32>>>(bytes + 2, 7)
        "misaligned-argument": _Recipe("misaligned_argument", "misaligned-argument",
                                       (BUFFER + 2, 7), (1, 1, 1), (32, 1, 1), (0, 0, 0), 0,
                                       WARP_MISALIGNED_ADDRESS, "store", "global", 4,
                                       "misaligned"),
        # moe_align_block_size<<<1, 256>>>(topk_ids, counts, 512 * 2): warp 2 (threads 64..95)
        # skips the zeroing loop (64 experts) and faults on its second trip, element tid + 256.
        # The warp row records the block's shared memory (r570+): the 0x100 bytes of counts[],
        # no dynamic shared memory; without it a dump cannot rule out dynamic shared memory
        # past the static array (then: undetermined, as for dynamic-shared)
        "moe": _Recipe("moe_align", "shared-out-of-range", (BUFFER, OTHER_BUFFER, 1024),
                       (1, 1, 1), (256, 1, 1), (0, 0, 0), 2, WARP_OUT_OF_RANGE_ADDRESS, "atomic",
                       "shared", 4, "out-of-bounds", visit=2, shared_mem_size=MOE_SHARED_BYTES),
        # the same, launched in clusters of 2 (block 1: rank 1), on the architectures with them
        "moe-cluster": _Recipe("moe_align", "shared-out-of-range", (BUFFER, OTHER_BUFFER, 1024),
                               (2, 1, 1), (256, 1, 1), (1, 0, 0), 2, WARP_OUT_OF_RANGE_ADDRESS,
                               "atomic", "shared", 4, "out-of-bounds", visit=2,
                               shared_mem_size=MOE_SHARED_BYTES, cluster_dim=(2, 1, 1),
                               archs=("sm_90", "sm_100")),
        # the slicer's cases. gather_column<<<4, 256>>>(table, out, 16, 1000000):
        # block 1, thread 32, i = 288, the garbage column the second of two adjacent ints
        "param-pair": _Recipe("param_pair", "param-pair", (BUFFER, OTHER_BUFFER, 16, 1000000),
                              (4, 1, 1), (256, 1, 1), (1, 0, 0), 1, WARP_ILLEGAL_ADDRESS, "load",
                              "global", 4, "undetermined"),
        # reduce_rows<<<1, 64>>>(out, in, 256, 1 << 20): the row pointer out + i * stride is made
        # before the loop, which moves i and the input pointer 7 times for thread 32
        "loop-store": _Recipe("loop_store", "loop-store", (BUFFER, OTHER_BUFFER, 256, 1 << 20),
                              (1, 1, 1), (64, 1, 1), (0, 0, 0), 1, WARP_ILLEGAL_ADDRESS, "store",
                              "global", 4, "undetermined"),
        # scatter_staged<<<4, 256>>>(out, index, 1024): block 1, thread 32 stores through the
        # pointer out + index[288] it staged in shared memory (STS.64, LDS.64); the lanes stand
        # past the store, as Triton's did on the H200 (fixtures/gpu/h200/triton_oob.explain)
        "shared-pair": _Recipe("shared_pair", "shared-pair", (BUFFER, OTHER_BUFFER, 1024),
                               (4, 1, 1), (256, 1, 1), (1, 0, 0), 1, WARP_ILLEGAL_ADDRESS, "store",
                               "global", 4, "undetermined", past_fault=True),
        # lookup_rows<<<4, 256>>>(out, data, idx, 1024): block 1, thread 32 reads data[idx[288]]
        # with LDG.E R4, [R4.64]; past it, R4 no longer holds the address
        "own-address": _Recipe("own_address", "own-address",
                               (BUFFER, OTHER_BUFFER, INDEX_BUFFER, 1024), (4, 1, 1),
                               (256, 1, 1), (1, 0, 0), 1, WARP_ILLEGAL_ADDRESS, "load", "global",
                               4, "undetermined", past_fault=True),
    }


#: Every (case, architecture) a planted scenario exists for.
EXPLAINED = tuple((case, arch) for case, recipe in _recipes().items() for arch in recipe.archs)
_MARKED_LANES = (0, 1, 2, 3)


def _shared_base(arch: str, recipe: _Recipe) -> int:
    """Where a kernel's shared arrays start in its window: after the 1 KiB the system reserves on
    sm_90+, with the CTA's rank in its cluster in bits 24+."""
    return 0 if arch == "sm_80" else recipe.cta_rank << 24 | 0x400


def _source_truth(case: str, arch: str, recipe: _Recipe, tid: int) -> tuple[int, tuple[PlantedRoot, ...]]:
    """The shown lane's faulting address and its roots, as the .cu source computes them."""
    params = recipe.params
    tid_root = PlantedRoot("special", tid, name="threadIdx.x")
    param0 = PlantedRoot("param", params[0], param_ordinal=0)
    if recipe.program == "illegal_address":
        idx = recipe.block_idx[0] * recipe.block_dim[0] + tid
        return params[0] + idx * 1024 * 1024 * 4, (
            param0, PlantedRoot("special", recipe.block_idx[0], name="blockIdx.x"),
            PlantedRoot("special", recipe.block_dim[0], name="blockDim.x"), tid_root)
    if recipe.program == "local_overflow":
        return (local_frame() + LOCAL_PICK * 4) & 0xFFFF_FFFF, (
            PlantedRoot("load", LOCAL_PICK, param_ordinal=0, element=tid),)
    if recipe.program == "dynamic_shared":
        return _shared_base(arch, recipe) + tid * params[1] * 4, (
            PlantedRoot("param", params[1], param_ordinal=1), tid_root)
    if recipe.program in ("null_argument", "misaligned_argument"):
        return params[0] + tid * 4, (param0, tid_root)
    i = recipe.block_idx[0] * recipe.block_dim[0] + tid
    if recipe.program == "param_pair":  # table[i * width + column]
        return params[0] + 4 * _int32(i * params[2] + params[3]), (
            param0, PlantedRoot("param", params[2], param_ordinal=2),
            PlantedRoot("param", params[3], param_ordinal=3), tid_root)
    if recipe.program == "loop_store":  # out + i * stride, made before the loop
        return params[0] + 4 * _int32(i * params[3]), (
            param0, PlantedRoot("param", params[3], param_ordinal=3), tid_root)
    if recipe.program == "shared_pair":  # out + index[i], read back from shared memory
        staged = params[0] + 4 * STAGED_INDEX
        return staged, (PlantedRoot("load", staged),)
    if recipe.program == "own_address":  # data[idx[i]]
        return params[1] + 4 * GARBAGE_INDEX, (
            PlantedRoot("param", params[1], param_ordinal=1),
            PlantedRoot("load", GARBAGE_INDEX, param_ordinal=2, element=i))
    element = tid + recipe.block_dim[0] * (recipe.visit - 1)
    return _shared_base(arch, recipe) + MOE_GARBAGE_ID * 4, (
        PlantedRoot("load", MOE_GARBAGE_ID, param_ordinal=0, element=element),)


def _int32(value: int) -> int:
    """An int's arithmetic as the kernel does it: 32 bits, two's complement."""
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value >> 31 else value


def _chosen_memory(recipe: _Recipe, tids: range) -> dict[int, int]:
    """What the faulting warp's loads read: every pick LOCAL_PICK (local_overflow); the
    programs' garbage indices (own_address, shared_pair) and loop_store's input as their main()
    fills them; topk_ids as the gate kernel left it (moe_align): valid ids on the first trip,
    the garbage id on the second for the marked lanes."""
    params, first = recipe.params, recipe.block_idx[0] * recipe.block_dim[0]
    if recipe.program == "local_overflow":
        return {BUFFER + 4 * tid: LOCAL_PICK for tid in tids}
    if recipe.program == "own_address":
        return {params[2] + 4 * (first + tid): GARBAGE_INDEX for tid in tids}
    if recipe.program == "shared_pair":
        return {params[1] + 4 * (first + tid): STAGED_INDEX for tid in tids}
    if recipe.program == "loop_store":
        return {params[1] + 4 * k: LOOP_INPUT for k in range(params[2])}
    if recipe.program != "moe_align":
        return {}
    memory = {}
    for lane, tid in enumerate(tids):
        memory[BUFFER + 4 * tid] = tid % 64
        garbage = lane in _MARKED_LANES
        memory[BUFFER + 4 * (tid + recipe.block_dim[0])] = MOE_GARBAGE_ID if garbage else tid % 64
    return memory


def _param_bytes(cubin: bytes, kernel: str, values: tuple[int, ...]) -> tuple[bytes, int]:
    """The parameter buffer with ``values`` at the offsets and sizes the cubin gives, and where
    the parameter area starts in bank 0."""
    from crashlab.cubin import Cubin
    from crashlab.cubin.nvinfo import kernel_param_layout

    layout, why = kernel_param_layout(Cubin(cubin), kernel)
    if layout is None or layout.cbank_offset is None:
        raise ValueError(f"{kernel}: no parameter layout ({why})")
    buffer = bytearray(max(p.offset + p.size for p in layout.params))
    for param, value in zip(layout.params, values, strict=True):
        buffer[param.offset:param.offset + param.size] = (value % (1 << 8 * param.size)).to_bytes(
            param.size, "little")
    return bytes(buffer), layout.cbank_offset


def _contradict(registers: list[int], stopped, written: tuple[int, ...]) -> None:
    """Move by 0x1000 a register the faulting address is computed from: the faulting operand's
    first register the lane has not overwritten past the fault, or, where a load wrote it (no
    code contradicts a loaded value), the first register of that load's address. A dump whose
    registers the code cannot have computed from any root."""
    from .sass_emulator import address_registers, load_destination

    moved = next(r for r in address_registers(stopped.instruction) if r not in written)
    writer = stopped.writers.get(moved)
    if writer is not None and load_destination(writer):
        moved = address_registers(writer)[0]
    registers[moved] = (registers[moved] + 0x1000) & 0xFFFF_FFFF


def explained(case: str, arch: str, *, contradicted: bool = False) -> Scenario:
    """A planted fault (fixtures/kernels) as the driver would dump it: the faulting warp's lanes
    hold the registers tests/sass_emulator.py computes from the chosen roots, run forward from
    the kernel's entry to the FAULT marker; the parameter buffer holds the roots. Returns the
    scenario with notes["truth"], the PlantedTruth from the .cu source (and the shown lane's
    forward run: notes["stopped"], its "listing" and "launch"). ``contradicted``: the
    faulting lanes' address register is moved off what the code computes (trust: mismatch)."""
    from .sass_emulator import Launch, address_registers, function_listing, load_destination, run_to

    recipe = _recipes()[case]
    marker = markers()[f"{recipe.program}.{arch}.cubin:{recipe.tag}"]
    kernel = marker.function
    cubin = load_cubin(marker.cubin)
    params, bank_offset = _param_bytes(cubin, kernel, recipe.params)
    listing = function_listing(str(CUBINS / marker.cubin), kernel)
    tids = range(32 * recipe.warp, 32 * recipe.warp + 32)
    memory = _chosen_memory(recipe, tids)
    launches = [Launch(arch, params, bank_offset, (tid, 0, 0), recipe.block_idx, recipe.block_dim,
                       recipe.grid_dim, STACK_TOP, MEMORY_DESCRIPTOR, recipe.cta_rank, memory)
                for tid in tids]
    stops = [run_to(listing, launch, marker.function_offset, visit=recipe.visit)
             for launch in launches]
    uniform = stops[0].uniform_registers
    if any(s.uniform_registers != uniform for s in stops):
        raise ValueError(f"{case} {arch}: lanes disagree on uniform registers")
    code = relocate(cubin, CODE_BASE)
    entry = code.addresses[f".text.{kernel}"]
    pc = entry + marker.function_offset
    lanes = [Lane(ln, (tid, 0, 0), pc=pc + 16 if recipe.past_fault else pc,
                  exception=recipe.exception if ln in _MARKED_LANES else 0,
                  registers=s.register_list(REGISTERS_PER_LANE, UNWRITTEN),
                  predicates=s.predicate_list())
             for ln, (tid, s) in enumerate(zip(tids, stops, strict=True))]
    written = load_destination(stops[0].instruction) if recipe.past_fault else ()
    for lane in lanes:
        for register in written:
            lane.registers[register] = 0
    if contradicted:
        for ln in _MARKED_LANES:
            _contradict(lanes[ln].registers, stops[ln], written)
    warp = Warp(recipe.warp, lanes, error_pc=pc, broken=1, shared_mem_size=recipe.shared_mem_size or 0,
                uniform_registers=[uniform.get(u, UNWRITTEN + u) for u in range(63)],
                uniform_predicates=[0] * 7)
    grid = Grid(7, kernel, entry, 0x5550_0000, grid_dim=recipe.grid_dim, block_dim=recipe.block_dim,
                cluster_dim=recipe.cluster_dim, params=params)
    cluster_idx = (recipe.block_idx[0] // recipe.cluster_dim[0], 0, 0) if recipe.cta_rank else (0, 0, 0)
    cta = CTA(7, recipe.block_idx, [warp], cluster_idx=cluster_idx, cluster_dim=recipe.cluster_dim)
    sm = SM(3, [cta], exception=recipe.exception, error_pc=pc)
    device = Device(name=EXPLAINED_DEVICES[arch], sm_type=arch, sms=[sm], grids=[grid],
                    contexts=[Context(0x1000, [Module(0x5550_0000, code.data)])])
    rows = {} if recipe.shared_mem_size is not None else {"warp": 40}
    spec = Spec([device], rows=rows, global_memory=list(recipe.global_memory))
    shown = stops[0]
    address, roots = _source_truth(case, arch, recipe, tids[0])
    truth = PlantedTruth(case, arch, kernel, recipe.access, recipe.space, shown.address,
                         recipe.access_bytes, recipe.verdict, roots,
                         tuple(shown.never_written(REGISTERS_PER_LANE)), source_address=address,
                         address_in_registers=not set(written) & set(
                             address_registers(shown.instruction)))
    planted = Planted(exception=recipe.exception, device=0, sm=3, warp=recipe.warp, lane=0,
                      block_idx=recipe.block_idx, thread_idx=(tids[0], 0, 0), grid_id=7,
                      kernel=kernel, pc=pc, function_offset=marker.function_offset, marker=marker,
                      registers=lanes[0].registers, faulting_lanes=len(_MARKED_LANES))
    return Scenario(spec, planted, notes={"truth": truth, "stopped": shown, "listing": listing,
                                          "launch": launches[0]})
# -- hangs explained: warps whose registers follow the SASS ----------------------
#: Where the hang scenarios' buffers lie: chosen roots, the registers are computed from them.
HANG_FLAG = 0x7F12_3400_0000
HANG_PROGRESS = 0x7F12_3400_0100
PEER_SIGNAL = 0x7F22_0000_0000
PEER_TABLE = 0x7F22_0000_1000
PEER_DATA = 0x7F22_0001_0000


def source_numbers(source: str, pattern: str) -> tuple[int, ...]:
    """Numbers a kernel's host code fixes (``const int n = 960;``, ``<<<4, 256>>>``), read
    from the .cu file in fixtures/kernels."""
    text = (Path(__file__).resolve().parent.parent / "fixtures" / "kernels" / source).read_text()
    return tuple(int(v) for v in re.search(pattern, text).groups())


def _words64(*values: int) -> list[int]:
    return [w for v in values for w in (v & 0xFFFFFFFF, v >> 32)]


def _registers(**named: int) -> list[int]:
    """A lane's R0..R31 with the named ones set (``R6=...``), the rest 0."""
    registers = [0] * 32
    for name, value in named.items():
        registers[int(name[1:])] = value & 0xFFFFFFFF
    return registers


def barrier_after_exit(kernel_name: str | None = None) -> Scenario:
    """fixtures/kernels/barrier_exit.cu as launched by its main: the tail block keeps the warps
    whose threads are below n at the named barrier, the rest returned early; blocks before it
    passed the barrier and finished. With it, hang.cu's kernel with every warp inside its
    polling loop (the registers the SASS gives: R6.64 = param 0, the flag). ``kernel_name``
    replaces the barrier kernel's name in the grid table (hostile-name tests)."""
    bar = markers()["barrier_exit.sm_90.cubin:barrier"]
    (n,) = source_numbers("barrier_exit.cu", r"const int n = (\d+);")
    blocks, threads = source_numbers("barrier_exit.cu", r"reverse_tile<<<(\d+), (\d+)>>>")
    code = relocate(load_cubin(bar.cubin), CODE_BASE)
    entry = code.addresses[bar.text_section]
    bar_pc = entry + bar.offset
    tail = blocks - 1
    resident = -(-(n - tail * threads) // 32)
    warps = [Warp(w, [Lane(ln, (32 * w + ln, 0, 0), pc=bar_pc,
                           registers=_registers(R5=tail * threads + 32 * w + ln, R6=32 * w + ln,
                                                R11=threads))
                      for ln in range(32)]) for w in range(resident)]
    grid = Grid(3, kernel_name or bar.text_section[6:], entry, 0xB1, grid_dim=(blocks, 1, 1),
                block_dim=(threads, 1, 1), params=bytes(16) + n.to_bytes(4, "little"))
    spin, spin_grid, spin_sms, spin_module = _spinning_flag(grid_id=4, first_sm=20)
    device = Device(contexts=[Context(0x1000, [Module(0xB1, code.data), spin_module])],
                    grids=[grid, spin_grid], sms=[SM(5, [CTA(3, (tail, 0, 0), warps)]), *spin_sms])
    return Scenario(Spec([device], flags=47), None, notes={
        "bar_pc": bar_pc, "marker": bar, "resident": resident, "exited": threads // 32 - resident,
        "block": (tail, 0, 0), **spin})


def _spinning_flag(grid_id: int, first_sm: int):
    """hang.cu's wait_for_flag, 8 blocks of 64 threads, its warps at the loop's load, compare
    and back edge; R6.64 holds the flag pointer (LDC.64 R6, c[0x0][0x210]), R2.64 the progress
    counter (c[0x0][0x218]), R0 the flag's value read (0)."""
    load = markers()["hang.sm_90.cubin:spin"]
    code = relocate(load_cubin(load.cubin), CODE_BASE + 0x100_0000)
    entry = code.addresses[load.text_section]
    in_loop = [entry + 0xD0, entry + 0xE0, entry + 0xF0]  # LDG, ISETP, @!P0 BRA: see hang.cu's SASS
    grid = Grid(grid_id, load.text_section[6:], entry, 0xB2, grid_dim=(8, 1, 1),
                block_dim=(64, 1, 1), params=HANG_FLAG.to_bytes(8, "little")
                + HANG_PROGRESS.to_bytes(8, "little"))
    flag, progress = _words64(HANG_FLAG), _words64(HANG_PROGRESS)
    sms = []
    for block in range(8):
        warps = [Warp(w, [Lane(ln, (32 * w + ln, 0, 0), pc=in_loop[(block + w) % 3],
                               registers=_registers(R0=0, R2=progress[0], R3=progress[1],
                                                    R6=flag[0], R7=flag[1]))
                          for ln in range(32)]) for w in range(2)]
        sms.append(SM(first_sm + block, [CTA(grid_id, (block, 0, 0), warps)]))
    notes = {"spin_pcs": in_loop, "spin_entry": entry, "flag": HANG_FLAG, "spin_warps": 16, "spin_marker": load}
    return notes, grid, sms, Module(0xB2, code.data)


def peer_wait() -> Scenario:
    """fixtures/kernels/custom_allreduce.cu's cross_device_reduce_1stage<2> run as one rank of
    two: in each of 4 blocks, lanes 0 and 1 of warp 0 spin on their slot of this rank's signal
    (the rest of that warp waits for them to converge), warps 1 to 3 wait at __syncthreads. The
    polling lanes' registers follow the SASS: R8.64 = self_sg + blockIdx.x*0x20 + threadIdx.x*4
    (IMAD.WIDE.U32 at +0xd0 and +0xe0), R15 = flag, R14 = rank, R0 = the slot's value read."""
    wait = markers()["custom_allreduce.sm_90.cubin:peer-wait"]
    rest = markers()["custom_allreduce.sm_90.cubin:peer-wait-rest"]
    code = relocate(load_cubin(wait.cubin), CODE_BASE)
    entry = code.addresses[wait.text_section]
    rank, flag, blocks, threads = 1, 1, 4, 128
    params = (PEER_SIGNAL.to_bytes(8, "little") + PEER_TABLE.to_bytes(8, "little")
              + PEER_DATA.to_bytes(8, "little") + rank.to_bytes(4, "little") + flag.to_bytes(4, "little"))
    grid = Grid(5, wait.text_section[6:], entry, 0xC1, grid_dim=(blocks, 1, 1),
                block_dim=(threads, 1, 1), params=params)
    sms, polled = [], {}
    for block in range(blocks):
        spinning = []
        for ln in range(32):
            slot = PEER_SIGNAL + block * 0x20 + ln * 4
            registers = _registers(R0=0, R8=slot, R9=slot >> 32, R10=block, R11=ln, R13=block,
                                   R14=rank, R15=flag)
            spinning.append(Lane(ln, (ln, 0, 0), pc=entry + wait.offset if ln < 2 else entry + 0x160,
                                 registers=registers))
            if ln < 2:
                polled[(block, ln)] = slot
        warps = [Warp(0, spinning, active_mask=0b11)]
        warps += [Warp(w, [Lane(ln, (32 * w + ln, 0, 0), pc=entry + rest.offset) for ln in range(32)])
                  for w in range(1, threads // 32)]
        sms.append(SM(30 + block, [CTA(5, (block, 0, 0), warps)]))
    device = Device(contexts=[Context(0x1000, [Module(0xC1, code.data)])], grids=[grid], sms=sms)
    return Scenario(Spec([device], flags=47), None, notes={
        "polled": polled, "wait_pc": entry + wait.offset, "rest_pc": entry + rest.offset,
        "blocks": blocks, "warps_per_block": threads // 32})
