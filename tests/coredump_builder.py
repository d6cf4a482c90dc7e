"""SYNTHETIC CUDA coredump builder, for tests and benchmarks (no GPU involved).

Everything this module writes is synthetic: struct-packed ELF files laid out after the public
format description (cudacoredump.h, the header NVIDIA ships with cuda-gdb's source),
not dumps a driver wrote. It keeps its own row layouts, spelled with the header's field names,
so that it does not share a mistake with crashlab's reader. The code it embeds is real: cubins
built by nvcc from fixtures/kernels/*.cu (fixtures/cubins/), relocated to a GPU address here the
way the driver's relocated images are (section sh_addr and symbol values made absolute).

A dump is described top-down (devices > SMs > CTAs > warps > lanes, plus grids and modules) and
written in one streaming pass, so that benchmarks can make dumps of a million sections and
sparse gigabytes of "global memory" quickly.

What it writes is shaped like a driver's dump, because NVIDIA's reader (cuda-gdb 12.4's
libcudacore, which tests/test_real_cuda_gdb.py runs on every scenario) refuses or misreads
other shapes: every SM of a device has a row, every lane a register section, backtrace rows
are numbered from level 0 up to the lane's callDepth, a grid names a context of its own device
and is ACTIVE, and no two modules share a handle (see ``write``).
"""

from __future__ import annotations

import gzip
import json
import shutil
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CUBINS = ROOT / "fixtures" / "cubins"
SYNTHETIC_LABEL = "crashlab synthetic coredump (tests/coredump_builder.py): not written by a driver"

SHT_LOUSER = 0x80000000
SHT = {
    name: SHT_LOUSER + number
    for number, name in enumerate(
        "MANAGED_MEM GLOBAL_MEM LOCAL_MEM SHARED_MEM DEV_REGS ELF_IMG RELF_IMG BT DEV_TABLE "
        "CTX_TABLE SM_TABLE GRID_TABLE CTA_TABLE WP_TABLE LN_TABLE MOD_TABLE DEV_PRED PARAM_MEM "
        "DEV_UREGS DEV_UPRED CB_TABLE META_DATA CBU_BAR".split(),
        start=1,
    )
}

# Row layouts as "field:code@offset", in cudacoredump.h's own names; one entry per generation
# (the row size a driver release wrote), each adding fields to the previous one.
_ROWS = {
    "dev": {
        72: "devName:Q@0 devType:Q@8 smType:Q@16 devId:I@24 pciBusId:I@28 pciDevId:I@32 "
            "numSMs:I@36 numWarpsPerSM:I@40 numLanesPerWarp:I@44 numRegsPerLane:I@48 "
            "numPredicatesPrLane:I@52 smMajor:I@56 smMinor:I@60 instructionSize:I@64 status:I@68",
        80: "numUniformRegsPrWarp:I@72 numUniformPredicatesPrWarp:I@76",
        88: "numConvergenceBarriersPrWarp:I@80",
    },
    "ctx": {40: "contextId:Q@0 sharedWindowBase:Q@8 localWindowBase:Q@16 globalWindowBase:Q@24 "
                "deviceIdx:I@32 tid:I@36"},
    "mod": {8: "moduleHandle:Q@0"},
    "grid": {
        104: "gridId64:Q@0 contextId:Q@8 function:Q@16 functionEntry:Q@24 moduleHandle:Q@32 "
             "parentGridId64:Q@40 paramsOffset:Q@48 kernelType:I@56 origin:I@60 gridStatus:I@64 "
             "numRegs:I@68 gridDimX:I@72 gridDimY:I@76 gridDimZ:I@80 blockDimX:I@84 "
             "blockDimY:I@88 blockDimZ:I@92 attrLaunchBlocking:I@96 attrHostTid:I@100",
        120: "clusterDimX:I@104 clusterDimY:I@108 clusterDimZ:I@112",
        136: "preferredClusterDimX:I@120 preferredClusterDimY:I@124 preferredClusterDimZ:I@128",
    },
    "cb": {16: "addr:Q@0 size:I@8 bankId:I@12"},
    "sm": {
        8: "smId:I@0",
        24: "exception:I@8 errorPCValid:I@12 errorPC:Q@16",
        40: "clusterExceptionTargetBlockIdxValid:I@24 clusterExceptionTargetBlockIdxX:I@28 "
            "clusterExceptionTargetBlockIdxY:I@32 clusterExceptionTargetBlockIdxZ:I@36",
        48: "exceptionString:Q@40",
    },
    "cta": {
        24: "gridId64:Q@0 blockIdxX:I@8 blockIdxY:I@12 blockIdxZ:I@16",
        40: "clusterIdxX:I@24 clusterIdxY:I@28 clusterIdxZ:I@32",
        56: "clusterDimX:I@40 clusterDimY:I@44 clusterDimZ:I@48",
    },
    "warp": {
        32: "errorPC:Q@0 warpId:I@8 validLanesMask:I@12 activeLanesMask:I@16 isWarpBroken:I@20 "
            "errorPCValid:I@24",
        40: "numRegs:I@32",
        48: "sharedMemSize:I@40",
        64: "inSyscallLanesMask:I@48 cbuActiveLanesMask:I@52 cbuExitedLanesMask:I@56 "
            "cbuCollectiveLanesMask:I@60",
        80: "barrierScope:I@64 additionalBarrierInfo:Q@72",
    },
    "lane": {
        48: "virtualPC:Q@0 physPC:Q@8 ln:I@16 threadIdxX:I@20 threadIdxY:I@24 threadIdxZ:I@28 "
            "exception:I@32 callDepth:I@36 syscallCallDepth:I@40 ccRegister:I@44",
        56: "cbuThreadState:I@48",
        64: "rpcLo:I@56 rpcHi:I@60",
    },
    "bt": {24: "returnAddress:Q@0 virtualReturnAddress:Q@8 level:I@16"},
    "meta": {32: "generatorName:Q@0 driverVersionMajor:I@8 driverVersionMinor:I@12 "
                 "cudaDriverVersionMajor:I@16 cudaDriverVersionMinor:I@20 flags:I@24 timestamp:I@28"},
}


def _layout(table: str, size: int) -> dict[str, tuple[str, int]]:
    fields = {}
    for generation, spec in _ROWS[table].items():
        if generation <= size:
            for item in spec.split():
                name, rest = item.split(":")
                code, offset = rest.split("@")
                fields[name] = (code, int(offset))
    return fields


def pack_row(table: str, row_size: int, /, **values) -> bytes:
    """One row of ``row_size`` bytes; fields the generation lacks are refused, others are 0."""
    layout = _layout(table, row_size)
    row = bytearray(row_size)
    for name, value in values.items():
        if name not in layout:
            raise KeyError(f"{table} rows of {row_size} bytes have no field {name}")
        code, offset = layout[name]
        struct.pack_into("<" + code, row, offset, value)
    return bytes(row)


ROW_GENERATIONS = {table: tuple(sizes) for table, sizes in _ROWS.items()}
NEWEST = {table: sizes[-1] for table, sizes in ROW_GENERATIONS.items()}
OLDEST = {table: sizes[0] for table, sizes in ROW_GENERATIONS.items()}


# -- real cubins, relocated -------------------------------------------------------------------
@dataclass(frozen=True)
class Marker:
    """An instruction a FAULT/HANG comment in fixtures/kernels names (fixtures/cubins/index.json)."""

    cubin: str
    source: str
    line: int
    kind: str
    tag: str
    text_section: str
    offset: int
    instruction: str
    chain: tuple[str, ...]
    #: the function symbol holding the instruction, and the instruction's offset into it
    function: str
    function_offset: int


def markers() -> dict[str, Marker]:
    entries = json.loads((CUBINS / "index.json").read_text())
    return {f"{e['cubin']}:{e['tag']}": Marker(**{**e, "chain": tuple(e["chain"])}) for e in entries}


@dataclass
class RelocatedCubin:
    data: bytes
    #: GPU address of every allocated section, by name
    addresses: dict[str, int]

    def text(self, function: str) -> int:
        return self.addresses[".text." + function]


def relocate(cubin: bytes, base: int, *, absolute_symbols: bool = True) -> RelocatedCubin:
    """Give every allocated section of ``cubin`` a GPU address from ``base`` on, as the driver's
    relocated image has; symbol values become absolute unless ``absolute_symbols`` is False."""
    image = bytearray(cubin)
    shoff = struct.unpack_from("<Q", image, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name_of(offset):
        end = image.index(b"\0", names_at + offset)
        return image[names_at + offset:end].decode()

    addresses, by_index = {}, {}
    cursor = base
    for index, (name, _kind, flags, _addr, _off, size, _l, _i, align, _e) in enumerate(headers):
        if flags & 0x2 and size:  # SHF_ALLOC
            align = max(align, 1)
            cursor = (cursor + align - 1) // align * align
            struct.pack_into("<Q", image, shoff + index * shentsize + 16, cursor)
            addresses[name_of(name)] = by_index[index] = cursor
            cursor += size
    if absolute_symbols:
        for header in headers:
            if header[1] != 2:  # SHT_SYMTAB
                continue
            offset, size, entsize = header[4], header[5], header[9]
            for at in range(offset, offset + size, entsize):
                shndx = struct.unpack_from("<H", image, at + 6)[0]
                if shndx in by_index:
                    value = struct.unpack_from("<Q", image, at + 8)[0]
                    struct.pack_into("<Q", image, at + 8, value + by_index[shndx])
    return RelocatedCubin(bytes(image), addresses)


def load_cubin(name: str) -> bytes:
    return (CUBINS / name).read_bytes()


# -- the dump's description ------------------------------------------------------------------
#: Registers a warp has (its row's numRegs, the grid's numRegs): what a lane's register section holds.
REGISTERS_PER_LANE = 32
#: CUDBGGridStatus ACTIVE, a running grid's; cuda-gdb's `info cuda kernels` lists only ACTIVE (2) and
#: SLEEPING (3) grids, not PENDING (1) ones.
GRID_ACTIVE = 2


@dataclass
class Lane:
    ln: int
    thread_idx: tuple[int, int, int]
    pc: int = 0
    exception: int = 0
    #: R0.. as the register section holds them; a driver writes one for every valid lane, and
    #: cuda-gdb refuses a dump whose focus lane has none ("read_register_range ... INVALID_ARGS")
    registers: list[int] = field(default_factory=lambda: [0] * REGISTERS_PER_LANE)
    predicates: list[int] | None = None
    #: (returnAddress, virtualReturnAddress) of each caller, innermost first: written as backtrace
    #: rows of level 0, 1, ... and the lane's callDepth is their count (cuda-gdb's frame #1 is
    #: level 0; it reads levels 0..callDepth-1 and fails on a missing one)
    backtrace: list[tuple[int, int]] = field(default_factory=list)
    local_memory: int = 0  # bytes of (zero) local memory; 0 = no section


@dataclass
class Warp:
    warp_id: int
    lanes: list[Lane]
    error_pc: int | None = None
    error_pc_valid: bool | None = None  # default: error_pc is not None
    active_mask: int | None = None  # default: the listed lanes
    broken: int = 0
    uniform_registers: list[int] | None = None
    uniform_predicates: list[int] | None = None
    cbu_bar: bytes | None = None
    #: sharedMemSize (rows of 48 bytes and more, driver r570+); 0 as the builder wrote before
    shared_mem_size: int = 0


@dataclass
class CTA:
    grid_id: int
    block_idx: tuple[int, int, int]
    warps: list[Warp]
    cluster_idx: tuple[int, int, int] = (0, 0, 0)
    cluster_dim: tuple[int, int, int] = (0, 0, 0)
    shared_memory: int = 0


@dataclass
class SM:
    sm_id: int
    ctas: list[CTA] = field(default_factory=list)
    exception: int = 0
    error_pc: int | None = None
    cluster_target: tuple[int, int, int] | None = None
    exception_string: str | None = None


@dataclass
class Grid:
    grid_id: int
    function: str
    function_entry: int
    module_handle: int
    grid_dim: tuple[int, int, int] = (1, 1, 1)
    block_dim: tuple[int, int, int] = (32, 1, 1)
    cluster_dim: tuple[int, int, int] = (0, 0, 0)
    #: default: the context of this grid's device that loaded its module (cuda-gdb refuses a
    #: grid whose context is not in the device's context table: "CUDBG_ERROR_INVALID_CONTEXT")
    context_id: int | None = None
    status: int = GRID_ACTIVE
    params: bytes | None = None
    params_address: int = 0x7F00_0000_0000
    const_banks: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class Module:
    handle: int
    relocated: bytes | None = None
    unrelocated: bytes | None = None


@dataclass
class Context:
    context_id: int
    modules: list[Module]


@dataclass
class Device:
    dev_id: int = 0
    name: str = "NVIDIA H100 80GB HBM3"
    sm_type: str = "sm_90"
    num_sms: int = 132
    warps_per_sm: int = 64
    regs_per_lane: int = 255
    #: the SMs that hold something; the others of num_sms get an empty row each, as a driver
    #: writes them (cuda-gdb 12.5+ looks up a row for every SM below numSMs)
    sms: list[SM] = field(default_factory=list)
    grids: list[Grid] = field(default_factory=list)
    contexts: list[Context] = field(default_factory=list)


@dataclass
class Spec:
    devices: list[Device]
    #: row size per table (see ROW_GENERATIONS); default: the newest generation
    rows: dict[str, int] = field(default_factory=dict)
    metadata: bool = True
    driver_version: tuple[int, int] = (580, 65)
    cuda_version: tuple[int, int] = (13, 0)
    flags: int = 47
    abi_version: int = 7
    #: (address, size) of global-memory sections, written as holes (sparse)
    global_memory: list[tuple[int, int]] = field(default_factory=list)
    #: (address, size) of managed-memory sections, likewise
    managed_memory: list[tuple[int, int]] = field(default_factory=list)
    #: empty filler sections, to push the count past the ELF limit in tests
    filler_sections: int = 0
    #: section names that lie about their row indices (to prove they are not parsed)
    lying_names: bool = False

    def row_size(self, table: str) -> int:
        return self.rows.get(table, NEWEST[table])


# -- writing ---------------------------------------------------------------------------------
class _Writer:
    """Streams section contents to the file and keeps the header table for the end."""

    def __init__(self, stream):
        self.stream = stream
        self.headers = bytearray(64)  # section 0: SHT_NULL
        self.names = bytearray(b"\0")
        self.name_offsets: dict[str, int] = {"": 0}
        self.strings = bytearray(b"\0")
        self.string_offsets: dict[str, int] = {"": 0}
        stream.write(bytes(64))  # the ELF header, written last

    @property
    def count(self) -> int:
        return len(self.headers) // 64

    def string(self, text: str | None) -> int:
        if not text:
            return 0
        if text not in self.string_offsets:
            self.string_offsets[text] = len(self.strings)
            self.strings += text.encode() + b"\0"
        return self.string_offsets[text]

    def _name(self, name: str) -> int:
        if name not in self.name_offsets:
            self.name_offsets[name] = len(self.names)
            self.names += name.encode() + b"\0"
        return self.name_offsets[name]

    def add(self, name, kind, data=b"", *, hole=0, link=0, info=0, entsize=0, addr=0,
            flags=0, align=8) -> int:
        offset = self.stream.tell()
        if offset % align:
            self.stream.write(bytes(align - offset % align))
            offset = self.stream.tell()
        if hole:
            self.stream.seek(hole, 1)
            size = hole
        else:
            self.stream.write(data)
            size = len(data)
        self.headers += struct.pack("<IIQQQQIIQQ", self._name(name), kind, flags, addr, offset,
                                    size, link, info, align, entsize)
        return self.count - 1

    def finish(self, abi_version: int) -> None:
        self.add(".strtab", 3, bytes(self.strings), align=1)
        self._name(".shstrtab")  # so that the name table holds its own name
        shstrtab = self.add(".shstrtab", 3, bytes(self.names), align=1)
        count = self.count
        if self.stream.tell() % 8:
            self.stream.write(bytes(8 - self.stream.tell() % 8))
        shoff = self.stream.tell()
        e_shnum, e_shstrndx = count, shstrtab
        if count >= 0xFF00:
            e_shnum = 0
            struct.pack_into("<Q", self.headers, 32, count)  # section 0 sh_size
        if shstrtab >= 0xFF00:
            e_shstrndx = 0xFFFF
            struct.pack_into("<I", self.headers, 40, shstrtab)  # section 0 sh_link
        self.stream.write(self.headers)
        ident = b"\x7fELF" + bytes([2, 1, 1, 0x33, abi_version]) + bytes(7)
        self.stream.seek(0)
        self.stream.write(struct.pack("<16sHHIQQQIHHHHHH", ident, 4, 190, 1, 0, 0, shoff, 0, 64,
                                      0, 0, 64, e_shnum, e_shstrndx))


@dataclass
class Built:
    path: Path
    #: section indices by a readable key, e.g. "devtbl", "lntbl dev0 sm0 cta0 wp0"
    sections: dict[str, int]
    section_count: int


def write(spec: Spec, path: str | Path, *, compress: bool = False) -> Built:
    """Write ``spec`` as a (synthetic) CUDA coredump at ``path``; gzip it if ``compress``.

    A description cuda-gdb would misread is refused with ValueError: a module handle used twice
    (libcudacore keys images by handle alone, so another device's kernels show as ``??``) or a
    grid whose context is not on its device."""
    _check_modules(spec)
    path = Path(path)
    raw = path.with_name(path.name + ".raw") if compress else path
    keys: dict[str, int] = {}
    with open(raw, "wb") as stream:
        w = _Writer(stream)
        _write_all(w, spec, keys)
        w.finish(spec.abi_version)
        count = w.count
    if compress:
        with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()
    return Built(path, keys, count)


def _check_modules(spec: Spec) -> None:
    handles = Counter(m.handle for d in spec.devices for c in d.contexts for m in c.modules)
    twice = sorted(hex(handle) for handle, count in handles.items() if count > 1)
    if twice:
        raise ValueError(f"module handles used more than once: {', '.join(twice)}")


def _grid_context(device: Device, grid: Grid) -> int:
    """The grid's context id: its own, or the one whose module table holds its module."""
    if grid.context_id is not None:
        if grid.context_id not in {c.context_id for c in device.contexts}:
            raise ValueError(f"grid {grid.grid_id}: no context {grid.context_id:#x} on device "
                             f"{device.dev_id}")
        return grid.context_id
    for context in device.contexts:
        if any(m.handle == grid.module_handle for m in context.modules):
            return context.context_id
    raise ValueError(f"grid {grid.grid_id}: no context of device {device.dev_id} loaded module "
                     f"{grid.module_handle:#x}")


def _name(spec: Spec, text: str) -> str:
    # Lying names swap the digits around, so a reader that parsed them would go wrong.
    return text.translate(str.maketrans("0123456789", "9876543210")) if spec.lying_names else text


def _words(values) -> bytes:
    return struct.pack(f"<{len(values)}I", *values)


def _write_all(w: _Writer, spec: Spec, keys: dict[str, int]) -> None:
    size = spec.row_size
    if spec.metadata:
        meta = pack_row(
            "meta", size("meta"),
            generatorName=w.string(SYNTHETIC_LABEL),
            driverVersionMajor=spec.driver_version[0], driverVersionMinor=spec.driver_version[1],
            cudaDriverVersionMajor=spec.cuda_version[0], cudaDriverVersionMinor=spec.cuda_version[1],
            flags=spec.flags, timestamp=1_763_700_000,
        )
        keys["meta"] = w.add(".cudbg.meta", SHT["META_DATA"], meta, entsize=size("meta"))
    memory = [("GLOBAL_MEM", region) for region in spec.global_memory]
    memory += [("MANAGED_MEM", region) for region in spec.managed_memory]
    for number, (kind, (address, length)) in enumerate(memory):
        keys[f"{kind.lower()}{number}"] = w.add(f".cudbg.global.{number}", SHT[kind], hole=length,
                                                addr=address)
    dev_rows = []
    for d in spec.devices:
        extra = {}
        if size("dev") >= 80:
            extra.update(numUniformRegsPrWarp=63, numUniformPredicatesPrWarp=7)
        if size("dev") >= 88:
            extra.update(numConvergenceBarriersPrWarp=16)
        dev_rows.append(pack_row(
            "dev", size("dev"), devName=w.string(d.name), devType=w.string("GH100"),
            smType=w.string(d.sm_type), devId=d.dev_id, pciBusId=0x18 + d.dev_id, pciDevId=0,
            numSMs=d.num_sms, numWarpsPerSM=d.warps_per_sm, numLanesPerWarp=32,
            numRegsPerLane=d.regs_per_lane, numPredicatesPrLane=7, smMajor=9, smMinor=0,
            instructionSize=16, status=0, **extra))
    devtbl = keys["devtbl"] = w.add(".cudbg.devtbl", SHT["DEV_TABLE"], b"".join(dev_rows),
                                    entsize=size("dev"))
    for row, d in enumerate(spec.devices):
        _write_device(w, spec, keys, devtbl, row, d)
    for _ in range(spec.filler_sections):
        w.add("", 1, b"", align=1)  # SHT_PROGBITS, empty: only there to be counted


def _write_device(w, spec, keys, devtbl, row, d: Device) -> None:
    """One device's tables, each linked to its device row: contexts, grids, SMs."""
    tag = f"dev{row}"
    _write_contexts(w, spec, keys, devtbl, row, tag, d)
    _write_grids(w, spec, keys, devtbl, row, tag, d)
    _write_sms(w, spec, keys, devtbl, row, tag, d)


def _write_contexts(w, spec, keys, devtbl, row, tag, d: Device) -> None:
    size = spec.row_size
    ctx_rows = [pack_row("ctx", size("ctx"), contextId=c.context_id, deviceIdx=row, tid=4242,
                         sharedWindowBase=0x7E00_0000_0000, localWindowBase=0x7D00_0000_0000,
                         globalWindowBase=0)
                for c in d.contexts]
    if not ctx_rows:
        return
    ctxtbl = keys[f"ctxtbl {tag}"] = w.add(_name(spec, f".cudbg.ctxtbl.{tag}"), SHT["CTX_TABLE"],
                                           b"".join(ctx_rows), link=devtbl, info=row,
                                           entsize=size("ctx"))
    for c_row, context in enumerate(d.contexts):
        ctag = f"{tag}.ctx{c_row}"
        modtbl = keys[f"modtbl {ctag}"] = w.add(
            _name(spec, f".cudbg.modtbl.{ctag}"), SHT["MOD_TABLE"],
            b"".join(pack_row("mod", size("mod"), moduleHandle=m.handle) for m in context.modules),
            link=ctxtbl, info=c_row, entsize=size("mod"))
        for m_row, module in enumerate(context.modules):
            if module.unrelocated is not None:
                w.add(_name(spec, f".cudbg.elfimg.{ctag}"), SHT["ELF_IMG"], module.unrelocated,
                      link=modtbl, info=m_row)
            if module.relocated is not None:
                keys[f"relfimg {module.handle:#x}"] = w.add(
                    _name(spec, f".cudbg.relfimg.{ctag}"), SHT["RELF_IMG"], module.relocated,
                    link=modtbl, info=m_row)


def _write_grids(w, spec, keys, devtbl, row, tag, d: Device) -> None:
    size = spec.row_size
    grid_rows = []
    for g in d.grids:
        values = dict(gridId64=g.grid_id, contextId=_grid_context(d, g),
                      function=w.string(g.function), functionEntry=g.function_entry,
                      moduleHandle=g.module_handle, parentGridId64=0, paramsOffset=0x210, kernelType=2, origin=0,
                      gridStatus=g.status, numRegs=REGISTERS_PER_LANE,
                      gridDimX=g.grid_dim[0], gridDimY=g.grid_dim[1], gridDimZ=g.grid_dim[2],
                      blockDimX=g.block_dim[0], blockDimY=g.block_dim[1], blockDimZ=g.block_dim[2],
                      attrLaunchBlocking=0, attrHostTid=4242)
        if size("grid") >= 120:
            values.update(clusterDimX=g.cluster_dim[0], clusterDimY=g.cluster_dim[1],
                          clusterDimZ=g.cluster_dim[2])
        grid_rows.append(pack_row("grid", size("grid"), **values))
    if not grid_rows:
        return
    gridtbl = keys[f"gridtbl {tag}"] = w.add(_name(spec, f".cudbg.gridtbl.{tag}"),
                                             SHT["GRID_TABLE"], b"".join(grid_rows),
                                             link=devtbl, info=row, entsize=size("grid"))
    for g_row, g in enumerate(d.grids):
        if g.params is not None:
            keys[f"param {tag} grid{g.grid_id}"] = w.add(
                _name(spec, f".cudbg.param.{tag}.grid{g_row}"), SHT["PARAM_MEM"], g.params,
                link=gridtbl, info=g_row, addr=g.params_address)
        if g.const_banks:
            w.add(_name(spec, f".cudbg.cbankstbl.{tag}.grid{g_row}"), SHT["CB_TABLE"],
                  b"".join(pack_row("cb", 16, addr=a, size=s, bankId=b) for a, s, b in g.const_banks),
                  link=gridtbl, info=g_row, entsize=16)


def _write_sms(w, spec, keys, devtbl, row, tag, d: Device) -> None:
    size = spec.row_size
    described = {sm.sm_id for sm in d.sms}
    idle = [SM(sm_id) for sm_id in range(d.num_sms) if sm_id not in described]
    sm_rows = []
    for sm in d.sms + idle:
        values = {"smId": sm.sm_id}
        if size("sm") >= 24:
            values.update(exception=sm.exception, errorPCValid=int(sm.error_pc is not None),
                          errorPC=sm.error_pc or 0)
        if size("sm") >= 40 and sm.cluster_target is not None:
            x, y, z = sm.cluster_target
            values.update(clusterExceptionTargetBlockIdxValid=1, clusterExceptionTargetBlockIdxX=x,
                          clusterExceptionTargetBlockIdxY=y, clusterExceptionTargetBlockIdxZ=z)
        if size("sm") >= 48:
            values["exceptionString"] = w.string(sm.exception_string)
        sm_rows.append(pack_row("sm", size("sm"), **values))
    smtbl = keys[f"smtbl {tag}"] = w.add(_name(spec, f".cudbg.smtbl.{tag}"), SHT["SM_TABLE"],
                                         b"".join(sm_rows), link=devtbl, info=row,
                                         entsize=size("sm"))
    for s_row, sm in enumerate(d.sms):
        _write_sm(w, spec, keys, smtbl, s_row, f"{tag}.sm{s_row}", sm)


def _write_sm(w, spec, keys, smtbl, s_row, tag, sm: SM) -> None:
    size = spec.row_size
    if not sm.ctas:
        return
    rows = []
    for cta in sm.ctas:
        values = dict(gridId64=cta.grid_id, blockIdxX=cta.block_idx[0], blockIdxY=cta.block_idx[1],
                      blockIdxZ=cta.block_idx[2])
        if size("cta") >= 40:
            values.update(clusterIdxX=cta.cluster_idx[0], clusterIdxY=cta.cluster_idx[1],
                          clusterIdxZ=cta.cluster_idx[2])
        if size("cta") >= 56:
            values.update(clusterDimX=cta.cluster_dim[0], clusterDimY=cta.cluster_dim[1],
                          clusterDimZ=cta.cluster_dim[2])
        rows.append(pack_row("cta", size("cta"), **values))
    ctatbl = keys[f"ctatbl {tag}"] = w.add(_name(spec, f".cudbg.ctatbl.{tag}"), SHT["CTA_TABLE"],
                                           b"".join(rows), link=smtbl, info=s_row,
                                           entsize=size("cta"))
    for c_row, cta in enumerate(sm.ctas):
        ctag = f"{tag}.cta{c_row}"
        if cta.shared_memory:
            w.add(_name(spec, f".cudbg.shared.{ctag}"), SHT["SHARED_MEM"], hole=cta.shared_memory,
                  link=ctatbl, info=c_row)
        warp_rows = []
        for warp in cta.warps:
            mask = warp.active_mask
            if mask is None:
                mask = sum(1 << lane.ln for lane in warp.lanes)
            valid = warp.error_pc is not None if warp.error_pc_valid is None else warp.error_pc_valid
            values = dict(errorPC=warp.error_pc or 0, warpId=warp.warp_id,
                          validLanesMask=sum(1 << lane.ln for lane in warp.lanes),
                          activeLanesMask=mask, isWarpBroken=warp.broken, errorPCValid=int(valid))
            if size("warp") >= 40:
                values["numRegs"] = REGISTERS_PER_LANE
            if size("warp") >= 48:
                values["sharedMemSize"] = warp.shared_mem_size
            warp_rows.append(pack_row("warp", size("warp"), **values))
        wptbl = keys[f"wptbl {ctag}"] = w.add(_name(spec, f".cudbg.wptbl.{ctag}"), SHT["WP_TABLE"],
                                              b"".join(warp_rows), link=ctatbl, info=c_row,
                                              entsize=size("warp"))
        for w_row, warp in enumerate(cta.warps):
            _write_warp(w, spec, keys, wptbl, w_row, f"{ctag}.wp{w_row}", warp)


def _write_warp(w, spec, keys, wptbl, w_row, tag, warp: Warp) -> None:
    size = spec.row_size
    # Device rows of 72 bytes come from drivers before uniform registers (r400): none written.
    uniform = size("dev") >= 80
    if uniform and warp.uniform_registers is not None:
        w.add(_name(spec, f".cudbg.uregs.{tag}"), SHT["DEV_UREGS"], _words(warp.uniform_registers),
              link=wptbl, info=w_row)
    if uniform and warp.uniform_predicates is not None:
        w.add(_name(spec, f".cudbg.upred.{tag}"), SHT["DEV_UPRED"], _words(warp.uniform_predicates),
              link=wptbl, info=w_row)
    if warp.cbu_bar is not None:
        w.add(_name(spec, f".cudbg.cbu_bar.{tag}"), SHT["CBU_BAR"], warp.cbu_bar, link=wptbl,
              info=w_row)
    if not warp.lanes:
        return
    rows = b"".join(
        pack_row("lane", size("lane"), virtualPC=lane.pc, physPC=lane.pc & 0xFFFF, ln=lane.ln,
                 threadIdxX=lane.thread_idx[0], threadIdxY=lane.thread_idx[1],
                 threadIdxZ=lane.thread_idx[2], exception=lane.exception,
                 callDepth=len(lane.backtrace), syscallCallDepth=0, ccRegister=0)
        for lane in warp.lanes)
    lntbl = keys[f"lntbl {tag}"] = w.add(_name(spec, f".cudbg.lntbl.{tag}"), SHT["LN_TABLE"], rows,
                                         link=wptbl, info=w_row, entsize=size("lane"))
    for l_row, lane in enumerate(warp.lanes):
        ltag = f"{tag}.ln{l_row}"
        w.add(_name(spec, f".cudbg.regs.{ltag}"), SHT["DEV_REGS"], _words(lane.registers),
              link=lntbl, info=l_row)
        if lane.predicates is not None:
            w.add(_name(spec, f".cudbg.pred.{ltag}"), SHT["DEV_PRED"], _words(lane.predicates),
                  link=lntbl, info=l_row)
        if lane.local_memory:
            w.add(_name(spec, f".cudbg.local.{ltag}"), SHT["LOCAL_MEM"], bytes(lane.local_memory),
                  link=lntbl, info=l_row, addr=0xFFFE00)
        if lane.backtrace:
            w.add(_name(spec, f".cudbg.bt.{ltag}"), SHT["BT"],
                  b"".join(pack_row("bt", 24, returnAddress=r, virtualReturnAddress=v, level=level)
                           for level, (r, v) in enumerate(lane.backtrace)),
                  link=lntbl, info=l_row, entsize=24)
