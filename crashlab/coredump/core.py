"""CoreDump: the typed, lazy view of a CUDA coredump.

Tables are decoded when first asked for, and register, predicate, parameter and memory sections
only when a caller asks for that one lane, warp or grid, so that opening a dump of a million
sections costs one pass over its header table.
"""

from __future__ import annotations

import os
import struct
from array import array
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from ..cubin import Cubin, CubinError
from ..errors import CoreFormatError
from .constants import MEMORY_TYPES, GenerationFlag, SectionType
from .elf import ElfImage
from .layouts import TABLE_LAYOUTS, decoder
from .model import (
    CTA,
    SM,
    BacktraceFrame,
    ConstBank,
    Context,
    Device,
    Grid,
    Lane,
    MemoryRegion,
    Metadata,
    Module,
    ParamBlock,
    Warp,
)
from .sections import SectionIndex

#: Register and predicate sections are small arrays; cap what one read may return so that a
#: lying sh_size cannot make crashlab decode a gigabyte of "registers".
MAX_REGISTERS = 1024
#: Kernel parameters are at most 32 KiB since CUDA 12.1.
MAX_PARAM_BYTES = 32 * 1024
_LANE_EXCEPTION_OFFSET = TABLE_LAYOUTS[SectionType.LN_TABLE].by_name["exception"].offset
_LANE_ID_OFFSET = TABLE_LAYOUTS[SectionType.LN_TABLE].by_name["ln"].offset


@dataclass(slots=True)
class LaneScan:
    """What one warp's lane rows say: its faulting lanes, the lane that stands for it, and the
    rows that disagree with their neighbours, as (section, row)."""

    faulting: list[Lane] = field(default_factory=list)
    head: Lane | None = None
    duplicates: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    zero_rows: list[tuple[int, int]] = field(default_factory=list)


def _lane_columns(reader, data: bytes, entsize: int, count: int):
    """(laneId, exception) columns of a lane table: strided views over the bytes where the row
    size allows (nothing decoded), else decoded into arrays."""
    if entsize % 4 == 0 and count:
        words = memoryview(data).cast("I")
        step = entsize // 4
        return words[_LANE_ID_OFFSET // 4 :: step], words[_LANE_EXCEPTION_OFFSET // 4 :: step]
    rows = [reader.decode(data, n * entsize) for n in range(count)]
    return array("I", [r["ln"] for r in rows]), array("I", [r["exception"] for r in rows])


@lru_cache(maxsize=64)
def _in_order(count: int) -> bytes:
    """The laneId column of a table whose row n holds lane n, as bytes."""
    return array("I", range(count)).tobytes()


def _zero_rows(ids: list[int], data: bytes, entsize: int) -> list[int]:
    """Rows whose bytes are all zero: padding, not lanes. Such a row claims lane 0, so only
    rows with laneId 0 are looked at (usually one)."""
    rows = [ids.index(0)] if ids.count(0) == 1 else [r for r, ln in enumerate(ids) if ln == 0]
    return [r for r in rows if data.count(0, r * entsize, (r + 1) * entsize) == entsize]


def _note_duplicates(scan: LaneScan, section: int, ids: list[int], zero: list[int]) -> None:
    seen: dict[int, int] = {}
    for row, ln in enumerate(ids):
        if row in zero:
            continue
        if ln in seen:
            scan.duplicates.setdefault(ln, [(section, seen[ln])]).append((section, row))
        else:
            seen[ln] = row


def _first_active_row(scan: LaneScan, section: int, ids, data: bytes, entsize: int, count: int,
                      mask: int):
    """(laneId column, all-zero rows, row of the active lane with the lowest laneId or None) of
    one lane table. The usual layout, row n holding lane n, is answered from the mask alone; any
    other is sorted by laneId, and its repeated laneIds are noted in ``scan``."""
    if ids.tobytes() == _in_order(count):
        zero = [0] if count and data.count(0, 0, entsize) == entsize else []
        live = mask & ~1 if zero else mask
        lowest = (live & -live).bit_length() - 1
        return ids, zero, lowest if 0 <= lowest < count else None
    ids = ids.tolist()
    zero = _zero_rows(ids, data, entsize)
    if len(set(ids)) != count:
        _note_duplicates(scan, section, ids, zero)
    first = next((r for r in sorted(range(count), key=ids.__getitem__)
                  if ids[r] < 32 and mask >> ids[r] & 1 and r not in zero), None)
    return ids, zero, first


class CoreDump:
    """Open with ``CoreDump(path)`` (or as a context manager); close to unmap the file."""

    def __init__(self, path: str | os.PathLike):
        self.image = ElfImage(path)
        self.warnings: list[str] = list(self.image.warnings)
        self._cubins: dict[int, Cubin | CubinError] = {}
        try:
            self.index = SectionIndex(self.image, self.warnings)
        except BaseException:
            self.image.close()
            raise

    @property
    def path(self) -> str:
        return self.image.path

    def close(self) -> None:
        self.image.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- generic table decoding -------------------------------------------------------------
    def _rows(self, section: int, kind: SectionType) -> list[dict]:
        layout = TABLE_LAYOUTS[kind]
        count = self.index.rows(section, layout.min_size)
        if count == 0:
            return []
        reader = decoder(layout, self.index.entsize(section))
        rows = reader.decode_all(self.image.data(section))
        for name in reader.string_names:
            lenient = name in reader.address_names
            for row in rows:
                if lenient and not self._in_string_table(row[name]):
                    row[name] = ""  # a host address: the name is found from the entry point
                else:
                    row[name] = self.string(row[name], f"{layout.table} {name}")
        return rows

    def _in_string_table(self, offset: int) -> bool:
        strtab = self.index.strtab
        return strtab is not None and offset < self.image.sections.size[strtab]

    def _child_rows(self, kind: SectionType, parent: int, row: int):
        """(section, row index, values) of every row in ``kind`` tables under one parent row."""
        for section in self.index.children(kind, parent, row):
            for number, values in enumerate(self._rows(section, kind)):
                yield section, number, values

    def string(self, offset: int, what: str) -> str:
        strtab = self.index.strtab
        if strtab is None:
            if offset == 0:
                return ""
            raise CoreFormatError(f"{self.path}: {what} needs a .strtab, and the dump has none")
        return self.image.string_at(strtab, offset, what)

    # -- the tables -------------------------------------------------------------------------
    @cached_property
    def device_table(self) -> int:
        tables = self.index.of_type(SectionType.DEV_TABLE)
        if not tables:
            raise CoreFormatError(
                f"{self.path}: no device table (.cudbg.devtbl); an ELF core, but not a CUDA one"
            )
        if len(tables) > 1:
            self.warnings.append(f"{len(tables)} device tables; using the first")
        return tables[0]

    @cached_property
    def devices(self) -> list[Device]:
        section = self.device_table
        return [
            Device(section=section, row=number, **values)
            for number, values in enumerate(self._rows(section, SectionType.DEV_TABLE))
        ]

    @cached_property
    def metadata(self) -> Metadata | None:
        for section in self.index.of_type(SectionType.META_DATA):
            for number, values in enumerate(self._rows(section, SectionType.META_DATA)):
                return Metadata(section=section, row=number, **values)
        return None

    def _records(self, record, kind: SectionType, parent, **links) -> list:
        """Every row of the ``kind`` tables under ``parent``'s row, as ``record`` objects."""
        return [
            record(section=s, row=n, **links, **values)
            for s, n, values in self._child_rows(kind, parent.section, parent.row)
        ]

    def contexts(self, device: Device) -> list[Context]:
        return self._records(Context, SectionType.CTX_TABLE, device, device=device)

    def modules(self, context: Context) -> list[Module]:
        return self._records(Module, SectionType.MOD_TABLE, context, context=context)

    def grids(self, device: Device) -> list[Grid]:
        grids = self._records(Grid, SectionType.GRID_TABLE, device, device=device)
        for grid in grids:
            if not grid.function:
                grid.function = self.kernel_entries.get(grid.function_entry, "")
        return grids

    @cached_property
    def kernel_entries(self) -> dict[int, str]:
        """Kernel name by entry address, from the relocated cubins' section headers: a driver
        writes the grid's function as a host address, not a string of the dump, and names the
        kernel only through its entry point (the address of its .text.<kernel> section)."""
        entries: dict[int, str] = {}
        for section, _module in self.relocated_images():
            try:
                texts = self.cubin(section).sections
            except CubinError:  # a stranger's dump may hold anything there
                continue
            for text in texts:
                if text.name.startswith(".text."):
                    entries.setdefault(text.address, text.name.removeprefix(".text."))
        return entries

    def sms(self, device: Device) -> list[SM]:
        return self._records(SM, SectionType.SM_TABLE, device, device=device)

    def ctas(self, sm: SM) -> list[CTA]:
        return self._records(CTA, SectionType.CTA_TABLE, sm, sm=sm)

    def warps(self, cta: CTA) -> list[Warp]:
        return self._records(Warp, SectionType.WP_TABLE, cta, cta=cta)

    def lanes(self, warp: Warp) -> list[Lane]:
        return self._records(Lane, SectionType.LN_TABLE, warp, warp=warp)

    def scan_lanes(self, warp: Warp) -> LaneScan:
        """The lanes of ``warp`` a triage needs, from one read of its lane table(s).

        A hang dump has tens of thousands of warps and needs only where each one stands, so the
        laneId and exception columns are read in bulk and only the rows with an exception and the
        first active lane are decoded. Lanes are known by their laneId, never by their row: the
        head is the active lane with the lowest laneId, a second row with a laneId already seen is
        listed in ``duplicates``, and an all-zero row (padding, not a lane) in ``zero_rows``.
        """
        layout = TABLE_LAYOUTS[SectionType.LN_TABLE]
        scan = LaneScan()
        head_key = None
        mask = warp.active_lanes_mask
        for section in self.index.children(SectionType.LN_TABLE, warp.section, warp.row):
            count = self.index.rows(section, layout.min_size)
            entsize = self.image.sections.entsize[section]
            reader = decoder(layout, entsize)
            data = self.image.data(section)
            ids, codes = _lane_columns(reader, data, entsize, count)
            ids, zero, first = _first_active_row(scan, section, ids, data, entsize, count, mask)
            if zero:
                scan.zero_rows += [(section, row) for row in zero]
            wanted = [r for r, code in enumerate(codes) if code and r not in zero] \
                if any(codes) else []
            if first is not None and (head_key is None or ids[first] < head_key):
                head_key = ids[first]
                wanted.append(first)
            for number in sorted(set(wanted)) if len(wanted) > 1 else wanted:
                lane = Lane(section=section, row=number, warp=warp,
                            **reader.decode(data, number * entsize))
                if lane.exception:
                    scan.faulting.append(lane)
                if number == first and ids[number] == head_key:
                    scan.head = lane
        return scan

    # -- per-lane, per-warp and per-grid arrays -------------------------------------------
    def _words(self, kind: SectionType, parent: int, row: int) -> list[int] | None:
        sections = self.index.children(kind, parent, row)
        if not sections:
            return None
        data = self.image.data(sections[0], limit=MAX_REGISTERS * 4)
        usable = len(data) - len(data) % 4
        return list(struct.unpack_from(f"<{usable // 4}I", data)) if usable else []

    def registers(self, lane: Lane) -> list[int] | None:
        return self._words(SectionType.DEV_REGS, lane.section, lane.row)

    def predicates(self, lane: Lane) -> list[bool] | None:
        words = self._words(SectionType.DEV_PRED, lane.section, lane.row)
        return None if words is None else [bool(w) for w in words]

    def uniform_registers(self, warp: Warp) -> list[int] | None:
        return self._words(SectionType.DEV_UREGS, warp.section, warp.row)

    def uniform_predicates(self, warp: Warp) -> list[bool] | None:
        words = self._words(SectionType.DEV_UPRED, warp.section, warp.row)
        return None if words is None else [bool(w) for w in words]

    def backtrace(self, lane: Lane) -> list[BacktraceFrame]:
        return sorted(self._records(BacktraceFrame, SectionType.BT, lane), key=lambda f: f.level)

    def params(self, grid: Grid) -> ParamBlock | None:
        sections = self.index.children(SectionType.PARAM_MEM, grid.section, grid.row)
        if not sections:
            return None
        section = sections[0]
        columns = self.image.sections
        data = self.image.data(section, limit=MAX_PARAM_BYTES)
        return ParamBlock(address=columns.addr[section], size=columns.size[section], data=data)

    def const_banks(self, grid: Grid) -> list[ConstBank]:
        return self._records(ConstBank, SectionType.CB_TABLE, grid)

    # -- code and memory ------------------------------------------------------------------
    def relocated_images(self, device: Device | None = None) -> list[tuple[int, Module]]:
        """(section, module) of every relocated cubin, optionally of one device only."""
        images = []
        for dev in self.devices if device is None else [device]:
            for context in self.contexts(dev):
                for module in self.modules(context):
                    for section in self.index.children(
                        SectionType.RELF_IMG, module.section, module.row
                    ):
                        images.append((section, module))
        return images

    def image_bytes(self, section: int) -> bytes:
        return self.image.data(section)

    def cubin(self, section: int) -> Cubin:
        """The relocated cubin in ``section``, opened once for this dump whoever asks (the code
        finder, the line table, the parameter layouts, the bounds, the owner); CubinError, each
        time it is asked for, where it is damaged."""
        found = self._cubins.get(section)
        if found is None:
            try:
                found = Cubin(self.image_bytes(section))
            except CubinError as exc:
                found = exc
            self._cubins[section] = found
        if isinstance(found, CubinError):
            raise CubinError(str(found), found.part)
        return found

    def memory_regions(self, kinds=MEMORY_TYPES) -> list[MemoryRegion]:
        """Every memory section of ``kinds``, with its address and size; no byte of them is read
        (a full dump has a local-memory section per lane: ask only for the kinds needed)."""
        columns = self.image.sections
        return [
            MemoryRegion(section=index, kind=kind.name, address=columns.addr[index],
                         size=columns.size[index])
            for kind in sorted(kinds)
            for index in self.index.of_type(kind)
        ]

    def process_memory(self) -> list[MemoryRegion]:
        """The global and managed memory sections that hold the process's own memory; none
        where the dump was written without it. A driver writes each constant bank's global copy
        as a global memory section even under skip_global_memory (an H200, driver 580.159: three
        sections of 68,608 bytes; fixtures/gpu/h200-runs/flags.json), so a section is no proof:
        the copies are set aside, and the recorded flags decide where the dump has them."""
        meta = self.metadata
        if meta is not None and (meta.flags or 0) & GenerationFlag.SKIP_GLOBAL_MEMORY:
            return []
        banks = [(row["address"], row["address"] + row["size"])
                 for section in self.index.of_type(SectionType.CB_TABLE)
                 for row in self._rows(section, SectionType.CB_TABLE)]
        return [region for region in self.memory_regions((SectionType.GLOBAL_MEM,
                                                          SectionType.MANAGED_MEM))
                if not any(start <= region.address and region.address + region.size <= end
                           for start, end in banks)]

    def memory_totals(self) -> tuple[int, int]:
        """(memory sections, their bytes) without a record per section: a full dump has one
        local-memory section per lane, millions of them."""
        sizes = self.image.sections.size
        indices = [self.index.of_type(kind) for kind in MEMORY_TYPES]
        return (sum(map(len, indices)),
                sum(sum(map(sizes.__getitem__, found)) for found in indices))

    def read_memory(self, region: MemoryRegion, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > region.size:
            raise ValueError(f"{offset:#x}+{size:#x} is outside the region of {region.size:#x} bytes")
        return self.image.data(region.section, limit=size, offset=offset)
