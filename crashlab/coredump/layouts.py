"""Layouts of the structures a CUDA coredump is made of, declared as data.

The ELF container (the file header, section headers, and the symbols of the cubins it carries)
has the fixed layouts of the ELF-64 object file format (the System V gABI; ``Elf64_Ehdr``,
``Elf64_Shdr`` and ``Elf64_Sym`` in <elf.h>). The CUDA tables are the row structures of NVIDIA's
public cudacoredump.h (``CudbgDeviceTableEntry`` and the rest), whose offsets and names each
field here records.

Each driver generation appended fields to the CUDA rows, and a table's sh_entsize says which
generation wrote it. A field therefore exists only where ``offset + size <= entsize``; bytes past
the last known field are ignored, so a newer driver's longer rows still decode. The comments in
the tables name the driver release that appended the fields below them.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from typing import Any

from .constants import SectionType

if sys.byteorder != "little":  # pragma: no cover - every CUDA host is little-endian
    raise ImportError("crashlab reads coredumps through native little-endian views")


@dataclass(frozen=True, slots=True)
class Field:
    #: crashlab's name for it: a record's attribute, a column of the section header table
    name: str
    offset: int
    #: struct code: "B" (u8), "H" (u16), "I" (u32), "Q" (u64) or "16s" (bytes)
    code: str
    #: its name in the C header that declares it (cudacoredump.h, elf.h)
    c_name: str
    #: the value is an offset into .strtab
    string: bool = False
    #: a driver may write a host address here instead of a .strtab offset (r580 does for the
    #: grid's function, fixtures/gpu): such a value reads as "", and the reader names it otherwise
    or_host_address: bool = False
    size: int = field(init=False, repr=False, compare=False)
    end: int = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "size", struct.calcsize("<" + self.code))
        object.__setattr__(self, "end", self.offset + self.size)

    def read(self, buffer, start: int = 0):
        """The field of the structure that begins at ``start`` in ``buffer``."""
        return struct.unpack_from("<" + self.code, buffer, start + self.offset)[0]

    def write(self, buffer, start: int, value) -> None:
        struct.pack_into("<" + self.code, buffer, start + self.offset, value)

    def column(self, table: memoryview, stride: int) -> memoryview:
        """The field of every row of ``table`` (rows of ``stride`` bytes) as one zero-copy
        strided view, native little-endian: ``column[i]`` is row i's value. ``stride`` and the
        table's length must be multiples of the field's size."""
        step, index = stride // self.size, self.offset // self.size
        # typeshed lists cast's formats as literals; a Field's code is one of them by construction
        return table.cast(self.code)[index::step]  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class RowLayout:
    #: crashlab's name for the structure, in its messages
    table: str
    #: the C structure it declares
    c_name: str
    fields: tuple[Field, ...]
    #: every row size a known driver generation wrote, oldest first (an ELF structure has one)
    generations: tuple[int, ...]
    by_name: dict[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})

    @property
    def min_size(self) -> int:
        return self.generations[0]

    @property
    def size(self) -> int:
        """The newest generation's row size."""
        return self.generations[-1]

    def present(self, entsize: int) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.end <= entsize)

    def optional(self, f: Field) -> bool:
        """Whether rows of the oldest generation lack ``f``."""
        return f.end > self.min_size


@dataclass(frozen=True, slots=True)
class RowDecoder:
    """A compiled reader for one (layout, entsize) pair."""

    layout: RowLayout
    entsize: int
    names: tuple[str, ...]
    string_names: tuple[str, ...]
    #: the string fields whose value may be a host address (Field.or_host_address)
    address_names: frozenset[str]
    packer: struct.Struct

    def decode(self, buffer, offset: int = 0) -> dict[str, Any]:
        """The row at ``offset`` by field name: ints, and bytes for a "16s" field."""
        return dict(zip(self.names, self.packer.unpack_from(buffer, offset), strict=True))

    def decode_all(self, buffer) -> list[dict[str, Any]]:
        names = self.names
        return [dict(zip(names, values, strict=True)) for values in self.packer.iter_unpack(buffer)]


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
        address_names=frozenset(f.name for f in fields if f.or_host_address),
        packer=struct.Struct("".join(fmt)),
    )


def _u8(name, offset, c_name):
    return Field(name, offset, "B", c_name)


def _u16(name, offset, c_name):
    return Field(name, offset, "H", c_name)


def _u32(name, offset, c_name):
    return Field(name, offset, "I", c_name)


def _u64(name, offset, c_name, *, string=False, or_host_address=False):
    return Field(name, offset, "Q", c_name, string, or_host_address)


# -- the ELF container ------------------------------------------------------------------------
ELF_HEADER = RowLayout(
    "ELF header",
    "Elf64_Ehdr",
    (
        Field("ident", 0, "16s", "e_ident"),
        _u16("type", 16, "e_type"),
        _u16("machine", 18, "e_machine"),
        _u32("version", 20, "e_version"),
        _u64("entry", 24, "e_entry"),
        _u64("phoff", 32, "e_phoff"),
        _u64("shoff", 40, "e_shoff"),
        _u32("flags", 48, "e_flags"),
        _u16("ehsize", 52, "e_ehsize"),
        _u16("phentsize", 54, "e_phentsize"),
        _u16("phnum", 56, "e_phnum"),
        _u16("shentsize", 58, "e_shentsize"),
        _u16("shnum", 60, "e_shnum"),
        _u16("shstrndx", 62, "e_shstrndx"),
    ),
    (64,),
)

SECTION_HEADER = RowLayout(
    "section header",
    "Elf64_Shdr",
    (
        _u32("name", 0, "sh_name"),
        _u32("type", 4, "sh_type"),
        _u64("flags", 8, "sh_flags"),
        _u64("addr", 16, "sh_addr"),
        _u64("offset", 24, "sh_offset"),
        _u64("size", 32, "sh_size"),
        _u32("link", 40, "sh_link"),
        _u32("info", 44, "sh_info"),
        _u64("addralign", 48, "sh_addralign"),
        _u64("entsize", 56, "sh_entsize"),
    ),
    (64,),
)

SYMBOL = RowLayout(
    "symbol",
    "Elf64_Sym",
    (
        _u32("name", 0, "st_name"),
        _u8("info", 4, "st_info"),
        _u8("other", 5, "st_other"),
        _u16("shndx", 6, "st_shndx"),
        _u64("value", 8, "st_value"),
        _u64("size", 16, "st_size"),
    ),
    (24,),
)


# -- the CUDA tables (cudacoredump.h) -------------------------------------------------------
DEVICE = RowLayout(
    "device",
    "CudbgDeviceTableEntry",
    (
        _u64("name", 0, "devName", string=True),
        _u64("type", 8, "devType", string=True),
        _u64("sm_type", 16, "smType", string=True),
        _u32("dev_id", 24, "devId"),
        _u32("pci_bus_id", 28, "pciBusId"),
        _u32("pci_dev_id", 32, "pciDevId"),
        _u32("num_sms", 36, "numSMs"),
        _u32("num_warps_per_sm", 40, "numWarpsPerSM"),
        _u32("num_lanes_per_warp", 44, "numLanesPerWarp"),
        _u32("num_regs_per_lane", 48, "numRegsPerLane"),
        _u32("num_predicates_per_lane", 52, "numPredicatesPrLane"),
        _u32("sm_major", 56, "smMajor"),
        _u32("sm_minor", 60, "smMinor"),
        _u32("instruction_size", 64, "instructionSize"),
        _u32("status", 68, "status"),
        # r400: 80-byte rows
        _u32("num_uniform_regs_per_warp", 72, "numUniformRegsPrWarp"),
        _u32("num_uniform_predicates_per_warp", 76, "numUniformPredicatesPrWarp"),
        # r575: 88-byte rows
        _u32("num_convergence_barriers_per_warp", 80, "numConvergenceBarriersPrWarp"),
    ),
    (72, 80, 88),
)

CONTEXT = RowLayout(
    "context",
    "CudbgContextTableEntry",
    (
        _u64("context_id", 0, "contextId"),
        _u64("shared_window_base", 8, "sharedWindowBase"),
        _u64("local_window_base", 16, "localWindowBase"),
        _u64("global_window_base", 24, "globalWindowBase"),
        _u32("device_idx", 32, "deviceIdx"),
        _u32("tid", 36, "tid"),
    ),
    (40,),
)

MODULE = RowLayout(
    "module",
    "CudbgModuleTableEntry",
    (
        _u64("module_handle", 0, "moduleHandle"),
    ),
    (8,),
)

GRID = RowLayout(
    "grid",
    "CudbgGridTableEntry",
    (
        _u64("grid_id", 0, "gridId64"),
        _u64("context_id", 8, "contextId"),
        _u64("function", 16, "function", string=True, or_host_address=True),
        _u64("function_entry", 24, "functionEntry"),
        _u64("module_handle", 32, "moduleHandle"),
        _u64("parent_grid_id", 40, "parentGridId64"),
        _u64("params_offset", 48, "paramsOffset"),
        _u32("kernel_type", 56, "kernelType"),
        _u32("origin", 60, "origin"),
        _u32("grid_status", 64, "gridStatus"),
        _u32("num_regs", 68, "numRegs"),
        _u32("grid_dim_x", 72, "gridDimX"),
        _u32("grid_dim_y", 76, "gridDimY"),
        _u32("grid_dim_z", 80, "gridDimZ"),
        _u32("block_dim_x", 84, "blockDimX"),
        _u32("block_dim_y", 88, "blockDimY"),
        _u32("block_dim_z", 92, "blockDimZ"),
        _u32("attr_launch_blocking", 96, "attrLaunchBlocking"),
        _u32("attr_host_tid", 100, "attrHostTid"),
        # r525: 120-byte rows
        _u32("cluster_dim_x", 104, "clusterDimX"),
        _u32("cluster_dim_y", 108, "clusterDimY"),
        _u32("cluster_dim_z", 112, "clusterDimZ"),
        # r565: 136-byte rows
        _u32("preferred_cluster_dim_x", 120, "preferredClusterDimX"),
        _u32("preferred_cluster_dim_y", 124, "preferredClusterDimY"),
        _u32("preferred_cluster_dim_z", 128, "preferredClusterDimZ"),
    ),
    (104, 120, 136),
)

CONST_BANK = RowLayout(
    "const_bank",
    "CudbgConstBankTableEntry",
    (
        _u64("address", 0, "addr"),
        _u32("size", 8, "size"),
        _u32("bank_id", 12, "bankId"),
    ),
    (16,),
)

SM = RowLayout(
    "sm",
    "CudbgSmTableEntry",
    (
        _u32("sm_id", 0, "smId"),
        # r555: 24-byte rows
        _u32("exception", 8, "exception"),
        _u32("error_pc_valid", 12, "errorPCValid"),
        _u64("error_pc", 16, "errorPC"),
        # r565: 40-byte rows
        _u32("cluster_target_block_valid", 24, "clusterExceptionTargetBlockIdxValid"),
        _u32("cluster_target_block_x", 28, "clusterExceptionTargetBlockIdxX"),
        _u32("cluster_target_block_y", 32, "clusterExceptionTargetBlockIdxY"),
        _u32("cluster_target_block_z", 36, "clusterExceptionTargetBlockIdxZ"),
        # r580: 48-byte rows
        _u64("exception_string", 40, "exceptionString", string=True),
    ),
    (8, 24, 40, 48),
)

CTA = RowLayout(
    "cta",
    "CudbgCTATableEntry",
    (
        _u64("grid_id", 0, "gridId64"),
        _u32("block_idx_x", 8, "blockIdxX"),
        _u32("block_idx_y", 12, "blockIdxY"),
        _u32("block_idx_z", 16, "blockIdxZ"),
        # r525: 40-byte rows
        _u32("cluster_idx_x", 24, "clusterIdxX"),
        _u32("cluster_idx_y", 28, "clusterIdxY"),
        _u32("cluster_idx_z", 32, "clusterIdxZ"),
        # r565: 56-byte rows
        _u32("cluster_dim_x", 40, "clusterDimX"),
        _u32("cluster_dim_y", 44, "clusterDimY"),
        _u32("cluster_dim_z", 48, "clusterDimZ"),
    ),
    (24, 40, 56),
)

WARP = RowLayout(
    "warp",
    "CudbgWarpTableEntry",
    (
        _u64("error_pc", 0, "errorPC"),
        _u32("warp_id", 8, "warpId"),
        _u32("valid_lanes_mask", 12, "validLanesMask"),
        _u32("active_lanes_mask", 16, "activeLanesMask"),
        _u32("is_warp_broken", 20, "isWarpBroken"),
        _u32("error_pc_valid", 24, "errorPCValid"),
        # r525: 40-byte rows
        _u32("num_regs", 32, "numRegs"),
        # r570: 48-byte rows
        _u32("shared_mem_size", 40, "sharedMemSize"),
        # r575: 64-byte rows
        _u32("in_syscall_lanes_mask", 48, "inSyscallLanesMask"),
        _u32("cbu_active_lanes_mask", 52, "cbuActiveLanesMask"),
        _u32("cbu_exited_lanes_mask", 56, "cbuExitedLanesMask"),
        _u32("cbu_collective_lanes_mask", 60, "cbuCollectiveLanesMask"),
        # r590: 80-byte rows
        _u32("barrier_scope", 64, "barrierScope"),
        _u64("additional_barrier_info", 72, "additionalBarrierInfo"),
    ),
    (32, 40, 48, 64, 80),
)

LANE = RowLayout(
    "lane",
    "CudbgThreadTableEntry",
    (
        _u64("virtual_pc", 0, "virtualPC"),
        _u64("phys_pc", 8, "physPC"),
        _u32("ln", 16, "ln"),
        _u32("thread_idx_x", 20, "threadIdxX"),
        _u32("thread_idx_y", 24, "threadIdxY"),
        _u32("thread_idx_z", 28, "threadIdxZ"),
        _u32("exception", 32, "exception"),
        _u32("call_depth", 36, "callDepth"),
        _u32("syscall_call_depth", 40, "syscallCallDepth"),
        _u32("cc_register", 44, "ccRegister"),
        # r575: 56-byte rows
        _u32("cbu_thread_state", 48, "cbuThreadState"),
        # r615: 64-byte rows
        _u32("rpc_lo", 56, "rpcLo"),
        _u32("rpc_hi", 60, "rpcHi"),
    ),
    (48, 56, 64),
)

BACKTRACE = RowLayout(
    "backtrace",
    "CudbgBacktraceTableEntry",
    (
        _u64("return_address", 0, "returnAddress"),
        _u64("virtual_return_address", 8, "virtualReturnAddress"),
        _u32("level", 16, "level"),
    ),
    (24,),
)

METADATA = RowLayout(
    "metadata",
    "CudbgMetaDataEntry",
    (
        _u64("generator", 0, "generatorName", string=True),
        _u32("driver_version_major", 8, "driverVersionMajor"),
        _u32("driver_version_minor", 12, "driverVersionMinor"),
        _u32("cuda_version_major", 16, "cudaDriverVersionMajor"),
        _u32("cuda_version_minor", 20, "cudaDriverVersionMinor"),
        _u32("flags", 24, "flags"),
        _u32("timestamp", 28, "timestamp"),
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
