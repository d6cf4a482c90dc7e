"""One SASS instruction, decoded once: its opcode (family and modifiers), its guard, its operands as
text and as values of the grammar, the memory it touches and the registers it writes.

A listing line is kept as nvdisasm printed it (address, text, branch target, inline chain); each
decoded part is worked out on first use and kept on the instruction, so the explanation's slice,
the control-flow graph and the hang's loop walks, which ask of the same instructions many times,
pay for each decoding once. A window of a listing decodes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from ..cubin.lines import SourceLine
from .access import MemoryAccess, Side, memory_access, memory_sides
from .opcode import Opcode, opcode
from .operands import (
    Operand,
    Predicate,
    Register,
    parse_operand,
    parse_register,
    split_operands,
)

_GUARD_AND_OPCODE = re.compile(r"^(?:(@!?U?P\w+)\s+)?(\S+)\s*(.*)$")
_PREDICATE_NAME = re.compile(r"^(U?P(?:T|\d))$")
ALWAYS_TRUE = ("PT", "UPT")
#: families whose first operand is read, not written
_NO_DESTINATION = frozenset({
    "ST", "STG", "STS", "STL", "STSM", "RED", "REDG", "BRA", "BRX", "JMP", "JMX", "CALL", "RET",
    "EXIT", "BAR", "BSSY", "BSYNC", "WARPSYNC", "MEMBAR", "CCTL", "NOP", "YIELD", "DEPBAR",
    "ERRBAR", "FENCE", "SYNCS", "UTMALDG", "UTMASTG", "UBLKCP", "STTM", "LDGSTS", "ARRIVES",
    "NANOSLEEP", "KILL", "BPT", "RPCMOV"})
#: control transfers: a predicate among their operands is a condition they read
#: (``BRA.U !UP0``, ``@P0 BRA P1``), never one they write
TRANSFERS = frozenset({"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "KILL"})


Kept = TypeVar("Kept")


class decoded(Generic[Kept]):  # noqa: N801 - used as a decorator, like functools.cached_property
    """functools.cached_property without the lock Python 3.11 takes on every first read (a
    listing's graph reads a few parts of each of thousands of instructions once): the value is
    stored in the instance's __dict__, which then answers every later read directly."""

    def __init__(self, read: Callable[[Any], Kept]):
        self.read, self.name = read, read.__name__
        self.__doc__ = read.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> decoded[Kept]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Kept: ...

    def __get__(self, instance: object, owner: type | None = None) -> Kept | decoded[Kept]:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.read(instance)
        return value


@dataclass(frozen=True)
class Guard:
    """``@P0``, ``@!UP1``, ``@PT``: the predicate an instruction runs under."""

    name: str
    negated: bool = False

    @property
    def always(self) -> bool:
        return self.name in ALWAYS_TRUE and not self.negated

    @property
    def never(self) -> bool:
        return self.name in ALWAYS_TRUE and self.negated

    @property
    def text(self) -> str:
        return f"{'!' if self.negated else ''}{self.name}"


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction. In a function's listing ``address`` and ``target`` are offsets into
    its text section; in a SassView they are GPU addresses."""

    address: int
    text: str
    faulting: bool = False
    current: bool = False
    source: tuple[SourceLine, ...] = ()
    #: a branch's target, where nvdisasm names one
    target: int | None = None

    # -- the text, split --------------------------------------------------------------------
    @decoded
    def _parts(self) -> tuple[str | None, str, str]:
        match = _GUARD_AND_OPCODE.match(self.text)
        if match is None:
            return None, self.text, ""
        guard, code, rest = match.groups()
        return guard, code, rest

    @property
    def predicate(self) -> str | None:
        """The guard as printed (``@!P1``), None where there is none."""
        return self._parts[0]

    @property
    def opcode(self) -> str:
        """The opcode with its modifiers (``LDG.E.64``)."""
        return self._parts[1]

    @decoded
    def operands(self) -> tuple[str, ...]:
        """The operands as nvdisasm prints them, split at top-level commas (``desc[UR6][R2.64]``)."""
        return split_operands(self._parts[2])

    # -- decoded ----------------------------------------------------------------------------
    @decoded
    def op(self) -> Opcode:
        return opcode(self.opcode)

    @decoded
    def guard(self) -> Guard | None:
        text = self.predicate
        if text is None:
            return None
        name = text.lstrip("@!")
        return Guard(name, negated=text.startswith("@!"))

    @property
    def runs(self) -> bool | None:
        """Whether the instruction runs: True unguarded or under ``@PT``, False under ``@!PT``,
        None where its guard decides."""
        guard = self.guard
        if guard is None or guard.always:
            return True
        return False if guard.never else None

    @decoded
    def conditions(self) -> tuple[Guard, ...]:
        """The predicates that decide whether it acts: its guard, and a branch's condition
        operands (``BRA.U !UP0``); constant ones (PT) left out."""
        guard = self.guard
        found = [guard] if guard is not None and self.runs is None else []
        if self.op.family in TRANSFERS:
            for operand in self.parsed:
                if isinstance(operand, Predicate) and operand.name not in ALWAYS_TRUE:
                    found.append(Guard(operand.name, operand.negated))
        return tuple(found)

    @decoded
    def acts(self) -> bool | None:
        """Whether it takes effect when control reaches it (a branch is taken, an EXIT leaves):
        True unconditionally, False never (``@!PT``, a ``!PT`` condition operand), None where a
        predicate decides, or, for ``BRA.DIV UR4``, whether the warp has diverged."""
        if self.runs is False:
            return False
        if self.op.family in TRANSFERS and any(
                isinstance(o, Predicate) and o.name in ALWAYS_TRUE and o.negated for o in self.parsed):
            return False
        if self.conditions or self.op.family == "BRA" and (
                self.op.has("DIV") or any(isinstance(o, Register) for o in self.parsed)):
            return None
        return True

    @decoded
    def parsed(self) -> tuple[Operand | None, ...]:
        """Each operand read by the grammar (crashlab.sass.operands); None where it is not."""
        return tuple(parse_operand(text) for text in self.operands)

    @decoded
    def access(self) -> MemoryAccess | None:
        """How it touches memory (the first memory operand's access), None where it does not."""
        return memory_access(self.opcode)

    @decoded
    def sides(self) -> tuple[Side, ...]:
        """Every memory operand it reads or writes through, in operand order."""
        return tuple(memory_sides(self.opcode))

    @decoded
    def written_words(self) -> tuple[str, ...]:
        """The 32-bit registers it writes (R2 and R3 for ``IMAD.WIDE R2, ...``); RZ is never
        written. Width comes from the opcode: ``.64``/``WIDE`` two words, ``.128`` four, a load
        its access size."""
        if not self.operands or self.op.family in _NO_DESTINATION:
            return ()
        register = parse_register(self.operands[0])
        if register is None or register.index is None:
            return ()
        prefix = "UR" if register.uniform else "R"
        return tuple(f"{prefix}{register.index + k}" for k in range(self._width()))

    def _width(self) -> int:
        access = self.access
        if access is not None and access.bytes and access.kind in ("load", "atomic"):
            return max(1, access.bytes // 4)
        if self.op.has("128"):
            return 4
        if self.op.has("64") or self.op.has("WIDE"):
            return 2
        return 1

    @decoded
    def written_predicates(self) -> tuple[str, ...]:
        """The predicates it may write: the run of predicate operands at the start of its
        operands, or right after a register destination (``ISETP P0, PT, ...``, ``IADD3 R2, P0,
        ...``); none for a control transfer, whose predicates are conditions. An over-count
        only loses a value read from the dump, never invents one."""
        if self.op.family in TRANSFERS:
            return ()
        operands = list(self.operands)
        if operands and parse_register(operands[0]) is not None:
            operands = operands[1:]
        written = []
        for text in operands:
            match = _PREDICATE_NAME.match(text.strip())
            if match is None:
                break
            written.append(match[1])
        return tuple(p for p in written if not p.endswith("PT"))

    @decoded
    def writes(self) -> tuple[str, ...]:
        """Register words, in order, then predicates it writes; none where it never runs."""
        if self.runs is False:
            return ()
        return self.written_words + self.written_predicates

