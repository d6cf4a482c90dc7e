"""The Python API under the CLI: each function runs one pipeline and returns a TriageReport."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .advice.dump import advised
from .coredump.core import CoreDump
from .coredump.fault import DETAILED_GROUPS, Location, locate
from .cubin.nvinfo import ParamLayout, kernel_param_layout
from .owner import Clues, owner_of
from .report.coredump import MAX_POSITIONS, build
from .report.model import TriageReport
from .sass.finder import CodeFinder, CodeLocation
from .sass.instruction import Instruction
from .sass.view import SassView, disassemble, instruction_at
from .signature import compute as signature_of

if TYPE_CHECKING:  # the hang reading's model: imported when a capture is read
    from .hangs.model import HangReading
    from .report.kernellog import KernelLog


def inspect(path: str | os.PathLike, *, sass: bool = True, context: int = 8,
            debugger: bool = False, debugger_program: str | None = None,
            debugger_timeout: float = 60.0, explain: bool = True,
            triton_caches: tuple[os.PathLike, ...] = (),
            kernel_log: str | os.PathLike | None = None,
            host: str | None = None) -> TriageReport:
    """Triage a CUDA coredump (plain or gzip): faults, kernels, SASS around each faulting PC.

    Raises crashlab.errors.BadInput for a file that is not a readable CUDA coredump.
    ``sass=False`` skips disassembly; ``context`` is the number of instructions shown on each
    side of the faulting one. ``debugger=True`` adds cuda-gdb's view of each fault and its
    agreement with the native one (report.debugger); without cuda-gdb that section says why it
    is empty and the rest of the report is the same. ``debugger_program`` names the debugger
    (default: cuda-gdb as found by crashlab.gdb.driver.find_cuda_gdb); ``debugger_timeout`` is
    the limit of each debugger command in seconds (loading the dump gets 15 times as long).
    ``explain`` fills each detailed fault's ``explanation`` (crashlab.explain; needs ``sass``)
    and, in a dump with no exception, each kernel's ``waits`` (crashlab.waits).
    ``triton_caches``: Triton JIT cache folders in which a faulting module image is looked for
    (crashlab.owner), where the dump was taken on this machine (serve passes the server's).
    ``kernel_log``: a file of dmesg, journalctl -k or syslog text; its Xid lines are decoded
    into report.kernel_log and held against the faults (crashlab.incidents.xidcheck). It is
    read first, so that a log that cannot be read is refused before the dump is. ``host``: the
    host the dump crashed on, where known (its run's), which the log's syslog host is held
    against.
    """
    log = _kernel_log(kernel_log) if kernel_log is not None else None
    with CoreDump(path) as core:
        location = locate(core)
        finder = CodeFinder(core)
        views = []
        for group in location.faults[:DETAILED_GROUPS]:
            site = group.site
            if site.pc is None:
                views.append(SassView(unavailable_reason="the dump records no PC for this fault"))
            elif not sass:  # the function and its source line are still named: no nvdisasm needed
                found = finder.locate(site.pc, site.grid)
                views.append(SassView(location=found,
                                      source=finder.source_lines(found) if found else [],
                                      unavailable_reason="disassembly not requested"))
            else:
                views.append(disassemble(finder, site.pc, grid=site.grid, context=context,
                                         current_pc=site.lane.virtual_pc if site.lane else None))
        code = _code_map(finder, location)
        stands = _stands(finder, location, sass)
        warnings = core.warnings + location.warnings + finder.problems
        layouts = _param_layouts(core, finder, location)
        report = build(core, location, views, code, warnings, layouts, stands)
        if explain and sass:
            from .explain.engine import explain as explain_fault  # not for --no-sass, debug, replay
            from .waits import explain_waits

            # layouts covers the first DETAILED_GROUPS groups only: the rest are not explained
            for group, fault, (layout, _) in zip(location.faults, report.faults, layouts,
                                                 strict=False):
                fault.explanation = explain_fault(core, finder, group, fault, layout)
            if not report.faults:
                _attach_waits(report, explain_waits(core, finder))
        else:
            report.analysis_skipped = _skipped(report, sass)
        report.signature = signature_of(report)
        _attach_owners(core, finder, location, report, tuple(map(Path, triton_caches)))
    if log is not None:
        from .incidents.xidcheck import check as check_xids

        log.checks = check_xids(log, report, host)
        report.kernel_log = log
    report.advice = advised(report)
    if debugger:
        from .gdb.triage import view as debugger_view  # pexpect and pygdbmi only when asked

        report.debugger = debugger_view(os.fspath(path), report, program=debugger_program,
                                        command_timeout=debugger_timeout,
                                        load_timeout=15 * debugger_timeout,
                                        context=context)
    return report


def read_hang(path: str | os.PathLike, *, sass: bool = True, gpu_dumps: bool = True) -> HangReading:
    """Read a hang capture across its ranks (crashlab.hangs): ``path`` is a run directory (its
    newest capture) or a capture folder. Each rank's GPU dump is triaged by :func:`inspect`
    (``sass`` as there; ``gpu_dumps=False`` leaves them unread). Raises
    crashlab.errors.BadInput where ``path`` holds no capture or its capture.json is not one; a
    source file crashlab cannot use is a note on its rank, never an error."""
    from .hangs.reading import read

    def gpu_reader(dump: Path) -> TriageReport:
        return inspect(dump, sass=sass)

    return read(Path(path), gpu_reader if gpu_dumps else None)


def _kernel_log(path: str | os.PathLike) -> KernelLog:
    """The log's Xids decoded; the Xid reader is imported only for a log (inspect of a dump
    alone does without it)."""
    from .incidents.kernellogfile import read_kernel_log

    return read_kernel_log(os.fspath(path))


def _skipped(report: TriageReport, sass: bool) -> str | None:
    """What was not computed and why, for every view to say once: the explanation of the
    faults, or in a dump with no exception what the warps wait for; None where neither applies
    (no fault and no resident warp)."""
    if report.faults:
        what = "the explanation of the faults (why)"
    elif any(kernel.warps_at for kernel in report.kernels):
        what = "what the warps wait for"
    else:
        return None
    return (f"{what}, which is read from the SASS that --no-sass leaves out" if not sass
            else f"{what}, with --no-explain")


def _attach_owners(core: CoreDump, finder: CodeFinder, location: Location,
                   report: TriageReport, triton_caches: tuple[Path, ...]) -> None:
    """Each detailed fault's owner, from its kernel's name and the module image holding its PC
    (serve adds the server's loaded libraries and package list: crashlab.supervise.owners)."""
    for group, fault in zip(location.faults[:DETAILED_GROUPS], report.faults, strict=False):
        if fault.kernel is None:
            continue
        found = finder.locate(group.site.pc, group.site.grid) if group.site.pc is not None else None
        cubin = finder.cubin(found.image_section) if found else None
        clues = Clues(kernel=fault.kernel.name, image=cubin, triton_caches=triton_caches,
                      signature=report.signature.hash if report.signature else None)
        try:
            fault.owner = owner_of(clues)
        except Exception as exc:  # files the dump does not own (a Triton cache): lose the owner only
            fault.notes.append(f"the owner was not named: {type(exc).__name__}: {exc}"[:300])


def _attach_waits(report: TriageReport, waits: dict[tuple[int, int], list]) -> None:
    """A dump with no exception: what each resident kernel's warps wait for."""
    for kernel in report.kernels:
        kernel.waits = waits.get((kernel.device, kernel.grid_id), [])


def _positions(location):
    """(PC, grid) of every group of warps the report lists, most warps first per kernel."""
    return [(position.pc, stats.grid) for stats in location.residency
            for position in stats.sorted_positions()[:MAX_POSITIONS] if position.pc is not None]


def _stands(finder: CodeFinder, location, sass: bool) -> dict[int, Instruction | None]:
    """The instruction (its text only with ``sass``), with its source lines, where each listed
    group of warps stands."""
    stands: dict[int, Instruction | None] = {}
    for pc, grid in _positions(location):
        if pc not in stands:
            stands[pc] = instruction_at(finder, pc, grid, sass=sass)
    return stands


def _code_map(finder: CodeFinder, location) -> dict[int, CodeLocation | None]:
    """Functions of the other PCs a report names: return addresses and where warps stand."""
    code: dict[int, CodeLocation | None] = {}
    wanted = [(frame.virtual_return_address, fault.site.grid)
              for fault in location.faults[:DETAILED_GROUPS] for frame in fault.backtrace]
    wanted += _positions(location)
    for pc, grid in wanted:
        if pc not in code:
            code[pc] = finder.locate(pc, grid)
    return code


def _param_layouts(core: CoreDump, finder: CodeFinder,
                   location: Location) -> list[tuple[ParamLayout | None, str]]:
    """Each detailed fault's kernel parameter layout, from the cubin holding the kernel's entry
    (a fault's PC may lie in a device function; the kernel's own .nv.info is what lays out its
    parameters). (None, why) where it cannot be had."""
    layouts: list[tuple[ParamLayout | None, str]] = []
    read: dict[tuple[int, str], tuple[ParamLayout | None, str]] = {}
    for fault in location.faults[:DETAILED_GROUPS]:
        grid = fault.site.grid
        if fault.params is None or grid is None:
            layouts.append((None, ""))
            continue
        found = finder.locate(grid.function_entry, grid)
        if found is None:
            layouts.append((None, "no cubin in the dump holds the kernel's entry"))
            continue
        key = (found.image_section, grid.function)
        if key not in read:
            read[key] = kernel_param_layout(core.cubin(key[0]), grid.function)
        layouts.append(read[key])
    return layouts
