"""The operand grammar of nvdisasm's SASS: registers, predicates, immediates, constant-bank
references and memory operands, read into values the explainer can evaluate.

nvdisasm prints one operand per comma (split_operands splits them); the forms met on sm_80..sm_120
are listed in the shared reference (fault-explanation.md). Anything this grammar does not know
reads as None, never an exception: a stranger's SASS must not stop an explanation, it only stops
the slice at that operand with a reason. Each parse is kept by its text (the same operands recur
across a listing and across the lanes of a fault).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1
#: a register with its modifiers: ``-R3``, ``|R3|``, ``~R3``, ``R2.64``, ``R4.reuse``, ``UR5.H1``
_REGISTER = re.compile(r"^(?P<neg>[-~!]?)(?P<abs>\|?)(?P<name>U?R(?:Z|\d+))(?P<suffix>(?:\.[A-Z0-9_a-z]+)*)\|?$")
_PREDICATE = re.compile(r"^(?P<neg>!?)(?P<name>U?P(?:T|\d))$")
_IMMEDIATE = re.compile(r"^-?(?:0x[0-9a-fA-F]+|\d+)$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+|\+?INF|-INF|\+?QNAN|NAN)$", re.I)
_CONSTANT = re.compile(r"^(?P<neg>[-~]?)c\[(?P<bank>0x[0-9a-fA-F]+|\d+)\]\[(?P<inner>[^\]]*)\](?P<suffix>(?:\.[A-Z0-9]+)*)$")
#: ``desc[UR4][R2.64+0x10]``, ``[R0+URZ]``, ``[UR4]``: an optional descriptor, then the address
_MEMORY = re.compile(r"^(?:(?P<desc>desc)\[(?P<descriptor>[^\]]*)\])?\[(?P<inner>[^\]]*)\]$")


@dataclass(frozen=True)
class Register:
    """A general (``R``) or uniform (``UR``) register; ``index`` None for RZ/URZ (always 0)."""

    uniform: bool
    index: int | None
    #: ``.64``: the pair R(n), R(n+1) read as one 64-bit value, low word first
    wide: bool = False
    negated: bool = False
    inverted: bool = False
    absolute: bool = False
    #: modifiers other than .64 and .reuse (``.H1``, ``.X4``, ``.B1``): values not modelled
    modifiers: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        prefix = "UR" if self.uniform else "R"
        return f"{prefix}Z" if self.index is None else f"{prefix}{self.index}"

    @property
    def is_zero(self) -> bool:
        return self.index is None

    def words(self) -> tuple[str, ...]:
        """The 32-bit registers it reads (R2.64 reads R2 and R3); none for RZ."""
        if self.index is None:
            return ()
        prefix = "UR" if self.uniform else "R"
        count = 2 if self.wide else 1
        return tuple(f"{prefix}{self.index + k}" for k in range(count))


@dataclass(frozen=True)
class Predicate:
    name: str  # P0..P6, PT, UP0.., UPT
    negated: bool = False


@dataclass(frozen=True)
class Immediate:
    value: int | float


@dataclass(frozen=True)
class ConstantRef:
    """``c[bank][offset]`` or ``c[bank][R3+0x8]``: a word of a constant bank."""

    bank: int
    offset: int
    register: Register | None = None
    negated: bool = False


@dataclass(frozen=True)
class MemoryOperand:
    """``[R2.64+UR4+0x10]``: the address is the sum of its registers and offset. The
    ``desc[URn]`` before it is an access policy (cache hints), not part of the address."""

    text: str
    register: Register | None
    uniform: Register | None
    offset: int
    descriptor: Register | None = None
    #: a constant-bank reference read as a memory operand: its bank (``c[0x3][R2]``)
    bank: int | None = None
    #: what the general register is multiplied by (``[R0.X4]``)
    scale: int = 1

    @property
    def wide(self) -> bool:
        """A 64-bit address (``R2.64``): global or generic; a 32-bit one is a window offset."""
        return self.register is not None and self.register.wide

    def registers(self) -> tuple[Register, ...]:
        return tuple(r for r in (self.register, self.uniform) if r is not None and not r.is_zero)


Operand = Register | Predicate | Immediate | ConstantRef | MemoryOperand
#: parses kept, by operand text
_KEPT = 1 << 16


def split_operands(text: str) -> tuple[str, ...]:
    """Operands as nvdisasm prints them, split at the commas outside brackets."""
    if "[" not in text:
        operands = [part.strip() for part in text.split(",")]
        return tuple(operands if operands[-1] else operands[:-1])
    operands, depth, begin = [], 0, 0
    for at, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            operands.append(text[begin:at].strip())
            begin = at + 1
    last = text[begin:].strip()
    return tuple(operands + [last] if last else operands)


@lru_cache(maxsize=_KEPT)
def parse_register(text: str) -> Register | None:
    match = _REGISTER.match(text.strip())
    if match is None:
        return None
    name = match["name"]
    uniform = name.startswith("U")
    digits = name[2:] if uniform else name[1:]
    suffixes = [s for s in match["suffix"].split(".") if s]
    modifiers = tuple(s for s in suffixes if s not in ("64", "reuse"))
    return Register(uniform=uniform, index=None if digits == "Z" else int(digits),
                    wide="64" in suffixes, negated=match["neg"] == "-",
                    inverted=match["neg"] in ("~", "!"), absolute=bool(match["abs"]),
                    modifiers=modifiers)


def _integer(text: str) -> int | None:
    text = text.strip()
    return int(text, 0) if _IMMEDIATE.match(text) else None


#: ``[R0.X4]``: the general register of an address scaled by its element size (sm_80 and older)
_SCALES = {"X4": 4, "X8": 8, "X16": 16}


def _address_terms(inner: str) -> tuple[Register | None, Register | None, int, int] | None:
    """The terms of ``R2.64+UR4+-0x10``: at most one general register (with its ``.X4``
    scale), one uniform register and immediates (summed); None on anything else."""
    general = uniform = None
    offset, scale = 0, 1
    for term in (t.strip() for t in inner.replace("+-", "+~NEG~").split("+")):
        negative = term.startswith("~NEG~")
        term = term.removeprefix("~NEG~")
        value = _integer(term)
        if value is not None:
            offset += -value if negative else value
            continue
        register = None if negative else parse_register(term)
        if register is not None and not register.uniform and len(register.modifiers) == 1 \
                and register.modifiers[0] in _SCALES:
            scale = _SCALES[register.modifiers[0]]
            register = dataclasses.replace(register, modifiers=())
        if register is None or register.negated or register.inverted or register.absolute:
            return None
        if register.uniform and uniform is None:
            uniform = register
        elif not register.uniform and general is None:
            general = register
        else:
            return None
    return general, uniform, offset, scale


@lru_cache(maxsize=_KEPT)
def parse_memory_operand(text: str) -> MemoryOperand | None:
    """``[R]``, ``[R+0x10]``, ``[R2.64+UR4+0x10]``, ``desc[UR4][R2.64]``, ``[R0+URZ]``, ``[UR4]``,
    ``[0x40]``; None where the text is not a memory operand this grammar reads."""
    match = _MEMORY.match(text.strip())
    if match is None:
        return None
    terms = _address_terms(match["inner"])
    if terms is None:
        return None
    descriptor = None
    if match["desc"]:
        descriptor = parse_register(match["descriptor"])
        if descriptor is None:
            return None
    general, uniform, offset, scale = terms
    return MemoryOperand(text=text.strip(), register=general, uniform=uniform, offset=offset,
                         descriptor=descriptor, scale=scale)


@lru_cache(maxsize=_KEPT)
def parse_constant(text: str) -> ConstantRef | None:
    match = _CONSTANT.match(text.strip())
    if match is None:
        return None
    terms = _address_terms(match["inner"])
    if terms is None:
        return None
    general, uniform, offset, scale = terms
    if (general is not None and uniform is not None) or scale != 1:
        return None
    return ConstantRef(bank=int(match["bank"], 0), offset=offset, register=general or uniform,
                       negated=match["neg"] == "-")


@lru_cache(maxsize=_KEPT)
def parse_operand(text: str) -> Operand | None:
    """Any one operand; None where the grammar does not read it (the caller says so)."""
    text = text.strip()
    for parse in (parse_register, parse_memory_operand, parse_constant):
        operand = parse(text)
        if operand is not None:
            return operand
    predicate = _PREDICATE.match(text)
    if predicate:
        return Predicate(predicate["name"], negated=bool(predicate["neg"]))
    value = _integer(text)
    if value is not None:
        return Immediate(value)
    if _FLOAT.match(text):
        try:
            return Immediate(float(text))
        except ValueError:
            return None
    return None


RegisterFile = Mapping[int, int] | Sequence[int]


def _word(registers: RegisterFile, index: int) -> int | None:
    try:
        value = registers[index]
    except (IndexError, KeyError):
        return None
    return None if value is None else value & _MASK32


def register_value(register: Register, registers: RegisterFile,
                   uniform_registers: RegisterFile) -> int | None:
    """The unsigned value a plain register operand holds (64 bits for ``.64``), None where the
    dump lacks a word of it or a modifier changes it in a way not modelled here."""
    if register.modifiers or register.negated or register.inverted or register.absolute:
        return None
    if register.index is None:
        return 0
    source = uniform_registers if register.uniform else registers
    low = _word(source, register.index)
    if low is None or not register.wide:
        return low
    high = _word(source, register.index + 1)
    return None if high is None else low | high << 32


def effective_address(operand: MemoryOperand, registers: RegisterFile,
                      uniform_registers: RegisterFile) -> int | None:
    """The address ``operand`` names given a lane's registers (R0.. as u32 words) and its warp's
    uniform registers: the sum of its terms, 64 bits wide for a ``.64`` base, else 32 bits
    (a shared or local window offset). None where a register it reads is not in the dump."""
    total = operand.offset
    for register in (operand.register, operand.uniform):
        if register is None:
            continue
        if register.uniform and operand.wide:
            # beside a 64-bit base the uniform term is a pair too: ULDC.64 UR4 then [R2.64+UR4]
            register = Register(uniform=True, index=register.index, wide=True)
        value = register_value(register, registers, uniform_registers)
        if value is None:
            return None
        total += value if register.uniform else value * operand.scale
    return total & (_MASK64 if operand.wide else _MASK32)
