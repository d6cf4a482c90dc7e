"""64-bit carry chains and the small constant idioms of the production kernels, read from SASS.

NVIDIA does not document the ``.X`` forms. What this module assumes, and what the real SASS of
the fixtures bears out (tests/test_explain_carry.py recomputes ``arg0 + i*4`` from the .cu
source): a low op with a carry-out predicate (``LEA R2, P0, a, b, s``; ``IADD3 R2, P0, P1, a, b,
c``) writes the low word of a 64-bit sum and its carry; the ``.X`` op that reads that predicate as
its carry-in (``LEA.HI.X R3, a, b_hi, a_hi, s, P0``; ``LEA.HI.X.SX32 R3, a, b_hi, s, P0`` with a
sign-extended; ``IADD3.X R3, PT, PT, a_hi, b_hi, c_hi, P0, !PT``; ``IMAD.X R3, RZ, RZ, c_hi, P0``)
writes the high word. The pair is therefore one 64-bit sum: ``(a_hi:a << s) + b_hi:b`` for LEA,
``a_hi:a + b_hi:b + c_hi:c`` for IADD3 (``-x`` with ``~x_hi`` is the pair negated), and, for
IMAD.X, the low op's words plus ``c_hi`` in the high word. Chains this does not cover (a constant
carry-in, a dropped second carry of a three-term sum, IMAD.WIDE.U32.X's 128-bit products) are a stop with their reason: a guessed carry gives a confidently wrong address.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..sass.opcode import opcode as parsed_opcode
from ..sass.operands import Operand, Predicate, Register, parse_operand

if TYPE_CHECKING:
    from ..sass.flow import FunctionCode

_CONSTANT_PREDICATES = ("PT", "UPT")
_IDIOM = "an unsigned division by a variable (float reciprocal idiom)"


@dataclass(frozen=True)
class CarryChain:
    """A low op and its ``.X`` op read as one 64-bit sum of operand pairs (low text, high text;
    high None: the low word sign-extended), the first pair shifted left by ``shift``."""

    low_at: int
    operand_pairs: tuple[tuple[str, str | None], ...]
    shift: str | None = None
    #: the shift is LEA's 32-bit one (a low LEA whose high word is an IADD3.X or IMAD.X): the
    #: bits shifted out of the word are lost, not carried
    narrow: bool = False


def _sources(operands: Sequence[str]) -> list[str]:
    return [o for o in operands[1:] if not isinstance(parse_operand(o), Predicate)]


def _carry_ins(operands: Sequence[str]) -> list[Predicate]:
    """The trailing predicate operands: the carry-ins (destination predicates come first)."""
    found: list[Predicate] = []
    for text in reversed(operands):
        operand = parse_operand(text)
        if not isinstance(operand, Predicate):
            break
        found.insert(0, operand)
    return found


def _carry_outs(operands: Sequence[str]) -> list[Predicate]:
    outs: list[Predicate] = []
    for text in operands[1:]:
        operand = parse_operand(text)
        if not isinstance(operand, Predicate):
            break
        outs.append(operand)
    return outs


def carry_chain(code: FunctionCode, high_at: int) -> CarryChain | str:
    """The chain whose ``.X`` op is at ``high_at``, or the reason it is not read."""
    high = code.instructions[high_at]
    family, modifiers = high.op.base, high.op.modifiers
    if family == "IMAD" and "WIDE" in modifiers:
        return "the high half of a 128-bit product (IMAD.WIDE.U32.X) is not modelled"
    carries = [p for p in _carry_ins(high.operands) if not (p.negated and p.name in _CONSTANT_PREDICATES)]
    if len(carries) != 1 or carries[0].negated or carries[0].name in _CONSTANT_PREDICATES:
        return f"a carry-in not read as one predicate ({', '.join(high.operands)})"
    defs, open_path = code.reaching_definitions(carries[0].name, high_at)
    if len(defs) != 1 or open_path:
        return f"the carry {carries[0].name} has no single definition on every path"
    low = code.instructions[defs[0]]
    low_family, low_modifiers = low.op.base, low.op.modifiers
    if "X" in low_modifiers or "HI" in low_modifiers or \
            low_family != family and family not in ("IMAD", "LEA") and low_family != "LEA":
        return f"its carry comes from {low.opcode}, a chain not modelled"
    outs = _carry_outs(low.operands)
    if not outs or outs[0].name != carries[0].name:
        return f"its carry-in is not {low.opcode}'s first carry-out"
    low_sources, high_sources = _sources(low.operands), _sources(high.operands)
    if family == "LEA" and low_family == "IADD3":
        return _sign_extending_lea(code, defs[0], high_at, low_sources, high_sources, modifiers)
    return _pairs(defs[0], low_sources, high_sources, family, modifiers, outs)


def _sign_extending_lea(code: FunctionCode, low_at: int, high_at: int, low: list[str],
                        high: list[str], modifiers: tuple[str, ...]) -> CarryChain | str:
    """``IADD3 Rl, P0, PT, a, b, RZ`` with ``LEA.HI.X.SX32 Rh, a, b_hi, 0x1, P0``: the high word
    of ``sext(a) << 1`` is a's sign word, so the pair is ``b_hi:b + sext(a)``; only where the LEA
    reads the same ``a`` (one definition reaches both) and the sum has two terms."""
    if "SX32" not in modifiers or len(high) != 3 or high[2] != "0x1" or len(low) != 3:
        return "a carry chain not modelled"
    extended = parse_operand(high[0])
    same = [k for k, text in enumerate(low) if _same_register(parse_operand(text), extended)]
    others = [k for k, text in enumerate(low) if k not in same and text not in ("RZ", "URZ")]
    if len(same) != 1 or len(others) != 1 or not isinstance(extended, Register) or \
            code.reaching_definitions(_name(extended), low_at) != \
            code.reaching_definitions(_name(extended), high_at):
        return "a LEA.HI.X.SX32 that does not extend a word of the low sum"
    pairs = [(text, None if k in same else high[1] if k in others else "RZ")
             for k, text in enumerate(low)]
    return CarryChain(low_at, tuple(pairs))


def _same_register(a: Operand | None, b: Operand | None) -> bool:
    return isinstance(a, Register) and isinstance(b, Register) and a.index is not None and \
        (a.uniform, a.index, a.negated, a.inverted, a.modifiers) == \
        (b.uniform, b.index, b.negated, b.inverted, b.modifiers)


def _name(register: Register) -> str:
    return f"{'UR' if register.uniform else 'R'}{register.index}"


def _pairs(low_at: int, low: list[str], high: list[str], family: str, modifiers: tuple[str, ...],
           outs: list[Predicate]) -> CarryChain | str:
    if family != "LEA" and len(low) == 3 and low[2].startswith("0x") and \
            not low[1].startswith("0x"):
        return _narrow_lea(low_at, low, high, family)
    if family == "LEA":
        return _lea_pair(low_at, low, high, modifiers)
    nonzero = [s for s in low if s not in ("RZ", "URZ", "0x0", "0")]
    if len(outs) > 1 and outs[1].name in _CONSTANT_PREDICATES and len(nonzero) > 2:
        return "a three-term sum whose second carry is dropped"
    if family == "IADD3" and len(low) == len(high) == 3:
        return CarryChain(low_at, tuple(zip(low, high, strict=True)))
    if family == "IMAD" and "X" in modifiers and len(high) == 3 and len(low) == 3:
        words = _high_words(high)
        if words is not None:
            return CarryChain(low_at, _attach_high(low, words))
    return "a carry chain not modelled"


def _lea_pair(low_at: int, low: list[str], high: list[str],
              modifiers: tuple[str, ...]) -> CarryChain | str:
    """``LEA Rl, P0, a, b, s`` with ``LEA.HI.X Rh, a, b_hi, a_hi, s, P0``: ``(a_hi:a << s) +
    b_hi:b`` (``.SX32``: a sign-extended)."""
    if len(low) != 3 or "HI" not in modifiers:
        return "a LEA pair whose operands are not (a, b, shift)"
    a_high = None if "SX32" in modifiers else (high[2] if len(high) == 4 else "")
    if high[0] != low[0] or high[-1] != low[2] or a_high == "":
        return "a LEA.HI.X that does not shift the low LEA's index"
    return CarryChain(low_at, ((low[0], a_high), (low[1], high[1])), shift=low[2])


def _narrow_lea(low_at: int, low: list[str], high: list[str], family: str) -> CarryChain | str:
    """``LEA R2, P0, a, b, s`` with ``IADD3.X R3, x, y, z, P0, !PT`` (or IMAD.X): the 32-bit
    ``a << s`` plus the pair b, whose high word is the .X op's sum (sm_90's ``&arg0[tid]``)."""
    words = [w for w in high if w not in ("RZ", "URZ")] if family == "IADD3" else \
        _high_words(high) if family == "IMAD" and len(high) == 3 else None
    if words is None:
        return "a carry chain not modelled"
    words = words or ["RZ"]
    pairs = ((low[0], "RZ"), (low[1], words[0]), *(("RZ", w) for w in words[1:]))
    return CarryChain(low_at, pairs, shift=low[2], narrow=True)


def _high_words(high: list[str]) -> list[str] | None:
    """The words IMAD.X adds in the high word: ``RZ, RZ, c`` adds c, ``a, 0x1, c`` a and c."""
    if high[0] in ("RZ", "URZ") or high[1] in ("RZ", "URZ"):
        return [high[2]]
    if high[1] == "0x1":
        return [high[0], high[2]]
    return None


def _below(low_text: str, high_text: str) -> bool:
    """Whether ``high_text`` names the word just above ``low_text`` (R5 over R4, c[0x0][0x214]
    over c[0x0][0x210])."""
    low_op, high_op = parse_operand(low_text), parse_operand(high_text)
    if isinstance(low_op, Register) and isinstance(high_op, Register):
        return low_op.index is not None and high_op.index is not None \
            and high_op.uniform == low_op.uniform and high_op.index == low_op.index + 1
    return low_text.startswith("c[0x0][") and high_text.startswith("c[0x0][") and \
        _slot(high_text) == _slot(low_text) + 4


def _attach_high(low: list[str], words: list[str]) -> tuple[tuple[str, str], ...]:
    """IMAD.X's high words joined to the low sources they extend: the word just below each,
    else the next source not yet joined (``~x_hi`` to ``-x``). The 64-bit sum is the same
    whichever each joins; the choice only names it."""
    joined: dict[int, str] = {}
    free = [k for k, s in enumerate(low) if s not in ("RZ", "URZ")] + \
        [k for k, s in enumerate(low) if s in ("RZ", "URZ")]
    for word in words:
        bare = word.lstrip("~")
        k = next((k for k in free if _below(low[k].lstrip("-"), bare)
                  and low[k].startswith("-") == word.startswith("~")), None)
        if k is None:
            k = next((k for k in free if low[k].startswith("-") == word.startswith("~")), free[0])
        free.remove(k)
        joined[k] = word
    return tuple((s, joined.get(k, "RZ")) for k, s in enumerate(low))


def _slot(text: str) -> int:
    try:
        return int(text[len("c[0x0]["):-1], 16)
    except ValueError:
        return -1


def constant_move(opcode: str, sources: Sequence[str]) -> int | None:
    """``HFMA2.MMA Rd, -RZ, RZ, hi, lo``: -0 * 0 + (hi, lo) is the pair of halves itself, so the
    instruction moves the 32-bit constant ``half(hi) << 16 | half(lo)``; None where it is not
    that form or a half is not exactly representable."""
    if parsed_opcode(opcode).family != "HFMA2" or len(sources) != 4 or tuple(sources[:2]) != ("-RZ", "RZ"):
        return None
    words: list[int] = []
    for text in sources[2:]:
        try:
            number = float(text)
            bits = struct.unpack("<H", struct.pack("<e", number))[0]
        except (ValueError, OverflowError, struct.error):
            return None
        if not math.isfinite(number) or struct.unpack("<e", struct.pack("<H", bits))[0] != number:
            return None
        words.append(bits)
    return words[0] << 16 | words[1]


def division_idiom(opcode: str) -> str | None:
    """The reason a slice stops at a step of the compiler's unsigned division by a variable
    (I2F.U32.RP, MUFU.RCP, F2I.FTZ.U32.TRUNC): its quotient is not recomputed."""
    op = parsed_opcode(opcode)
    if op.family == "I2F" and op.has("RP") or op.family == "MUFU" and op.has("RCP") or \
            op.family == "F2I" and op.has("U32", "TRUNC"):
        return _IDIOM
    if op.family == "FMUL":
        return f"a floating-point product ({opcode}), as in the reciprocal step of {_IDIOM}"
    return None
