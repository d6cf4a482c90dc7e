"""One fault explained: the faulting instruction's memory access, its address from the faulting
lane's registers, the verdict against the bounds the dump holds, and the slice of the address back
to its roots, checked against the dumped registers (crashlab.report.model.Explanation).
"""

from __future__ import annotations

from ..coredump.constants import SectionType
from ..coredump.core import CoreDump
from ..coredump.fault import FaultGroup, Site
from ..coredump.model import BacktraceFrame, ConstBank
from ..cubin_info import ParamLayout
from ..report import model
from ..report.params import is_integer
from ..sass import CodeFinder, CodeLocation, Instruction, function_listing
from .access import MemoryAccess, memory_access
from .bounds import Bounds, Windows, classify, verdict
from .cfg import FunctionCode
from .cubin_facts import kernel_facts, shared_reserve
from .operands import MemoryOperand, effective_address, parse_constant, parse_memory_operand
from .semantics import signed32
from .slice import Launch, ParamSource, Slicer, cluster_rank, launch_dimensions

_GLOBAL_KINDS = (SectionType.GLOBAL_MEM, SectionType.MANAGED_MEM)


def explain(core: CoreDump, finder: CodeFinder, found: FaultGroup, fault: model.Fault,
            layout: ParamLayout | None) -> model.Explanation | None:
    """The explanation of one detailed fault, None where its instruction is not a memory access
    or no listing holds it."""
    site = found.site
    if site.pc is None:
        return None
    listing = function_listing(finder, site.pc, site.grid)
    if isinstance(listing, str):
        return None
    location, instructions = listing
    code = FunctionCode(instructions)
    at = code.index_of.get(site.pc - location.text_address)
    if at is None:
        return None
    ins = instructions[at]
    access = memory_access(ins.opcode)
    if access is None:
        return None
    base = model.Explanation(instruction=ins.text, pc=f"{site.pc:#x}", access=access.kind,
                             space=access.space, access_bytes=access.bytes,
                             verdict=model.Verdict(kind="undetermined", basis=""),
                             trust="consistent")
    if access.undecoded:
        base.verdict.basis = access.undecoded
        return base
    operand = next((m for m in map(_address_operand, ins.operands) if m is not None), None)
    if operand is None:
        base.verdict.basis = f"the memory operand of {ins.opcode} is not one the grammar reads"
        return base
    base.operand = operand.text
    return _explained(base, core, found, fault, layout, location, code, at, access, operand)


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


def _explained(explanation: model.Explanation, core: CoreDump, found: FaultGroup,
               fault: model.Fault, layout: ParamLayout | None, location: CodeLocation,
               code: FunctionCode, at: int, access: MemoryAccess,
               operand: MemoryOperand) -> model.Explanation:
    site = found.site
    slicer = Slicer(code, at, _dump_index(code, location, site), found.registers,
                    found.uniform_registers, _launch(fault, site), _param_source(fault, layout),
                    found.predicates, found.uniform_predicates)
    sliced = slicer.address(operand, at)
    dumped = effective_address(operand, found.registers or [], found.uniform_registers or [])
    overwritten = any(slicer.overwritten(r) for r in _words(operand))
    address = None if overwritten else dumped
    explanation.address_provenance = "dump" if address is not None else None
    if address is None and sliced.value is not None:
        address, explanation.address_provenance = sliced.value, "recomputed"
    space, where = (access.space, None) if address is None else classify(
        access.space, address, operand.wide, _windows(core, site))
    explanation.space = space
    explanation.address = None if address is None else f"{address:#x}"
    bounds = _bounds(core, site, fault, location, found.registers, found.backtrace,
                     found.const_banks)
    explanation.verdict = verdict(space, where, access.bytes, bounds, operand.bank)
    explanation.roots = list(slicer.roots.values())
    explanation.stops = list(slicer.stops)
    explanation.trust = "mismatch" if slicer.mismatches else "consistent"
    explanation.formula = f"address = {sliced.text}"
    explanation.compare_with = _integer_params(fault)
    explanation.story = _story(explanation, code.instructions[at], where, space, slicer)
    return explanation


def _words(operand: MemoryOperand) -> list[str]:
    return [w for r in operand.registers() for w in r.words()]


def _story(explanation: model.Explanation, ins: Instruction, where: int | None, space: str,
           slicer: Slicer) -> list[str]:
    size = f"{explanation.access_bytes}-byte " if explanation.access_bytes else ""
    at = "at an address the dump does not give" if explanation.address is None else (
        f"at {space} address {where:#x}" if space in ("shared", "local") and
        explanation.address != f"{where:#x}" else f"at {space} address {explanation.address}")
    story = [f"{ins.opcode} at +{ins.address:#x}: a {size}{explanation.access} {at}.",
             explanation.verdict.basis[:1].upper() + explanation.verdict.basis[1:] + "."]
    for root in explanation.roots:
        if root.kind == "load":
            loaded = "a value" if not root.value else root.value if int(root.value, 16) >> 32 \
                else f"{signed32(int(root.value, 16))} ({root.value})"
            story.append(f"{root.name} loaded {loaded} into the address"
                         + (f", from {root.detail}" if root.detail else "") + ".")
    story += [line + "." for line in slicer.story]
    if slicer.mismatches:
        story.append("The dumped registers do not fit the code: "
                     + "; ".join(slicer.mismatches) + ". Nothing here is a cause.")
    return story


def _integer_params(fault: model.Fault) -> list[str]:
    """Integer parameters, as candidates for the bound an index broke (never asserted)."""
    if fault.params is None:
        return []
    found = []
    for param in fault.params.values:
        if is_integer(param.type, param.size) and param.value is not None:
            found.append(f"param {param.ordinal}" + (f" ({param.type})" if param.type else "")
                         + f" = {param.shown}")
    return found


def _dump_index(code: FunctionCode, location: CodeLocation, site: Site) -> int | None:
    """Where the lane's PC lies in the function (the registers are as of there)."""
    if site.lane is None:
        return None
    return code.index_of.get(site.lane.virtual_pc - location.text_address)


def _launch(fault: model.Fault, site: Site) -> Launch:
    specials: dict[str, int] = {}
    for axis, k in (("X", 0), ("Y", 1), ("Z", 2)):
        if fault.thread_idx is not None:
            specials[f"SR_TID.{axis}"] = fault.thread_idx[k]
        if fault.block_idx is not None:
            specials[f"SR_CTAID.{axis}"] = fault.block_idx[k]
    if fault.lane is not None:
        specials["SR_LANEID"] = fault.lane
    rank = _cta_rank(fault)
    if rank is not None:
        specials["SR_CgaCtaId"] = rank
    return Launch(specials, launch_dimensions(fault.block_dim, fault.grid_dim))


def _cta_rank(fault: model.Fault) -> int | None:
    """The block's rank in its cluster (0 without clusters), from its index and the cluster's
    shape."""
    if fault.block_idx is None:
        return None
    return cluster_rank(fault.block_idx, fault.cluster_dim or (1, 1, 1))


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


def _bounds(core: CoreDump, site: Site, fault: model.Fault, location: CodeLocation,
            registers: list[int] | None, found_backtrace: list[BacktraceFrame],
            found_banks: list[ConstBank]) -> Bounds:
    grid = site.grid
    facts = kernel_facts(core.image_bytes(location.image_section), grid.function if grid else "",
                         site.device.sm_type)
    recorded = getattr(site.warp, "shared_mem_size", None) if site.warp else None
    cluster = fault.cluster_dim or (1, 1, 1)
    columns = core.image.sections
    return Bounds(
        shared=facts.shared,
        sm90=bool(facts.shared and facts.shared.start) or bool(shared_reserve(site.device.sm_type)),
        cluster_blocks=max(1, cluster[0] * cluster[1] * cluster[2]),
        shared_mem_size=recorded or None,
        frame_size=facts.frame_sizes.get(location.function_symbol),
        stack_pointer=registers[1] if registers and len(registers) > 1 else None,
        constant_banks={bank.bank_id: bank.size for bank in found_banks},
        outermost=not found_backtrace,
        global_segments=[(columns.addr[i], columns.size[i]) for kind in _GLOBAL_KINDS
                         for i in core.index.of_type(kind)],
    )


