"""One fault explained: the faulting instruction's memory access judged for every marked lane
on that lane's registers (crashlab.explain.lanes says whose access broke the bound), the culprit's
address against the bounds the dump holds, and the slice of it back to its roots, checked against
the dumped registers (crashlab.report.model.Explanation). Of a copy's two memory operands, the one
that faulted is chosen by the exception and the verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..coredump.core import CoreDump
from ..coredump.fault import FaultGroup, Site
from ..coredump.model import CTA, Lane, Warp
from ..cubin import CubinError
from ..cubin.nvinfo import ParamLayout, SharedLayout, shared_reserve
from ..report import model
from ..report.coredump import named_words
from ..report.params import is_integer
from ..report.why import access_phrase, group_phrase
from ..sass.access import Side
from ..sass.finder import CodeFinder, CodeLocation, function_code
from ..sass.flow import FunctionCode
from ..sass.instruction import Instruction
from ..sass.operands import MemoryOperand, effective_address, parse_constant, parse_memory_operand
from ..sass.semantics import signed32
from .bounds import Bounds, Windows, classify, verdict
from .lanes import Judgement, Reading, culprit, faulting_side, grouped
from .launch import Launch, ParamSource, cluster_rank, launch_dimensions
from .slice import Findings, Slicer

#: marked lanes judged at most, over the group's kept warps: a dump in which thousands of lanes
#: fault costs this many register reads, not one per lane
MAX_JUDGED_LANES = 1024


@dataclass
class _Function:
    """What every lane of one fault shares: the code around the faulting instruction, the
    parameters, the windows and the static bounds."""

    core: CoreDump
    found: FaultGroup
    fault: model.Fault
    location: CodeLocation
    code: FunctionCode
    at: int
    params: ParamSource
    windows: Windows
    sides: list[tuple[Side, MemoryOperand]]
    #: the bounds every lane shares (a warp's shared memory size and a lane's R1 replace theirs)
    bounds: Bounds

    def slicer(self, cta: CTA, warp: Warp, lane: Lane, registers: list[int] | None,
               uniform: list[int] | None, predicates: list[bool] | None,
               uniform_predicates: list[bool] | None) -> Slicer:
        dump_at = self.code.index_of.get(lane.virtual_pc - self.location.text_address)
        return Slicer(self.code, self.at, dump_at, registers, uniform,
                      _launch(self.fault, cta.block_idx, lane), self.params, predicates,
                      uniform_predicates)


def explain(core: CoreDump, finder: CodeFinder, found: FaultGroup, fault: model.Fault,
            layout: ParamLayout | None) -> model.Explanation | None:
    """The explanation of one detailed fault, None where its instruction is not a memory access
    or no listing holds it."""
    site = found.site
    if site.pc is None:
        return None
    found_code = function_code(finder, site.pc, site.grid)
    if isinstance(found_code, str):
        return None
    location, code = found_code
    at = code.index_of.get(site.pc - location.text_address)
    if at is None:
        return None
    ins = code.instructions[at]
    sides = ins.sides
    if not sides:
        return None
    first = sides[0].access
    base = model.Explanation.model_construct(instruction=ins.text, pc=f"{site.pc:#x}", access=first.kind,
                             space=first.space, access_bytes=first.bytes,
                             verdict=model.Verdict.model_construct(kind="undetermined", basis=""),
                             trust="consistent", focus_lane=fault.lane)
    operands = [m for m in map(_address_operand, ins.operands) if m is not None]
    decoded = [(side, _widened(operands[side.position], side)) for side in sides
               if side.access.undecoded is None and side.position < len(operands)]
    if not decoded:
        undecoded = next((s.access.undecoded for s in sides if s.access.undecoded), None)
        base.verdict.basis = undecoded or (
            f"the memory operand of {ins.opcode} is not one the grammar reads")
        return base
    function = _Function(core, found, fault, location, code, at, _param_source(fault, layout),
                         _windows(core, site), decoded, _bounds(core, finder, found, fault, location))
    explanation = _explained(base, function)
    explanation.other_operands += [
        model.OtherOperand.model_construct(operand=operands[s.position].text if s.position < len(operands) else "?",
                           access=s.access.kind, space=s.access.space,
                           verdict=model.Verdict.model_construct(kind="undetermined", basis=s.access.undecoded))
        for s in sides if s.access.undecoded is not None]
    return explanation


def _widened(operand: MemoryOperand, side: Side) -> MemoryOperand:
    """A bulk copy's global side names one uniform register and reads the pair it starts."""
    if not side.wide or operand.wide or operand.register is not None or operand.uniform is None:
        return operand
    pair = replace(operand.uniform, wide=True)
    return replace(operand, register=pair, uniform=None)


def _address_operand(text: str) -> MemoryOperand | None:
    """A memory operand, or a constant-bank reference read as one (``c[0x3][R2+0x8]``: the
    register and offset address the bank, whose size the dump's constant bank table gives)."""
    operand = parse_memory_operand(text)
    if operand is not None:
        return operand
    constant = parse_constant(text)
    if constant is None or constant.negated:
        return None
    register = constant.register
    return MemoryOperand(text=text.strip(), register=None if register and register.uniform else register,
                         uniform=register if register and register.uniform else None,
                         offset=constant.offset, bank=constant.bank)


def _explained(explanation: model.Explanation, function: _Function) -> model.Explanation:
    """Every marked lane judged on its own registers; the culprit's access explained in full."""
    found, exception = function.found, function.found.exception.name
    judged, not_judged = _judge_lanes(function)
    explanation.lanes_judged, explanation.lanes_not_judged = len(judged), not_judged
    if not judged:
        return explanation
    chosen, breaks = culprit(judged, exception, found.site.lane)
    explanation.breaks_bound = breaks
    explanation.culprit_lane = chosen.access()
    explanation.lanes = grouped(judged, chosen.reading.verdict.kind)
    reading = chosen.reading
    side, operand = next(pair for pair in function.sides if pair[0].position == reading.position)
    registers = function.core.registers(chosen.lane)
    explanation.culprit_lane.registers = named_words(registers, "R")
    uniform = function.core.uniform_registers(chosen.warp)
    slicer = function.slicer(chosen.cta, chosen.warp, chosen.lane, registers, uniform,
                             function.core.predicates(chosen.lane),
                             function.core.uniform_predicates(chosen.warp))
    findings = slicer.slice(operand, function.at)
    explanation.access, explanation.access_bytes = side.access.kind, side.access.bytes
    explanation.operand = operand.text
    explanation.space = reading.space
    explanation.address = None if reading.address is None else f"{reading.address:#x}"
    explanation.address_provenance = reading.provenance  # type: ignore[assignment]
    explanation.verdict = reading.verdict
    explanation.roots, explanation.stops = findings.roots, findings.stops
    explanation.trust, explanation.formula = findings.trust, findings.formula
    explanation.compare_with = _integer_params(function.fault, explanation)
    explanation.other_operands = [
        model.OtherOperand.model_construct(operand=other.operand, access=other.access,
                           space=other.space,
                           address=None if other.address is None else f"{other.address:#x}",
                           verdict=other.verdict)
        for other in chosen.others]
    instruction = function.code.instructions[function.at]
    explanation.story = _story(explanation, instruction, reading.where, reading.space, findings,
                               function.found.site.lane)
    return explanation


def _judge_lanes(function: _Function) -> tuple[list[Judgement], int]:
    """(every marked lane of the group's kept warps judged, up to MAX_JUDGED_LANES; how many
    marked lanes were left)."""
    core, found = function.core, function.found
    warps = found.warps or ([(found.site.cta, found.site.warp)]
                            if found.site.cta is not None and found.site.warp is not None else [])
    judged: list[Judgement] = []
    left = 0
    for cta, warp in warps:
        uniform, uniform_predicates = core.uniform_registers(warp), core.uniform_predicates(warp)
        bounds = replace(function.bounds, shared_mem_size=warp.shared_mem_size or None)
        for lane in core.scan_lanes(warp).faulting:
            if len(judged) >= MAX_JUDGED_LANES:
                left += 1
                continue
            registers = core.registers(lane)
            slicer = function.slicer(cta, warp, lane, registers, uniform, core.predicates(lane),
                                     uniform_predicates)
            lane_bounds = replace(bounds, stack_pointer=_stack_pointer(registers))
            readings = [_reading(function, side, operand, slicer, registers, uniform, lane_bounds)
                        for side, operand in function.sides]
            chosen = faulting_side(readings, found.exception.name)
            judged.append(Judgement(cta, warp, lane, chosen,
                                    [r for r in readings if r is not chosen]))
    left += max(0, found.faulting_lanes - len(judged) - left)
    return judged, left


def _reading(function: _Function, side: Side, operand: MemoryOperand, slicer: Slicer,
             registers: list[int] | None, uniform: list[int] | None, bounds: Bounds) -> Reading:
    """One operand as one lane's registers give it: the dumped address where the lane has not
    written a register it reads since the fault, else the slice's recomputed one."""
    dumped = effective_address(operand, registers or [], uniform or [])
    overwritten = any(slicer.overwritten(r) for r in _words(operand))
    address, provenance = (None, None) if overwritten or dumped is None else (dumped, "dump")
    if address is None and registers is not None:
        sliced = slicer.address(operand, function.at)
        if sliced.value is not None:
            address, provenance = sliced.value, "recomputed"
    access = side.access
    space, where = (access.space, None) if address is None else classify(
        access.space, address, operand.wide, function.windows)
    return Reading(position=side.position, operand=operand.text, access=access.kind, space=space,
                   address=address, where=where, provenance=provenance,
                   verdict=verdict(space, where, access.bytes, bounds, operand.bank))


def _stack_pointer(registers: list[int] | None) -> int | None:
    return registers[1] if registers and len(registers) > 1 else None


def _words(operand: MemoryOperand) -> list[str]:
    return [w for r in operand.registers() for w in r.words()]


def _story(explanation: model.Explanation, ins: Instruction, where: int | None, space: str,
           findings: Findings, focus: Lane | None) -> list[str]:
    size = f"{explanation.access_bytes}-byte " if explanation.access_bytes else ""
    at = "at an address the dump does not give" if explanation.address is None else (
        f"at {space} address {where:#x}" if space in ("shared", "local") and where is not None
        and explanation.address != f"{where:#x}" else f"at {space} address {explanation.address}")
    story = [_lanes_sentence(explanation, focus),
             f"{ins.opcode} at +{ins.address:#x}: {_whose(explanation)} {size}{explanation.access} {at}.",
             explanation.verdict.basis[:1].upper() + explanation.verdict.basis[1:] + "."]
    for other in explanation.other_operands:
        shown = f" at {other.address}" if other.address else ""
        story.append(f"Its other operand, {other.operand}, is a "
                     f"{access_phrase(other.access, other.space)}{shown} ({other.verdict.kind}): "
                     "not the side that faulted.")
    for root in explanation.roots:
        if root.kind == "load":
            loaded = "a value" if not root.value else root.value if int(root.value, 16) >> 32 \
                else f"{signed32(int(root.value, 16))} ({root.value})"
            story.append(f"{root.name} loaded {loaded} into the address"
                         + (f", {root.detail}" if root.detail else "") + ".")
    story += [line + "." for line in findings.story]
    if findings.mismatches:
        story.append("The dumped registers do not fit the code: "
                     + "; ".join(findings.mismatches) + ". Nothing here is a cause.")
    return [line for line in story if line]


def _whose(explanation: model.Explanation) -> str:
    lane = explanation.culprit_lane
    return "a" if lane is None else f"lane {lane.lane}'s"


def _lanes_sentence(explanation: model.Explanation, focus: Lane | None) -> str:
    """Which marked lanes broke a bound, and which lane cuda-gdb focuses: empty for one lane."""
    if explanation.lanes_judged <= 1:
        return ""
    groups = "; ".join(f"{group_phrase(group)}" for group in explanation.lanes)
    focused = "" if focus is None else f" cuda-gdb focuses lane {focus.ln}."
    if not explanation.breaks_bound:
        return (f"No marked lane's access breaks a bound the dump holds ({groups}); the lane "
                f"explained is the one cuda-gdb focuses, lane {focus.ln if focus else '?'}.")
    return f"Of {explanation.lanes_judged} marked lanes: {groups}.{focused}"


def _integer_params(fault: model.Fault, explanation: model.Explanation) -> list[str]:
    """Integer parameters, as candidates for the bound an index broke (never asserted): only
    where a bound is in question (not a misaligned, null or non-pointer address), and not those
    the address is computed from (a root: a stride, an offset)."""
    if fault.params is None or explanation.verdict.kind not in ("out-of-bounds", "undetermined"):
        return []
    inputs = {root.param_ordinal for root in explanation.roots if root.kind == "param"}
    found = []
    for param in fault.params.values:
        if is_integer(param.type, param.size) and param.value is not None \
                and param.ordinal not in inputs:
            found.append(f"param {param.ordinal}" + (f" ({param.type})" if param.type else "")
                         + f" = {param.shown}")
    return found


def _launch(fault: model.Fault, block_idx: tuple[int, int, int], lane: Lane) -> Launch:
    """The special registers of one lane: its thread, its block, its laneId, its cluster rank."""
    specials: dict[str, int] = {}
    for axis, k in (("X", 0), ("Y", 1), ("Z", 2)):
        specials[f"SR_TID.{axis}"] = lane.thread_idx[k]
        specials[f"SR_CTAID.{axis}"] = block_idx[k]
    specials["SR_LANEID"] = lane.ln
    rank = cluster_rank(block_idx, fault.cluster_dim or (1, 1, 1))
    if rank is not None:
        specials["SR_CgaCtaId"] = rank
    return Launch(specials, launch_dimensions(fault.block_dim, fault.grid_dim))


def _param_source(fault: model.Fault, layout: ParamLayout | None) -> ParamSource:
    data = bytes.fromhex(fault.params.hex) if fault.params is not None else None
    typed = {p.ordinal: p.type for p in fault.params.values} if fault.params else {}
    params = tuple((p.ordinal, p.offset, p.size, typed.get(p.ordinal))
                   for p in (layout.params if layout else []))
    return ParamSource(layout.cbank_offset if layout else None, data, params)


def _windows(core: CoreDump, site: Site) -> Windows:
    grid = site.grid
    if grid is None:
        return Windows(None, None)
    for context in core.contexts(grid.device):
        if context.context_id == grid.context_id:
            return Windows(context.shared_window_base, context.local_window_base)
    return Windows(None, None)


def _bounds(core: CoreDump, finder: CodeFinder, found: FaultGroup, fault: model.Fault,
            location: CodeLocation) -> Bounds:
    """The bounds the dump holds for every lane of the fault: the cubin's shared layout and frame
    size, the cluster, the constant banks, the global segments."""
    site = found.site
    grid = site.grid
    shared, frame_size = _cubin_bounds(finder, location, grid.function if grid else "",
                                       site.device.sm_type)
    cluster = fault.cluster_dim or (1, 1, 1)
    return Bounds(
        shared=shared,
        sm90=bool(shared and shared.start) or bool(shared_reserve(site.device.sm_type)),
        cluster_blocks=max(1, cluster[0] * cluster[1] * cluster[2]),
        frame_size=frame_size,
        constant_banks={bank.bank_id: bank.size for bank in found.const_banks},
        outermost=not found.backtrace,
        global_segments=[(region.address, region.size) for region in core.process_memory()],
    )


def _cubin_bounds(finder: CodeFinder, location: CodeLocation, kernel: str,
                  sm_type: str) -> tuple[SharedLayout | None, int | None]:
    """The kernel's static shared allocation and the faulting function's frame size; a part the
    cubin does not hold, or holds damaged, is absent (its verdict says undetermined)."""
    cubin = finder.cubin(location.image_section)
    if cubin is None:
        return None, None
    try:
        shared = cubin.shared_layout(kernel, sm_type)
    except CubinError:
        shared = None
    try:
        frame_size = cubin.frame_sizes.get(location.function_symbol)
    except CubinError:
        frame_size = None
    return shared, frame_size
