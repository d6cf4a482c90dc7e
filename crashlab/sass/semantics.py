"""What the integer instructions of an address computation compute, on known 32-bit words, and how
to write them as a formula.

Only the operations that build addresses are modelled (moves, IMAD and its aliases, IMAD.WIDE,
IADD3, VIADD, LEA, shifts and funnel shifts, LOP3; SEL is the slicer's, as it reads a predicate); an instruction outside this table is a stop with its opcode
named. Carry chains (a low op's carry-out and the ``.X`` op that consumes it) are read as one
64-bit sum by carry.py and the slicer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .opcode import opcode as parsed_opcode

MASK32 = (1 << 32) - 1
MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class Term:
    """One source operand: its value where known and how a formula names it."""

    value: int | None
    text: str


def signed32(value: int) -> int:
    """A 32-bit word read as two's complement."""
    value &= MASK32
    return value - (1 << 32) if value >> 31 else value


def _lut(a: int, b: int, c: int, table: int) -> int:
    """LOP3's three-input truth table, bit by bit (a is 0xF0, b 0xCC, c 0xAA in ``table``)."""
    result = 0
    for bit in range(32):
        index = ((a >> bit) & 1) << 2 | ((b >> bit) & 1) << 1 | (c >> bit) & 1
        result |= ((table >> index) & 1) << bit
    return result


def summed(*terms: str) -> str:
    kept = [t for t in terms if t not in ("0", "0x0")]
    return " + ".join(kept) if kept else "0"


def _product(a: str, b: str) -> str:
    if "0" in (a, b) or "0x0" in (a, b):
        return "0"
    if b in ("1", "0x1"):
        return a
    if a in ("1", "0x1"):
        return b
    return f"{_grouped(a)}*{_grouped(b)}"


def _grouped(text: str) -> str:
    """``text`` in parentheses where it has an operator outside brackets (``a + b``, not
    ``arg0[i + 1]`` or ``(a << 2)``)."""
    depth = 0
    for char in text:
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if char == " " and depth == 0:
            return f"({text})"
    return text


def shifted(a: str, by: str, direction: str = "<<") -> str:
    return a if by in ("0", "0x0") else f"({_grouped(a)} {direction} {by})"


@dataclass(frozen=True)
class Operation:
    arity: int
    compute: Callable[..., int]
    render: Callable[..., str]
    #: bits of the result: 64 for the WIDE forms, which write a register pair
    bits: int = 32
    #: every source is a register pair (IADD.64), not only the WIDE forms' addend
    pairs: bool = False


def _permute(a: int, selector: int, b: int) -> int:
    """PRMT in its default mode, as PTX's ``prmt.b32`` documents it: the bytes of b:a numbered 0
    to 7, each nibble of the selector picks one for the result's byte, its bit 3 asking for the
    picked byte's sign replicated instead."""
    pool = ((b & MASK32) << 32 | a & MASK32).to_bytes(8, "little")
    result = 0
    for k in range(4):
        nibble = selector >> (4 * k) & 0xF
        byte = pool[nibble & 7]
        result |= (0xFF if nibble & 8 and byte & 0x80 else 0 if nibble & 8 else byte) << (8 * k)
    return result


def _wide(signed: bool) -> Operation:
    def compute(a: int, b: int, c: int) -> int:
        if signed:
            a, b = signed32(a), signed32(b)
        else:
            a, b = a & MASK32, b & MASK32
        return (a * b + c) & MASK64
    return Operation(3, compute, lambda a, b, c: summed(_product(a, b), c), bits=64)


_OPERATIONS: dict[str, Operation] = {
    "MOV": Operation(1, lambda a: a, lambda a: a),
    "IMAD": Operation(3, lambda a, b, c: a * b + c, lambda a, b, c: summed(_product(a, b), c)),
    "IMAD.WIDE": _wide(signed=True),
    "IMAD.WIDE.U32": _wide(signed=False),
    "IADD3": Operation(3, lambda a, b, c: a + b + c, summed),
    "VIADD": Operation(2, lambda a, b: a + b, summed),
    "IADD": Operation(2, lambda a, b: a + b, summed),
    "IADD.64": Operation(2, lambda a, b: a + b, summed, bits=64, pairs=True),
    "LEA": Operation(3, lambda a, b, s: (a << (s & 31)) + b,
                     lambda a, b, s: summed(shifted(a, s), b)),
    "SHL": Operation(2, lambda a, s: a << (s & 31), shifted),
    "SHF.L.U32": Operation(3, lambda a, s, _hi: a << (s & 31), lambda a, s, _hi: shifted(a, s)),
    "SHF.R.U32.HI": Operation(3, lambda _lo, s, a: (a & MASK32) >> (s & 31),
                              lambda _lo, s, a: shifted(a, s, ">>")),
    "SHF.R.S32.HI": Operation(3, lambda _lo, s, a: signed32(a) >> (s & 31),
                              lambda _lo, s, a: shifted(a, s, ">>")),
    "LOP3.LUT": Operation(4, _lut, lambda a, b, c, t: f"lop3({a}, {b}, {c}, {t})"),
    "R2UR": Operation(1, lambda a: a, lambda a: a),
    "IMAD.HI.U32": Operation(3, lambda a, b, c: ((a & MASK32) * (b & MASK32) >> 32) + c,
                             lambda a, b, c: summed(f"hi({_product(a, b)})", c)),
    # funnel shifts of the pair hi:lo, as PTX's shf documents them
    "SHF.R.U64": Operation(3, lambda lo, s, hi: ((hi & MASK32) << 32 | lo & MASK32) >> (s & 63),
                           lambda lo, s, hi: shifted(f"{hi}:{lo}", s, ">>")),
    "SHF.L.U64.HI": Operation(3, lambda lo, s, hi: ((hi & MASK32) << 32 | lo & MASK32) << (s & 63) >> 32,
                              lambda lo, s, hi: f"hi{shifted(f'{hi}:{lo}', s)}"),
    "IABS": Operation(1, lambda a: abs(signed32(a)), lambda a: f"abs({a})"),
    "PRMT": Operation(3, _permute, lambda a, sel, b: f"prmt({a}, {sel}, {b})"),
}
#: modifiers that do not change the value an operation computes on its word
_NEUTRAL = {"MOV", "IADD", "SHL", "U32", "S32", "reuse", "LO"}

#: IMAD's a * b + c, for a caller that builds such a sum itself
MULTIPLY_ADD = _OPERATIONS["IMAD"]


def operation(opcode: str) -> Operation | None:
    """The modelled operation of ``opcode`` (``UIMAD`` as ``IMAD``; ``IMAD.MOV.U32`` and
    ``IMAD.SHL.U32`` as IMAD), None where it is not modelled."""
    op = parsed_opcode(opcode)
    family, modifiers = op.base, op.modifiers
    exact = ".".join([family, *modifiers])
    if exact in _OPERATIONS:
        return _OPERATIONS[exact]
    if family in _OPERATIONS and all(m in _NEUTRAL for m in modifiers):
        return _OPERATIONS[family]
    return None


def apply(op: Operation, terms: list[Term]) -> Term | None:
    """The result of ``op`` on ``terms`` (its value None where one input is unknown); None where
    the operand count does not fit the operation."""
    if len(terms) != op.arity:
        return None
    text = op.render(*(t.text for t in terms))
    if any(t.value is None for t in terms):
        return Term(None, text)
    mask = MASK64 if op.bits == 64 else MASK32
    return Term(op.compute(*(t.value for t in terms)) & mask, text)
