"""The address a polling loop reads, from a sample lane's dumped registers, and where it came from.

The address is what the loop's load reads with the registers the dump holds for the lane that
speaks for a warp (registers are as of the dump: a polling loop does not change its address
registers, which is what makes it a hang). Its parameter is named only where the base register
reaching the loop was loaded straight from the kernel's parameter area in constant bank 0
(``LDC.64 R6, c[0x0][0x210]``); an address computed from a parameter (a base plus a block
offset) is left without a root, and the evidence says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..coredump.core import CoreDump
from ..cubin_info import ParamLayout, kernel_param_layout
from ..demangle import demangle
from ..report import model
from ..report.params import argument_types, kernel_params
from ..sass import CodeLocation, Instruction
from .shape import Polling, definition_before, reaching_definition
from .stand import GridWarps, WarpAt

_CONSTANT = re.compile(r"^c\[0x0\]\[(0x[0-9a-fA-F]+)\]$")
_MEMORY = re.compile(r"\[(R\d+)(\.64)?(?:\s*\+\s*(0x[0-9a-fA-F]+|-?\d+))?\]$")


@dataclass(frozen=True)
class AddressOperand:
    """The load's address: a register (a pair for ``.64``) plus an offset."""

    base: str
    wide: bool
    offset: int

    def __str__(self) -> str:
        return f"{self.base}.64" if self.wide else self.base


def address_operand(load: Instruction) -> AddressOperand | None:
    """TEMPORARY until crashlab.explain.operands lands."""
    operand = next((op for op in load.operands if "[" in op), None)
    match = _MEMORY.search(operand or "")
    if match is None:
        return None
    return AddressOperand(match[1], bool(match[2]), int(match[3], 0) if match[3] else 0)


def _pair(registers: list[int] | None, name: str, wide: bool) -> int | None:
    """The value of R<n> (with R<n+1> as its high half for a 64-bit address) in the dump."""
    number = int(name[1:])
    if registers is None or number + wide >= len(registers):
        return None
    low = registers[number]
    return low | (registers[number + 1] << 32) if wide else low


def lane_address(core: CoreDump, at: WarpAt, operand: AddressOperand) -> int | None:
    """The address the warp's speaking lane polls, from its dumped registers; None where the
    dump holds none."""
    registers = core.registers(at.head) if at.head else None
    value = _pair(registers, operand.base, operand.wide)
    return None if value is None else (value + operand.offset) & ((1 << 64) - 1)


def address_evidence(at: WarpAt, operand: AddressOperand, address: int | None) -> str:
    who = f"lane {at.head.ln} of warp {at.warp.warp_id}, block {_dim(at.cta.block_idx)}" \
        if at.head else "a warp with no active lane"
    if address is None:
        return f"the dump holds no {operand} for {who}: polled address undetermined"
    plus = f" + {operand.offset:#x}" if operand.offset else ""
    return f"polled address {address:#x} = {operand}{plus} of {who} (dumped registers)"


def _dim(value) -> str:
    return "(" + ",".join(str(v) for v in value) + ")"


def parameter_root(core: CoreDump, grid_warps: GridWarps, location: CodeLocation,
                   listing: list[Instruction], polling: Polling, operand: AddressOperand,
                   value: int | None, evidence: list[str]) -> model.Root | None:
    """The parameter the polled address's base register was loaded from, where it was loaded
    straight from the parameter area; else None, with the reason added to ``evidence``.
    ``value`` (the register's dumped value, less the offset) is compared with the buffer's."""
    base = operand.base
    loop = polling.loop
    at = loop.body.index(polling.load)
    inside = reaching_definition(loop, at, base)
    definition = inside or definition_before(listing, loop.head, base)
    if definition is None:
        evidence.append(f"{base} is not written in the function before the loop: its origin is "
                        "undetermined")
        return None
    constant = next((_CONSTANT.match(op) for op in definition.operands[1:2]), None)
    where = f"{definition.text} at +{definition.address:#x}"
    if not definition.opcode.startswith("LDC") or constant is None:
        evidence.append(f"{base} comes from {where}, computed rather than loaded from the "
                        "parameter area; not traced further (no backward slice here)")
        return None
    grid = grid_warps.grid
    layout, why = kernel_param_layout(core.image_bytes(location.image_section), grid.function)
    bank_offset = int(constant[1], 16)
    param = _param_at(layout, bank_offset)
    if param is None:
        evidence.append(f"{base} is loaded by {where}, which is no parameter of the kernel's "
                        f"layout{f' ({why})' if why else ''}")
        return None
    return _root(core, grid, layout, param, value, where, base, evidence)


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
