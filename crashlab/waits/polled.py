"""The address a polling loop reads, from a sample lane's dumped registers, and where it came from.

The address is what the loop's load reads with the registers the dump holds for the lane that
speaks for a warp (registers are as of the dump: a polling loop does not change its address
registers, which is what makes it a hang). Its parameter is named only where the base register
reaching the loop was loaded straight from the kernel's parameter area in constant bank 0
(``LDC.64 R6, c[0x0][0x210]``); an address computed from a parameter (a base plus a block
offset) is left without a root, and the evidence says so.
"""

from __future__ import annotations

from ..coredump.core import CoreDump
from ..cubin_info import ParamLayout, kernel_param_layout
from ..demangle import demangle
from ..explain.operands import (MemoryOperand, Register, effective_address, parse_constant,
                                parse_memory_operand, register_value)
from ..notation import dim
from ..report import model
from ..report.params import argument_types, kernel_params
from ..sass import CodeLocation, Instruction
from .shape import Polling, definition_before, reaching_definition
from .stand import GridWarps, WarpAt


def address_operand(load: Instruction) -> MemoryOperand | None:
    """The load's memory operand (crashlab.explain's grammar); None where it does not read."""
    return next((found for found in map(parse_memory_operand, load.operands) if found), None)


def base_register(operand: MemoryOperand) -> Register | None:
    """The register the address is based on: the general one, else the uniform one."""
    return next(iter(operand.registers()), None)


def lane_registers(core: CoreDump, at: WarpAt, operand: MemoryOperand | Register
                   ) -> tuple[list[int], list[int]]:
    """The speaking lane's registers and, where ``operand`` reads one, its warp's uniform
    registers, as the dump holds them (empty where it holds none: every value read from them is
    then undetermined). Each read looks its section up among all the dump's, so only what is
    used is read."""
    registers = core.registers(at.head) if at.head else None
    uses_uniform = any(r.uniform for r in (
        operand.registers() if isinstance(operand, MemoryOperand) else (operand,)))
    uniform = core.uniform_registers(at.warp) if uses_uniform else None
    return registers or [], uniform or []


def lane_address(core: CoreDump, at: WarpAt, operand: MemoryOperand) -> int | None:
    """The address the warp's speaking lane polls, from its dumped registers; None where the
    dump lacks a register it needs."""
    return effective_address(operand, *lane_registers(core, at, operand))


def shown(register: Register) -> str:
    """``R6.64`` for a pair, ``R6`` for one register."""
    return f"{register.name}.64" if register.wide else register.name


def _terms(operand: MemoryOperand) -> str:
    """The address as the sum it is: ``R6.64``, ``R2 + UR4 + 0x10`` (no cache descriptor)."""
    terms = [shown(register) for register in operand.registers()]
    return " + ".join(terms + ([f"{operand.offset:#x}"] if operand.offset or not terms else []))


def address_evidence(at: WarpAt, operand: MemoryOperand, address: int | None) -> str:
    who = f"lane {at.head.ln} of warp {at.warp.warp_id}, block {dim(at.cta.block_idx)}" \
        if at.head else "a warp with no active lane"
    if address is None:
        return f"the dump lacks a register of {_terms(operand)} for {who}: polled address " \
               "undetermined"
    return f"polled address {address:#x} = {_terms(operand)} of {who} (dumped registers)"


def parameter_root(core: CoreDump, grid_warps: GridWarps, location: CodeLocation,
                   listing: list[Instruction], polling: Polling, operand: MemoryOperand,
                   sample: WarpAt, evidence: list[str]) -> model.Root | None:
    """The parameter the polled address's base register was loaded from, where it was loaded
    straight from the parameter area; else None, with the reason added to ``evidence``. The
    sample lane's dumped base register is compared with the parameter buffer's value."""
    register = base_register(operand)
    if register is None:
        evidence.append(f"the address {operand.text} has no register: a fixed address")
        return None
    value = register_value(register, *lane_registers(core, sample, register))
    base = register.words()[0]
    loop = polling.loop
    at = loop.body.index(polling.load)
    inside = reaching_definition(loop, at, base)
    definition = inside or definition_before(listing, loop.head, base)
    if definition is None:
        evidence.append(f"{shown(register)} is not written in the function before the loop: "
                        "its origin is undetermined")
        return None
    constant = parse_constant(definition.operands[1]) if len(definition.operands) > 1 else None
    where = f"{definition.text} at +{definition.address:#x}"
    if definition.opcode.split(".")[0] not in ("LDC", "ULDC", "LDCU") or constant is None \
            or constant.bank != 0 or constant.register is not None:
        evidence.append(f"{shown(register)} comes from {where}, computed rather than loaded "
                        "from the parameter area; not traced further (no backward slice here)")
        return None
    grid = grid_warps.grid
    layout, why = kernel_param_layout(core.image_bytes(location.image_section), grid.function)
    param = _param_at(layout, constant.offset)
    if param is None:
        evidence.append(f"{shown(register)} is loaded by {where}, which is no parameter of the "
                        f"kernel's layout{f' ({why})' if why else ''}")
        return None
    return _root(core, grid, layout, param, value, where, shown(register), evidence)


def _param_at(layout: ParamLayout | None, bank_offset: int):
    if layout is None or layout.cbank_offset is None:
        return None
    return next((p for p in layout.params if layout.cbank_offset + p.offset == bank_offset), None)


def _root(core, grid, layout, param, value, where, base, evidence) -> model.Root:
    signature = demangle(grid.function)
    block = core.params(grid)
    shown = None
    if block is not None:
        values = kernel_params(block, layout, "", signature).values
        shown = next((p for p in values if p.ordinal == param.ordinal), None)
    types = argument_types(signature)
    type_name = shown.type if shown else (
        types[param.ordinal] if types and len(types) == len(layout.params) else None)
    name = f"param {param.ordinal}" + (f" ({type_name})" if type_name else "")
    root = model.Root(kind="param", name=name, param_ordinal=param.ordinal)
    evidence.append(f"{base} is loaded straight from the parameter area by {where}: {name}")
    if shown is None or shown.value is None:
        evidence.append("the dump holds no parameter buffer for this kernel: the parameter's "
                        "value is read from the registers only")
        root.value, root.provenance = (f"{value:#x}", "dump") if value is not None else (None, None)
        return root
    root.value, root.provenance = f"{shown.value:#x}", "parameter buffer"
    if value is not None and value != shown.value:
        evidence.append(f"the register holds {value:#x} but the parameter buffer {shown.value:#x}: "
                        "the register was changed after it was loaded")
    return root
