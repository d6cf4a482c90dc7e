"""Where the fault is: every faulting lane and warp, grouped, ranked, with its context.

The evidence comes from three levels, newest first in trust:
1. the SM row's exception and errorPC (drivers r555+), which also covers exceptions detected
   after the warp had exited;
2. the warp row's errorPC, which is what cuda-gdb's ``$errorpc`` reads;
3. the lane row's exception code and current PC.
A faulting lane takes its warp's errorPC when that is valid, else its own PC. A warp with a valid
errorPC but no lane marked is a warp-scoped exception: it takes the SM's exception code and its
first active lane stands for the thread. Sites are grouped by (device, grid, PC, exception).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import exceptions
from .core import CoreDump
from .exceptions import ExceptionKind
from .model import CTA, SM, BacktraceFrame, ConstBank, Device, Dim3, Grid, Lane, ParamBlock, Warp

#: Groups beyond this many are counted, not listed: a dump where every lane has its own PC must
#: not produce a report the size of the dump.
MAX_FAULT_GROUPS = 256
#: Registers, backtrace and parameters are read for this many of the most relevant groups.
DETAILED_GROUPS = 8

PC_FROM_SM = "SM errorPC"
PC_FROM_WARP = "warp errorPC"
PC_FROM_LANE = "lane PC (errorPC not valid)"


@dataclass(slots=True)
class Site:
    """One piece of evidence: a faulting lane, a faulting warp, or an SM that saw an exception."""

    exception: ExceptionKind
    device: Device
    sm: SM
    cta: CTA | None
    warp: Warp | None
    lane: Lane | None
    grid: Grid | None
    pc: int | None
    pc_source: str
    lane_marked: bool


@dataclass
class Range:
    first: Dim3
    last: Dim3
    count: int


@dataclass
class Fault:
    exception: ExceptionKind
    site: Site
    faulting_lanes: int
    faulting_warps: int
    blocks: Range | None
    threads: Range | None
    reported_by_sm: bool
    grid_inferred: bool = False
    notes: list[str] = field(default_factory=list)
    registers: list[int] | None = None
    predicates: list[bool] | None = None
    uniform_registers: list[int] | None = None
    uniform_predicates: list[bool] | None = None
    backtrace: list[BacktraceFrame] = field(default_factory=list)
    params: ParamBlock | None = None
    const_banks: list[ConstBank] = field(default_factory=list)


@dataclass
class WarpPosition:
    pc: int | None
    warps: int


@dataclass
class Residency:
    """Where one kernel's warps stand: what a hang dump is read for."""

    grid: Grid
    sms: set[int] = field(default_factory=set)
    blocks: int = 0
    warps: int = 0
    positions: Counter = field(default_factory=Counter)

    def sorted_positions(self) -> list[WarpPosition]:
        return [WarpPosition(pc, n) for pc, n in
                sorted(self.positions.items(), key=lambda item: (-item[1], item[0] or 0))]


@dataclass
class Location:
    faults: list[Fault]
    residency: list[Residency]
    omitted_groups: int
    warnings: list[str]


def locate(core: CoreDump) -> Location:
    warnings: list[str] = []
    groups: dict[tuple, _Group] = {}
    residency: dict[tuple[int, int], Residency] = {}
    for device in core.devices:
        grids = {grid.grid_id: grid for grid in core.grids(device)}
        for grid in grids.values():
            residency[(device.row, grid.grid_id)] = Residency(grid)
        for sm in core.sms(device):
            seen_sm_code = False
            for site in _scan_sm(core, device, sm, grids, residency, warnings):
                seen_sm_code |= site.exception.code == sm.exception
                _add(groups, site)
            if sm.exception and not seen_sm_code:
                _add(groups, _sm_only_site(device, sm, grids))
    faults = sorted((group.fault() for group in groups.values()), key=_relevance)
    for fault in faults[:DETAILED_GROUPS]:
        _add_details(core, fault)
    omitted = max(0, len(faults) - MAX_FAULT_GROUPS)
    return Location(faults[:MAX_FAULT_GROUPS], list(residency.values()), omitted, warnings)


def _scan_sm(core, device, sm, grids, residency, warnings):
    """Every faulting lane, and every warp with an errorPC but no lane marked, on one SM."""
    sm_code = sm.exception or 0
    for cta in core.ctas(sm):
        grid = grids.get(cta.grid_id)
        if grid is None:
            warnings.append(
                f"device {device.dev_id} SM {sm.sm_id}: block {cta.block_idx} names grid "
                f"{cta.grid_id}, which is not in the grid table"
            )
        else:
            stats = residency[(device.row, grid.grid_id)]
            stats.sms.add(sm.sm_id)
            stats.blocks += 1
        for warp in core.warps(cta):
            lanes, head = core.scan_lanes(warp)
            if grid is not None:
                stats.warps += 1
                stats.positions[head.virtual_pc if head else None] += 1
            error_pc = warp.valid_error_pc
            for lane in lanes:
                pc, source = (error_pc, PC_FROM_WARP) if error_pc is not None else (
                    lane.virtual_pc, PC_FROM_LANE)
                yield Site(exceptions.describe(lane.exception), device, sm, cta, warp, lane,
                           grid, pc, source, True)
            if not lanes and error_pc is not None:
                code = sm_code or exceptions.UNKNOWN
                yield Site(exceptions.describe(code), device, sm, cta, warp, head, grid,
                           error_pc, PC_FROM_WARP, False)


def _sm_only_site(device: Device, sm: SM, grids: dict[int, Grid]) -> Site:
    """An exception the SM saw after its warp had exited: no block or thread is left to blame."""
    pc = sm.valid_error_pc
    return Site(exceptions.describe(sm.exception), device, sm, None, None, None,
                _grid_holding(pc, grids), pc, PC_FROM_SM, False)


def _grid_holding(pc: int | None, grids: dict[int, Grid]) -> Grid | None:
    """The grid whose entry point is the closest one below ``pc``: the likeliest owner."""
    if pc is None:
        return None
    below = [grid for grid in grids.values() if grid.function_entry <= pc]
    return max(below, key=lambda grid: grid.function_entry, default=None)


def _add(groups: dict[tuple, "_Group"], site: Site) -> None:
    key = (site.device.row, site.grid.grid_id if site.grid else None, site.pc, site.exception.code)
    group = groups.get(key)
    if group is None:
        group = groups[key] = _Group(site)
    group.add(site)


class _Group:
    """The sites of one (device, grid, PC, exception), summed up as they are found: a dump in
    which every lane of every GPU faults costs memory per group, not per lane."""

    def __init__(self, first: Site):
        self.first = first
        self.lanes = 0
        self.warps: set[tuple[int, int]] = set()
        self.blocks: set[Dim3] = set()
        self.threads: set[Dim3] = set()
        self.reported = False

    def add(self, site: Site) -> None:
        self.lanes += site.lane_marked
        if site.warp is not None:
            self.warps.add((site.sm.sm_id, site.warp.warp_id))
        if site.cta is not None:
            self.blocks.add(site.cta.block_idx)
        if site.lane is not None:
            self.threads.add(site.lane.thread_idx)
        self.reported |= site.sm.exception == site.exception.code

    def fault(self) -> Fault:
        head = self.first
        fault = Fault(
            exception=head.exception,
            site=head,
            faulting_lanes=self.lanes,
            faulting_warps=len(self.warps),
            blocks=_range(self.blocks),
            threads=_range(self.threads),
            reported_by_sm=self.reported,
            grid_inferred=head.cta is None and head.grid is not None,
        )
        fault.notes.extend(_notes(fault))
        return fault


def _notes(fault: Fault) -> list[str]:
    """What a reader of the report needs to know to trust (or not) what the fault says."""
    head, notes = fault.site, []
    if head.cta is None:
        notes.append("the SM recorded this exception after the faulting warp had exited: no "
                     "block or thread is left in the dump")
    if fault.grid_inferred:
        notes.append("kernel deduced from the PC: the nearest kernel entry point below it")
    if head.pc_source == PC_FROM_LANE:
        notes.append("the warp's errorPC is not valid; the lane's current PC is shown")
    if head.warp is not None and not head.lane_marked:
        notes.append("warp-scoped exception with no lane marked; the first active lane is shown")
    if not head.exception.known:
        notes.append(f"exception code {head.exception.code} is newer than crashlab's table")
    if head.sm.exception_string:
        notes.append(f"driver's message: {head.sm.exception_string}")
    return notes


def _range(points: set[Dim3]) -> Range | None:
    if not points:
        return None
    order = sorted(points, key=lambda p: (p[2], p[1], p[0]))
    return Range(first=order[0], last=order[-1], count=len(order))


def _relevance(fault: Fault):
    """Most relevant first: the exception the driver itself reported at SM level, then real
    exception codes over unknown ones, a known PC over none, the most widespread, and finally
    the lowest device/SM/warp/lane so that the order is stable."""
    site = fault.site
    return (
        not fault.reported_by_sm,
        fault.exception.code == exceptions.UNKNOWN or not fault.exception.known,
        site.pc is None,
        -fault.faulting_warps,
        -fault.faulting_lanes,
        site.device.dev_id,
        site.sm.sm_id,
        site.warp.warp_id if site.warp else -1,
        site.lane.ln if site.lane else -1,
    )


def _add_details(core: CoreDump, fault: Fault) -> None:
    site = fault.site
    if site.lane is not None:
        fault.registers = core.registers(site.lane)
        fault.predicates = core.predicates(site.lane)
        fault.backtrace = core.backtrace(site.lane)
    if site.warp is not None:
        fault.uniform_registers = core.uniform_registers(site.warp)
        fault.uniform_predicates = core.uniform_predicates(site.warp)
    if site.grid is not None:
        fault.params = core.params(site.grid)
        fault.const_banks = core.const_banks(site.grid)
