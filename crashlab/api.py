"""The Python API under the CLI: each function runs one pipeline and returns a TriageReport."""

from __future__ import annotations

import os

from .coredump.core import CoreDump
from .coredump.fault import DETAILED_GROUPS, locate
from .report.coredump import MAX_POSITIONS, build
from .report.model import TriageReport
from .sass import CodeFinder, CodeLocation, SassView, disassemble


def inspect(path: str | os.PathLike, *, sass: bool = True, context: int = 8) -> TriageReport:
    """Triage a CUDA coredump (plain or gzip): faults, kernels, SASS around each faulting PC.

    Raises crashlab.errors.BadInput for a file that is not a readable CUDA coredump.
    ``sass=False`` skips disassembly; ``context`` is the number of instructions shown on each
    side of the faulting one.
    """
    with CoreDump(path) as core:
        location = locate(core)
        finder = CodeFinder(core)
        views = []
        for fault in location.faults[:DETAILED_GROUPS]:
            site = fault.site
            if site.pc is None:
                views.append(SassView(unavailable_reason="the dump records no PC for this fault"))
            elif not sass:
                views.append(SassView(unavailable_reason="disassembly not requested"))
            else:
                views.append(disassemble(finder, site.pc, grid=site.grid, context=context,
                                         current_pc=site.lane.virtual_pc if site.lane else None))
        code = _code_map(finder, location)
        warnings = core.warnings + location.warnings + finder.problems
        return build(core, location, views, code, warnings)


def _code_map(finder: CodeFinder, location) -> dict[int, CodeLocation | None]:
    """Functions of the other PCs a report names: return addresses and where warps stand."""
    code: dict[int, CodeLocation | None] = {}
    wanted = [(frame.virtual_return_address, fault.site.grid)
              for fault in location.faults[:DETAILED_GROUPS] for frame in fault.backtrace]
    wanted += [(position.pc, stats.grid) for stats in location.residency
               for position in stats.sorted_positions()[:MAX_POSITIONS] if position.pc is not None]
    for pc, grid in wanted:
        if pc not in code:
            found = finder.locate(pc, grid)
            code[pc] = found[0] if found else None
    return code
