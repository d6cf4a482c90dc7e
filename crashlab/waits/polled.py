"""The address a polling loop reads, from the dumped registers of the lane that speaks for a warp.

Registers are as of the dump; a polling loop does not change its address registers (that is
what tells it from a search, crashlab.waits.shape), so the dumped ones are the ones it polls
with. Where the address came from is crashlab.waits.origin's.
"""

from __future__ import annotations

from ..coredump.core import CoreDump
from ..notation import dim
from ..sass.instruction import Instruction
from ..sass.operands import MemoryOperand, Register, effective_address
from .stand import WarpAt


def address_operand(load: Instruction) -> MemoryOperand | None:
    """The load's memory operand (crashlab.sass.operands' grammar); None where it does not read."""
    return next((found for found in load.parsed if isinstance(found, MemoryOperand)), None)


def lane_registers(core: CoreDump, at: WarpAt, uniform: bool) -> tuple[list[int], list[int]]:
    """The speaking lane's registers and (where ``uniform``) its warp's uniform registers, as
    the dump holds them (empty where it holds none: every value read from them is then
    undetermined). Each read looks its section up among all the dump's, so only what is used
    is read."""
    registers = core.registers(at.head) if at.head else None
    uniforms = core.uniform_registers(at.warp) if uniform else None
    return registers or [], uniforms or []


def lane_address(core: CoreDump, at: WarpAt, operand: MemoryOperand) -> int | None:
    """The address the warp's speaking lane polls, from its dumped registers; None where the
    dump lacks a register it needs."""
    uniform = any(register.uniform for register in operand.registers())
    return effective_address(operand, *lane_registers(core, at, uniform))


def _register_text(register: Register) -> str:
    """``R6.64`` for a pair, ``R6`` for one register."""
    return f"{register.name}.64" if register.wide else register.name


def _terms(operand: MemoryOperand) -> str:
    """The address as the sum it is: ``R6.64``, ``R2 + UR4 + 0x10`` (no cache descriptor)."""
    terms = [_register_text(register) for register in operand.registers()]
    return " + ".join(terms + ([f"{operand.offset:#x}"] if operand.offset or not terms else []))


def address_evidence(at: WarpAt, operand: MemoryOperand, address: int | None) -> str:
    who = f"lane {at.head.ln} of warp {at.warp.warp_id}, block {dim(at.cta.block_idx)}" \
        if at.head else "a warp with no active lane"
    if address is None:
        return f"the dump lacks a register of {_terms(operand)} for {who}: polled address " \
               "undetermined"
    return f"polled address {address:#x} = {_terms(operand)} of {who} (dumped registers)"
