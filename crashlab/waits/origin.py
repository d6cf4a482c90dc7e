"""Where a polled address came from: crashlab.explain's backward slice, run from the polling load.

The slice is the one that explains a faulting access (crashlab.explain.slice.Slicer), started at
the loop's load instead of a faulting instruction, with one waiting lane's registers and launch
coordinates: it gives the address as a formula of its roots (a kernel parameter, blockIdx,
threadIdx, a loaded value), and says where the dumped registers do not fit the code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..coredump.core import CoreDump
from ..coredump.model import Grid
from ..cubin import CubinError
from ..cubin.nvinfo import kernel_param_layout
from ..demangle import demangle
from ..explain.launch import Launch, ParamSource, cluster_rank, launch_dimensions
from ..explain.slice import Slicer
from ..report import model
from ..report.params import argument_types
from ..sass.finder import CodeLocation
from ..sass.flow import FunctionCode
from ..sass.operands import MemoryOperand
from .polled import lane_registers
from .shape import Polling
from .stand import WarpAt


@dataclass
class Origin:
    """The polled address's formula, its roots (the parameter first) and what stopped it."""

    formula: str | None = None
    roots: list[model.Root] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)

    @property
    def root(self) -> model.Root | None:
        """The root a reader names the address by: a parameter, else the first one known."""
        return next((r for r in self.roots if r.kind == "param"), None) or next(
            (r for r in self.roots if r.kind != "unknown"), None)


def address_origin(core: CoreDump, grid: Grid, location: CodeLocation,
                   code: FunctionCode, polling: Polling, operand: MemoryOperand,
                   sample: WarpAt, polled: int | None) -> Origin:
    """The slice of the polling load's address for ``sample``; ``polled`` is the address its
    dumped registers give."""
    at = code.index_of[polling.load.address]
    dump_at = code.index_of.get(sample.pc - location.text_address) if sample.pc else None
    registers, uniforms = lane_registers(core, sample, uniform=True)
    findings = Slicer(code, at, dump_at, registers, uniforms, _launch(sample, grid),
                      _param_source(core, grid, location)).slice(operand, at)
    origin = Origin(formula=findings.formula, roots=findings.roots)
    origin.roots.sort(key=lambda r: r.kind != "param")
    filled = _fill_from_dump(origin, findings.value.text, polled)
    named = ", ".join(r.name + (f" = {r.value}" if r.value else "") for r in origin.roots)
    origin.evidence.append(f"{origin.formula} (backward slice from the load)"
                           + (f"; roots: {named}" if named else ""))
    origin.evidence += filled
    origin.evidence += [f"slice stopped: {stop}" for stop in findings.stops]
    if findings.mismatches:
        origin.evidence.append("the dumped registers do not fit the code: "
                               + "; ".join(findings.mismatches))
    return origin


def _fill_from_dump(origin: Origin, formula: str, polled: int | None) -> list[str]:
    """A parameter used as the address itself (``address = arg0``) whose buffer the dump lacks
    takes the value the lane's registers give; the note saying so."""
    notes = []
    for root in origin.roots:
        if root.kind == "param" and root.value is None and polled is not None \
                and formula == f"arg{root.param_ordinal}":
            root.value, root.provenance = f"{polled:#x}", "dump"
            notes.append(f"the dump holds no parameter buffer for this kernel: {root.name}'s "
                         "value is read from the registers")
    return notes


def _launch(at: WarpAt, grid: Grid) -> Launch:
    """The sample lane's coordinates, as the slice reads special registers and bank-0 slots."""
    specials = {f"SR_CTAID.{axis}": value
                for axis, value in zip("XYZ", at.cta.block_idx, strict=True)}
    if at.head is not None:
        specials.update({f"SR_TID.{axis}": v
                         for axis, v in zip("XYZ", at.head.thread_idx, strict=True)})
        specials["SR_LANEID"] = at.head.ln
    shape = at.cta.cluster_dim if at.cta.cluster_dim and all(at.cta.cluster_dim) else (1, 1, 1)
    rank = cluster_rank(at.cta.block_idx, shape)
    if rank is not None:  # always: the shape has no zero in it
        specials["SR_CgaCtaId"] = rank
    return Launch(specials, launch_dimensions(grid.block_dim, grid.grid_dim))


def _param_source(core: CoreDump, grid: Grid, location: CodeLocation) -> ParamSource:
    """The kernel's parameter area: its layout (with the signature's types where their count
    matches) and the dump's bytes of it, where it has them."""
    try:
        cubin = core.cubin(location.image_section)
    except CubinError:
        return ParamSource(None, None, ())
    layout, _ = kernel_param_layout(cubin, grid.function)
    if layout is None:
        return ParamSource(None, None, ())
    types = argument_types(demangle(grid.function))
    if types is not None and len(types) != len(layout.params):
        types = None
    block = core.params(grid)
    params = tuple((p.ordinal, p.offset, p.size, types[k] if types else None)
                   for k, p in enumerate(layout.params))
    return ParamSource(layout.cbank_offset, block.data if block else None, params)
