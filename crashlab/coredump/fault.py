"""Where the fault is: every faulting lane and warp, grouped, ranked, with its context.

The evidence comes from three levels, newest first in trust:
1. the SM row's exception and errorPC (drivers r555+), which also covers exceptions detected
   after the warp had exited;
2. the warp row's errorPC, which is what cuda-gdb's ``$errorpc`` reads;
3. the lane row's exception code and current PC.
A faulting lane takes its warp's errorPC when that is valid, else its own PC. Sites are grouped
by (device, grid, PC, exception).

Attribution follows NVIDIA's reader (cuda-gdb's coredump target over libcudacore, and its
cuda-exceptions.c): SMs, warps and
lanes are known by their smId, warpId and laneId, never by their row; a lane with its own
exception comes before an SM-level one (dev, SM, warp, lane in id order, as cuda-gdb iterates);
an SM-level exception belongs to no warp and no block, so the warps still on that SM are listed
as candidates only. Rows cuda-gdb would not read (smId >= numSMs) or may read in another's place
(a repeated id) are still triaged, with a warning and a note saying what cuda-gdb makes of them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import get_args

from ..notation import counted
from ..vocabulary import PcSource
from . import exceptions
from .core import CoreDump, LaneScan
from .exceptions import ExceptionKind
from .model import CTA, SM, BacktraceFrame, ConstBank, Device, Dim3, Grid, Lane, ParamBlock, Warp

#: Groups beyond this many are counted, not listed: a dump where every lane has its own PC must
#: not produce a report the size of the dump.
MAX_FAULT_GROUPS = 256
#: Candidate warps listed per SM-level fault group; the rest are counted in a note.
MAX_CANDIDATES = 64
#: Registers, backtrace and parameters are read for this many of the most relevant groups.
DETAILED_GROUPS = 8
#: Warps of a group kept so that each marked lane's access can be judged on its own registers
#: (the driver marks a warp exception on every lane, never saying whose access broke the bound).
KEPT_WARPS = 32

PC_FROM_SM, PC_FROM_WARP, PC_FROM_LANE = get_args(PcSource)
#: What cuda-gdb does with two rows of one id (libcudacore's uthash map), as seen with 12.4.
ONE_OF_TWINS = ("cuda-gdb keys rows by id in a hash map that keeps both and returns one of them, "
                "which one depending on how the map grew after both were added (cuda-gdb 12.4 "
                "was seen to show the first row on one dump and the second on another)")


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
    pc_source: PcSource
    lane_marked: bool
    #: why cuda-gdb would never read this site's row, if it would not
    unseen_by_cuda_gdb: str | None = None
    #: why cuda-gdb may show another row in this one's place (a repeated id), if it may
    twin_in_cuda_gdb: str | None = None
    #: for an SM-level exception: the warps still resident on that SM, none of them blamed
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def coordinate(self) -> tuple:
        """cuda-gdb's iteration order: device, SM, warp, lane, by id."""
        return (self.device.dev_id, self.sm.sm_id, self.warp.warp_id if self.warp else -1,
                self.lane.ln if self.lane else -1)


@dataclass(slots=True)
class Candidate:
    """A warp resident on an SM whose exception no lane claims: it may or may not be the culprit."""

    sm: SM
    grid: Grid | None
    cta: CTA
    warp: Warp


@dataclass
class Dim3Range:
    """The first and last of a set of block or thread indices, and how many there are."""

    first: Dim3
    last: Dim3
    count: int


@dataclass
class FaultGroup:
    """Lanes that fault alike (one device, grid, PC and exception), as the report shows one fault."""

    exception: ExceptionKind
    site: Site
    faulting_lanes: int
    faulting_warps: int
    blocks: Dim3Range | None
    threads: Dim3Range | None
    reported_by_sm: bool
    sms: list[int] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    grid_inferred: bool = False
    notes: list[str] = field(default_factory=list)
    registers: list[int] | None = None
    predicates: list[bool] | None = None
    uniform_registers: list[int] | None = None
    uniform_predicates: list[bool] | None = None
    backtrace: list[BacktraceFrame] = field(default_factory=list)
    params: ParamBlock | None = None
    const_banks: list[ConstBank] = field(default_factory=list)
    #: the group's warps with a marked lane, (block, warp), in cuda-gdb's order, at most KEPT_WARPS
    warps: list[tuple[CTA, Warp]] = field(default_factory=list)


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
    faults: list[FaultGroup]
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
        sms = core.sms(device)
        never, twins = _check_sms(device, sms, warnings)
        warps_by_sm: dict[int, dict[int, Warp]] = {}
        for sm in sms:
            seen_sm_code = False
            candidates: list[Candidate] = []
            first_warp = warps_by_sm.setdefault(sm.sm_id, {})
            for site in _scan_sm(core, device, sm, grids, residency, warnings, candidates,
                                 first_warp):
                site.unseen_by_cuda_gdb = site.unseen_by_cuda_gdb or never.get(sm.row)
                seen_sm_code |= site.exception.code == sm.exception
                _add(groups, site)
            if sm.exception and not seen_sm_code:
                site = _sm_level_site(device, sm, sm.exception, grids, candidates)
                site.unseen_by_cuda_gdb = never.get(sm.row)
                site.twin_in_cuda_gdb = twins.get(sm.row)
                _add(groups, site)
    faults = sorted((group.fault() for group in groups.values()), key=_relevance)
    for fault in faults[:DETAILED_GROUPS]:
        _add_details(core, fault)
    omitted = max(0, len(faults) - MAX_FAULT_GROUPS)
    return Location(faults[:MAX_FAULT_GROUPS], list(residency.values()), omitted, warnings)


def _check_sms(device: Device, sms: list[SM],
               warnings: list[str]) -> tuple[dict[int, str], dict[int, str]]:
    """Warn about SM rows that disagree with the device row. Returns, by row, why cuda-gdb would
    read nothing of it (smId >= numSMs: libcudacore looks SMs up by smId for smId < numSMs) and
    why it may take another row's SM-level fields for it (rows that share an smId: the warps of
    all of them, keyed by smId and warpId, are read as one SM's, but the SM's exception and
    errorPC come from one row only)."""
    never: dict[int, str] = {}
    twins: dict[int, str] = {}
    if not sms:
        return never, twins
    where = f"device {device.dev_id} SM table (section {sms[0].section})"
    if len(sms) > device.num_sms:
        warnings.append(f"{where} has {len(sms)} rows but the device row says numSMs = "
                        f"{device.num_sms}")
    first: dict[int, SM] = {}
    for sm in sms:
        if sm.sm_id >= device.num_sms:
            never[sm.row] = (f"smId {sm.sm_id} >= numSMs {device.num_sms}: cuda-gdb never "
                             "examines this SM")
            warnings.append(f"{where} row {sm.row} has smId {sm.sm_id}, but the device has "
                            f"{device.num_sms} SMs (numSMs); cuda-gdb never examines that row")
        elif sm.sm_id in first:
            kept = first[sm.sm_id]
            twins[sm.row] = twins[kept.row] = (
                f"two SM rows with smId {sm.sm_id}: cuda-gdb takes the SM's exception and "
                "errorPC from one of them")
            warnings.append(f"device {device.dev_id}: SM rows section {kept.section} row "
                            f"{kept.row} and section {sm.section} row {sm.row} both have smId "
                            f"{sm.sm_id}; cuda-gdb reads the warps of both as one SM's and the "
                            f"SM's exception and errorPC from one row only: {ONE_OF_TWINS}")
        else:
            first[sm.sm_id] = sm
    return never, twins


def _scan_sm(core, device, sm, grids, residency, warnings, candidates, first_warp):
    """Every faulting lane on one SM, and every warp with an errorPC but no lane marked.

    Warps on the SM are collected in ``candidates`` (blame for an SM-level exception is not
    theirs to take). A warp with a valid errorPC and no lane marked, on an SM whose row records
    no exception (before r555 it cannot), stands for an unknown exception: it is then the only
    evidence left. ``first_warp`` holds, by warpId, the first warp row seen under this smId.
    """
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
            kept = first_warp.setdefault(warp.warp_id, warp)
            unseen = twin = None
            if warp.warp_id >= device.num_warps_per_sm:
                unseen = _unseen_warp(device, sm, warp, warnings)
            elif kept is not warp:
                twin = _twin_warp(device, sm, warp, kept, warnings)
            if sm.exception:
                candidates.append(Candidate(sm, grid, cta, warp))
            scan = core.scan_lanes(warp)
            twin_lanes = set()
            if scan.zero_rows or scan.duplicates:
                _warn_lanes(device, sm, warp, scan, warnings)
                twin_lanes = {row for rows in scan.duplicates.values() for row in rows}
            head = scan.head
            if grid is not None:
                stats.warps += 1
                stats.positions[head.virtual_pc if head else None] += 1
            error_pc = warp.valid_error_pc
            for lane in scan.faulting:
                pc, source = (error_pc, PC_FROM_WARP) if error_pc is not None else (
                    lane.virtual_pc, PC_FROM_LANE)
                site = Site(exceptions.describe(lane.exception), device, sm, cta, warp, lane,
                            grid, pc, source, True, unseen or _invalid_lane(device, warp, lane),
                            twin)
                if (lane.section, lane.row) in twin_lanes:
                    site.twin_in_cuda_gdb = (f"two lane rows with laneId {lane.ln}: cuda-gdb "
                                             "shows one of them")
                yield site
            if not scan.faulting and error_pc is not None and not sm.exception:
                yield Site(exceptions.describe(exceptions.UNKNOWN), device, sm, cta, warp, head,
                           grid, error_pc, PC_FROM_WARP, False, unseen, twin)


def _unseen_warp(device, sm, warp, warnings) -> str:
    """libcudacore reads warps by warpId for warpId < numWarpsPerSM only."""
    warnings.append(f"device {device.dev_id} SM {sm.sm_id}: warp table (section {warp.section}) "
                    f"row {warp.row} has warpId {warp.warp_id} >= numWarpsPerSM "
                    f"{device.num_warps_per_sm}; cuda-gdb never examines it")
    return f"warpId {warp.warp_id} >= numWarpsPerSM: cuda-gdb never examines this warp"


def _twin_warp(device, sm, warp, kept: Warp, warnings) -> str:
    """libcudacore keys warps by (smId, warpId): of two rows with one key it shows one."""
    warnings.append(f"device {device.dev_id} SM {sm.sm_id}: two warp rows with warpId "
                    f"{warp.warp_id} (section {kept.section} row {kept.row} and section "
                    f"{warp.section} row {warp.row}); {ONE_OF_TWINS}")
    return f"two warp rows with warpId {warp.warp_id} on SM {sm.sm_id}: cuda-gdb shows one of them"


def _warn_lanes(device, sm, warp, scan: LaneScan, warnings) -> None:
    where = f"device {device.dev_id} SM {sm.sm_id} warp {warp.warp_id}"
    if scan.zero_rows:
        section = scan.zero_rows[0][0]
        zero = ", ".join(str(row) for _, row in scan.zero_rows)
        warnings.append(f"{where}: lane table (section {section}) rows {zero} are all zero: "
                        "padding, not lanes; skipped (cuda-gdb, which keys lanes by laneId, reads "
                        "such a row as lane 0, in place of or beside a real lane 0 row)")
    for ln, rows in scan.duplicates.items():
        listed = " and ".join(f"section {s} row {r}" for s, r in rows)
        warnings.append(f"{where}: {len(rows)} lane rows with laneId {ln} ({listed}); "
                        f"{ONE_OF_TWINS}; it refuses the dump if a valid lane then has no row")


def _invalid_lane(device, warp, lane) -> str | None:
    if lane.ln >= device.num_lanes_per_warp or not warp.valid_lanes_mask >> (lane.ln & 31) & 1:
        return f"laneId {lane.ln} is not a valid lane of its warp: cuda-gdb never reads it"
    if not warp.active_lanes_mask >> (lane.ln & 31) & 1:
        # readDeviceExceptionState marks an SM as faulting for its *active* lanes' exceptions only
        return (f"laneId {lane.ln} is not active in its warp (activeLanesMask "
                f"{warp.active_lanes_mask:#010x}): cuda-gdb looks for lane exceptions in active "
                "lanes only and, unless the SM records one itself, reports none")
    return None


def _sm_level_site(device: Device, sm: SM, code: int, grids: dict[int, Grid],
                   candidates: list[Candidate]) -> Site:
    """An exception only the SM row records: no warp, block or thread is blamed (cuda-gdb's
    coordinate for it has wildcard warp and lane); the warps still on the SM are candidates."""
    pc = sm.valid_error_pc
    resident = {c.grid.grid_id: c.grid for c in candidates if c.grid is not None}
    return Site(exceptions.describe(code), device, sm, None, None, None,
                _grid_holding(pc, resident or grids), pc, PC_FROM_SM, False,
                candidates=candidates)


def _grid_holding(pc: int | None, grids: dict[int, Grid]) -> Grid | None:
    """The grid whose entry point is the closest one below ``pc``: the likeliest owner. A grid
    with entry point 0 records no code address and is never chosen."""
    if pc is None:
        return None
    below = [grid for grid in grids.values() if 0 < grid.function_entry <= pc]
    return max(below, key=lambda grid: grid.function_entry, default=None)


def _add(groups: dict[tuple, _Group], site: Site) -> None:
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
        self.sms: set[int] = set()
        self.candidates: list[Candidate] = []
        self.unlisted_candidates = 0
        self.lanes = 0
        self.warps: set[tuple[int, int]] = set()
        self.kept_warps: dict[tuple[int, int, int], tuple[CTA, Warp]] = {}
        self.blocks: set[Dim3] = set()
        self.threads: set[Dim3] = set()
        self.reported = False

    def add(self, site: Site) -> None:
        if _precedence(site) < _precedence(self.first):
            self.first = site
        self.sms.add(site.sm.sm_id)
        room = MAX_CANDIDATES - len(self.candidates)
        self.candidates += site.candidates[:room]
        self.unlisted_candidates += max(0, len(site.candidates) - room)
        self.lanes += site.lane_marked
        if site.warp is not None:
            self.warps.add((site.sm.sm_id, site.warp.warp_id))
            key = (site.warp.section, site.warp.row, site.sm.sm_id)
            if site.lane_marked and site.cta is not None and len(self.kept_warps) < KEPT_WARPS:
                self.kept_warps.setdefault(key, (site.cta, site.warp))
        if site.cta is not None:
            self.blocks.add(site.cta.block_idx)
        if site.lane is not None:
            self.threads.add(site.lane.thread_idx)
        self.reported |= site.sm.exception == site.exception.code

    def fault(self) -> FaultGroup:
        head = self.first
        fault = FaultGroup(
            exception=head.exception,
            site=head,
            faulting_lanes=self.lanes,
            faulting_warps=len(self.warps),
            blocks=_range(self.blocks),
            threads=_range(self.threads),
            reported_by_sm=self.reported,
            sms=sorted(self.sms),
            candidates=self.candidates,
            grid_inferred=head.cta is None and head.grid is not None,
            warps=sorted(self.kept_warps.values(),
                         key=lambda kept: (kept[1] is not head.warp, kept[0].sm.sm_id, kept[1].warp_id)),
        )
        fault.notes.extend(_notes(fault))
        if self.unlisted_candidates:
            fault.notes.append(f"{counted(self.unlisted_candidates, 'more candidate warp')} not listed")
        return fault


def _notes(fault: FaultGroup) -> list[str]:
    """What a reader of the report needs to know to trust (or not) what the fault says."""
    head, notes = fault.site, []
    if head.cta is None and fault.candidates:
        notes.append("SM-level exception: no lane claims it, so no warp, block or thread is "
                     "blamed (as in cuda-gdb); the warps still on the SM are listed as "
                     "candidates only")
    elif head.cta is None:
        notes.append("the SM recorded this exception after the faulting warp had exited: no "
                     "block or thread is left in the dump")
    if fault.grid_inferred:
        notes.append("kernel deduced from the PC: the nearest kernel entry point below it")
    if len(fault.sms) > 1:
        notes.append(f"this fault group spans {len(fault.sms)} SMs: "
                     + ", ".join(str(sm) for sm in fault.sms))
    if head.unseen_by_cuda_gdb:
        notes.append(f"cuda-gdb would not show this fault: {head.unseen_by_cuda_gdb}")
    if head.twin_in_cuda_gdb:
        notes.append(f"cuda-gdb may show another row in this one's place: "
                     f"{head.twin_in_cuda_gdb}")
    if head.pc_source == PC_FROM_LANE:
        notes.append("the warp's errorPC is not valid; the lane's current PC is shown")
    if head.warp is not None and not head.lane_marked:
        notes.append("warp-scoped exception with no lane marked; the first active lane is shown")
    if head.exception.code == exceptions.UNKNOWN and not head.lane_marked:
        notes.append("no exception code is recorded, only the warp's valid errorPC: cuda-gdb "
                     "reports no CUDA exception for such a dump (it stops with SIGTRAP)")
    if not head.exception.known:
        notes.append(f"exception code {head.exception.code} is newer than crashlab's table")
    if head.sm.exception_string:
        notes.append(f"driver's message: {head.sm.exception_string}")
    return notes


def _range(points: set[Dim3]) -> Dim3Range | None:
    if not points:
        return None
    order = sorted(points, key=lambda p: (p[2], p[1], p[0]))
    return Dim3Range(first=order[0], last=order[-1], count=len(order))


def _precedence(site: Site) -> tuple:
    """cuda-gdb's choice among sites: a lane with its own exception before an SM-level one,
    rows it reads before rows it never reads, then device, SM, warp and lane by id (of rows
    that share an id, the first found, as cuda-gdb's choice among them cannot be told)."""
    return (not site.lane_marked, site.unseen_by_cuda_gdb is not None, site.coordinate)


def _relevance(fault: FaultGroup):
    """The fault cuda-gdb would stop at first, then the others in the order it would meet them;
    among SM-level ones, real exception codes before unknown ones."""
    site = fault.site
    return (
        not fault.faulting_lanes,
        site.unseen_by_cuda_gdb is not None,
        fault.exception.code == exceptions.UNKNOWN or not fault.exception.known,
        site.coordinate,
    )


def _add_details(core: CoreDump, fault: FaultGroup) -> None:
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
