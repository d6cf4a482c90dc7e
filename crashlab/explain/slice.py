"""The backward slice: where a register word read at one instruction came from, followed through
the function's reaching definitions to its roots (a kernel parameter, a launch coordinate, a
load, a constant) or to a stop with its reason, each value computed where its inputs are known.

Two ways to know a value, kept apart so that each checks the other:

- *from the dump* (dumped.py): the lane's registers as of the faulting instruction, less what
  the lane wrote at it or after it; a word read earlier is the dumped word where nothing on the
  way to the fault writes it, or, where a straight run redefines it by a step (``R9 = R9 +
  blockDim.x``, a loop's induction executed once after the load), the dumped word less the step;
  where a loop or a branch may write it, the dump does not give it;
- *recomputed*: the defining instruction evaluated on its own inputs, back to the roots.

Where both are known and differ, the dump does not fit the code (a synthetic or damaged dump, a
wrong listing): the slicer records a mismatch, and the explanation is then not a cause. Only
where both are the same word at the same point: where the lane's PC is not reached from the
fault, the difference is a stop, not a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from ..report import model
from ..sass.flow import FunctionCode
from ..sass.instruction import Instruction
from ..sass.operands import (
    ConstantRef,
    Immediate,
    MemoryOperand,
    Predicate,
    Register,
    parse_operand,
)
from ..sass.semantics import (
    MASK32,
    MASK64,
    MULTIPLY_ADD,
    Term,
    apply,
    operation,
    shifted,
    signed32,
    summed,
)
from .carry import CarryChain, carry_chain, constant_move, division_idiom
from .dumped import DumpedRegisters
from .launch import Launch, LaunchValues, ParamSource
from .value import Record, Value, number, total

MAX_DEPTH = 24
MAX_WORDS = 400
_INDUCTION_NAMES = "ijklmn"


@dataclass(frozen=True)
class Findings:
    """What one slice found: the address's value and formula, the roots it reached (by name),
    where it stopped and why, where the dumped registers do not fit the code, and the story of
    its loop variables and guarded alternatives."""

    value: Value
    roots: list[model.Root]
    stops: list[str]
    mismatches: list[str]
    story: list[str]

    @property
    def formula(self) -> str:
        return f"address = {self.value.text}"

    @property
    def trust(self) -> Literal["consistent", "mismatch"]:
        """``mismatch`` where the dump does not fit the code: then nothing here is a cause."""
        return "mismatch" if self.mismatches else "consistent"


#: how a definition's value is worked out, by what the instruction is (Slicer._kind)
Evaluation = Callable[["Slicer", int, int], "Value"]


@dataclass
class Slicer:
    code: FunctionCode
    fault_at: int
    #: index of the lane's PC where it lies after the fault on a straight path, else None
    dump_at: int | None
    registers: list[int] | None
    uniform_registers: list[int] | None
    launch: Launch
    params: ParamSource
    predicates: list[bool] | None = None
    uniform_predicates: list[bool] | None = None
    record: Record = field(default_factory=Record)
    _memo: dict[tuple[str, int], Value] = field(default_factory=dict)
    _defs: dict[int, Value] = field(default_factory=dict)
    _words: int = 0
    _inductions: dict[tuple[str, int], str] = field(default_factory=dict)
    _pairs: dict[int, Value] = field(default_factory=dict)
    _dump: DumpedRegisters = field(init=False)
    _launch: LaunchValues = field(init=False)

    def __post_init__(self) -> None:
        self._dump = DumpedRegisters(self.code, self.fault_at, self.dump_at, self.registers,
                                     self.uniform_registers, self.predicates,
                                     self.uniform_predicates, self.record.stop)
        self._launch = LaunchValues(self.launch, self.params, self.record)

    # -- public ---------------------------------------------------------------------------
    def slice(self, operand: MemoryOperand, at: int) -> Findings:
        """The slice of a memory operand's address at instruction ``at``, with everything the
        slicer has found so far (a slicer reused for several operands keeps what each found)."""
        value = self.address(operand, at)
        found = self.record
        return Findings(value, list(found.roots.values()), list(found.stops),
                        list(found.mismatches), list(found.story))

    def address(self, operand: MemoryOperand, at: int) -> Value:
        """The value of a memory operand's address at instruction ``at``: the sum of its terms;
        an element of a parameter's array where its one register is one (``&arg0[i]``)."""
        parts = [self._scaled(self._register(r, at, pair=operand.wide), operand.scale)
                 if r is operand.register else self._register(r, at, pair=operand.wide)
                 for r in operand.registers()]
        element = parts[0].element if len(parts) == 1 else None
        if element is not None and operand.offset:
            ordinal, index, size = element
            if operand.offset % size:
                element = None
            else:
                shift = operand.offset // size
                element = (ordinal, Value(None if index.value is None else index.value + shift,
                                          f"{index.text} + {shift}"), size)
        if operand.offset or not parts:
            parts.append(Value(operand.offset, f"{operand.offset:#x}"))
        summed_value = total(p.value for p in parts)
        mask = MASK64 if operand.wide else MASK32
        return Value(None if summed_value is None else summed_value & mask,
                     " + ".join(p.text for p in parts), element=element)

    @staticmethod
    def _scaled(part: Value, scale: int) -> Value:
        """``R0.X4``: the register's value times its scale (an index, no longer an element)."""
        if scale == 1:
            return part
        return Value(None if part.value is None else part.value * scale, f"{part.text}*{scale}")

    @property
    def resolved(self) -> int:
        """Register words the slice has followed (at most MAX_WORDS: the bound on its work)."""
        return self._words

    # -- reading words --------------------------------------------------------------------
    def word(self, name: str, at: int, depth: int = 0) -> Value:
        key = (name, at)
        if key in self._memo:
            return self._memo[key]
        if depth > MAX_DEPTH or self._words >= MAX_WORDS:
            self.record.stop(f"{name} at +{self._address(at):#x}: the slice's size limit was reached")
            return Value(None, name)
        self._words += 1
        self._memo[key] = Value(None, name)  # a cycle reads as unknown, not as recursion
        self._memo[key] = found = self._resolve(name, at, depth)
        return found

    def _resolve(self, name: str, at: int, depth: int) -> Value:
        defs, open_path = self.code.reaching_definitions(name, at)
        dumped, unread = self._from_dump(name, at, depth)
        where = f"{name} at +{self._address(at):#x}"
        if len(defs) == 1 and not open_path:
            computed = self._defined(defs[0], name, depth)
            if unread and computed.value is not None:
                self.record.stop(f"{where} is not compared with the dump: {unread}")
            if computed.value is not None and dumped is not None and computed.value != dumped:
                said = (f"{where} is {dumped:#x} in the dump but {computed.value:#x} "
                        f"recomputed from its roots ({computed.text})")
                if self._dump.sound:
                    self.record.mismatches.append(said)
                else:
                    self.record.stop(f"{said}: not compared, as the dump may not hold the registers "
                               "as of the fault")
            if computed.value is None and dumped is not None:
                return replace(computed, value=dumped)
            return computed
        if len(defs) > 1 or defs and open_path:
            return self._induction(name, at, defs, dumped, unread, depth)
        self.record.stop(f"{where}: no definition in the function reaches it on some path (written "
                   "by a caller, or not written)" + (f"; {unread}" if unread else ""))
        return Value(dumped, name)

    def _from_dump(self, name: str, at: int, depth: int,
                   said: bool = True) -> tuple[int | None, str | None]:
        """The word's value before instruction ``at``, from the dumped registers: None where the
        dump lacks the word or a write between there and the fault cannot be undone; with it,
        where the dump holds the word but a loop or a branch may write it on the way, why. A
        word the lane overwrote past the fault is a stop where ``said``."""
        value = self._dump.word(name, said)
        if value is None:
            return None, None
        writers = self._dump.writes_before_fault(name, at)
        if isinstance(writers, str):
            return None, writers
        for step_at in reversed(writers):
            step = None if self.code.instructions[step_at].predicate else \
                self._step(step_at, name, depth)
            if step is None or step.value is None:
                return None, None
            value = (value - step.value) & MASK32
        return value, None

    def overwritten(self, name: str) -> bool:
        """Whether the lane may have written ``name`` at the faulting instruction or after it,
        before its PC, where the dump took the registers."""
        return self._dump.overwritten(name)

    # -- definitions ----------------------------------------------------------------------
    def _defined(self, at: int, name: str, depth: int) -> Value:
        """Word ``name`` as the instruction at ``at`` writes it."""
        words = self.code.instructions[at].writes
        pair = self._launch.pair_load(self.code.instructions[at])
        if pair is not None:  # LDC.64 of two 4-byte parameters: each word is its own
            return replace(self._launch.slot(pair + 4 * words.index(name), 1), origin=at)
        if at not in self._defs:
            self._defs[at] = self._evaluate(at, depth)
        whole = self._defs[at]
        if whole.origin is not None and len(words) == 1:
            return whole  # a copied word keeps the definition it came from (pairs rejoin)
        k = words.index(name)
        value = None if whole.value is None else (whole.value >> (32 * k)) & MASK32
        text = whole.text if k == 0 else f"hi({whole.text})" if len(words) == 2 else \
            f"word {k} of ({whole.text})"
        return replace(whole, value=value, text=text, origin=at, whole=whole)

    def _evaluate(self, at: int, depth: int) -> Value:
        ins = self.code.instructions[at]
        return _EVALUATIONS[_kind(ins)](self, at, depth)

    def _special_at(self, at: int, _depth: int) -> Value:
        ins = self.code.instructions[at]
        return self._launch.special(ins.operands[-1] if ins.operands else "", _where(ins))

    def _constant_at(self, at: int, _depth: int) -> Value:
        ins = self.code.instructions[at]
        return self._launch.constant(ins, _where(ins))

    def _load_at(self, at: int, depth: int) -> Value:
        return self._load(at, _where(self.code.instructions[at]), depth)

    def _shuffled(self, at: int, _depth: int) -> Value:
        return self.record.stopped(f"{_where(self.code.instructions[at])}: a value from another lane (SHFL)")

    def _high_word(self, at: int, depth: int) -> Value:
        """The ``.X`` op of a carry chain: the high word of its 64-bit sum."""
        pair = self._carry_pair(at, depth)
        return replace(pair, text=f"hi({pair.text})", element=None, param=None,
                       value=None if pair.value is None else pair.value >> 32)

    def _moved_constant(self, at: int, _depth: int) -> Value:
        """``HFMA2.MMA Rd, -RZ, RZ, hi, lo``: a 32-bit constant moved as two halves."""
        ins = self.code.instructions[at]
        bits = constant_move(ins.opcode, ins.operands[1:]) or 0
        return Value(bits, f"{bits:#x}")

    def _idiom(self, at: int, _depth: int) -> Value:
        ins = self.code.instructions[at]
        return self.record.stopped(f"{_where(ins)}: {division_idiom(ins.opcode)}")

    def _computed(self, at: int, depth: int) -> Value:
        """An ALU op the semantics table models (crashlab.sass.semantics), or a stop naming it."""
        ins = self.code.instructions[at]
        where = _where(ins)
        op = operation(ins.opcode)
        if op is None:
            return self.record.stopped(f"{where}: an operation the slice does not model")
        sources = [o for o in ins.operands[1:] if not isinstance(parse_operand(o), Predicate)]
        terms = [self._term(text, at, depth,
                            pair=op.bits == 64 and (op.pairs or k == len(sources) - 1))
                 for k, text in enumerate(sources)]
        result = apply(op, [Term(t.value, t.text) for t in terms])
        if result is None:
            return self.record.stopped(f"{where}: operands not read ({', '.join(ins.operands)})")
        element = None
        if op.bits == 64 and len(terms) == 3 and terms[2].param is not None and terms[1].value:
            element = (terms[2].param, terms[0], terms[1].value)
        if ins.op.base == "MOV" and isinstance(parse_operand(sources[0]), Immediate):
            self.record.root(model.Root.model_construct(kind="constant", name=sources[0], value=sources[0]))
        copied = next((t for t in terms if t.text == result.text and t.value == result.value), None)
        if copied is not None and op.bits == 32:
            return copied  # a move (MOV, IMAD.MOV, IMAD.U32 RZ, RZ, x): the source, as it was
        return Value(result.value, result.text, element=element)

    def _select(self, at: int, depth: int) -> Value:
        """``SEL R0, a, b, P``: a where P holds, else b. Both sides are sliced; the value is
        known where the predicate is (read from the dump) or where both sides agree."""
        ins = self.code.instructions[at]
        operands = list(ins.operands[1:])
        guard = parse_operand(operands[-1]) if operands else None
        if len(operands) != 3 or not isinstance(guard, Predicate):
            return self.record.stopped(f"{ins.opcode} at +{ins.address:#x}: operands not read")
        first, second = (self._term(text, at, depth) for text in operands[:2])
        holds = self._dump.predicate(guard.name, at)
        text = f"{'!' if guard.negated else ''}{guard.name} ? {first.text} : {second.text}"
        if holds is not None:
            chosen = first if holds != guard.negated else second
            return Value(chosen.value, text)
        return Value(first.value if first.value == second.value else None, text)

    def _term(self, text: str, at: int, depth: int, pair: bool = False) -> Value:
        operand = parse_operand(text)
        if isinstance(operand, Register):
            found = self._register(operand, at, pair=pair or operand.wide, depth=depth)
            if operand.negated and found.value is not None:
                return replace(found, value=-found.value, text=f"-{found.text}", param=None)
            if operand.inverted and found.value is not None:
                return replace(found, value=~found.value & MASK32, text=f"~{found.text}", param=None)
            return found
        if isinstance(operand, Immediate) and isinstance(operand.value, int):
            return Value(operand.value & (MASK64 if pair else MASK32), number(operand.value))
        if isinstance(operand, ConstantRef) and operand.bank == 0 and operand.register is None:
            return self._launch.slot(operand.offset, 2 if pair else 1)
        self.record.stop(f"operand {text} at +{self._address(at):#x} is not read by the slice")
        return Value(None, text)

    def _register(self, register: Register, at: int, pair: bool = False, depth: int = 0) -> Value:
        if register.index is None:
            return Value(0, "0")
        prefix = "UR" if register.uniform else "R"
        low = self.word(f"{prefix}{register.index}", at, depth + 1)
        if not pair:
            return low
        high = self.word(f"{prefix}{register.index + 1}", at, depth + 1)
        if high.origin is not None and high.origin != low.origin and \
                self._pair_written_by(high.origin, low.origin):
            return self._carry_pair(high.origin, depth)
        return self._joined(low, high, depth)

    def _pair_written_by(self, high_at: int, low_at: int | None) -> bool:
        """Whether the high word's definition is a carry chain's ``.X`` op whose low word is
        the one ``low_at`` writes."""
        chain = carry_chain(self.code, high_at)
        return isinstance(chain, CarryChain) and chain.low_at == low_at

    def _joined(self, low: Value, high: Value, depth: int) -> Value:
        """Two words read as one 64-bit value: a pair one definition wrote, a word and its sign
        or zero extension (the formula is the word's), else ``high:low``."""
        if low.origin is not None and low.origin == high.origin and low.whole is not None:
            return low.whole
        value = None if low.value is None or high.value is None else low.value | high.value << 32
        extension = high.origin is not None and self._sign_extends(high.origin, low, depth)
        if extension or (high.text == "0" and high.value == 0):
            if extension and low.value is not None:
                value = signed32(low.value) & MASK64
            return Value(value, low.text, param=low.param)
        return Value(value, f"{high.text}:{low.text}")

    def _sign_extends(self, at: int, low: Value, depth: int) -> bool:
        """``SHF.R.S32.HI Rh, RZ, 0x1f, Rl``: the high word is the low word's sign."""
        ins = self.code.instructions[at]
        return ins.op.base == "SHF" and ins.op.modifiers[:3] == ("R", "S32", "HI") and \
            len(ins.operands) == 4 and ins.operands[2] in ("0x1f", "31") and \
            self._term(ins.operands[3], at, depth + 1).text == low.text

    # -- carry chains ---------------------------------------------------------------------
    def _carry_pair(self, high_at: int, depth: int) -> Value:
        """The 64-bit value a carry chain (a low op's carry-out, the ``.X`` op consuming it)
        writes, both words computed exactly; a stop with its reason where it cannot be."""
        if high_at not in self._pairs:
            self._pairs[high_at] = Value(None, "?")  # a cycle reads as unknown
            self._pairs[high_at] = self._evaluate_pair(high_at, depth)
        return self._pairs[high_at]

    def _evaluate_pair(self, high_at: int, depth: int) -> Value:
        chain = carry_chain(self.code, high_at)
        where = f"{self.code.instructions[high_at].opcode} at +{self._address(high_at):#x}"
        if isinstance(chain, str):
            return self.record.stopped(f"{where}: {chain}")
        terms_read = [self._pair_term(lo, hi, chain.low_at, high_at, depth)
                      for lo, hi in chain.operand_pairs]
        pairs = [p for p in terms_read if p is not None]
        shift = self._term(chain.shift, chain.low_at, depth) if chain.shift else Value(0, "0")
        if len(pairs) != len(terms_read) or shift.value is None:
            return self.record.stopped(f"{where}: the operands of its 64-bit sum are not read")
        base, *rest = pairs
        limit = MASK32 if chain.narrow else MASK64
        scaled = Value(None if base.value is None else base.value << shift.value & limit,
                       shifted(base.text, shift.text))
        terms = [scaled, *rest]
        summed_value = total(t.value for t in terms)
        value = None if summed_value is None else summed_value & MASK64
        element = None
        fits = not chain.narrow or base.value is None or base.value << shift.value <= MASK32
        if len(rest) == 1 and rest[0].param is not None and shift.value and fits:
            element = (rest[0].param, base, 1 << shift.value)
        return Value(value, summed(*(t.text for t in terms)), element=element)

    def _pair_term(self, low_text: str, high_text: str | None, low_at: int, high_at: int,
                   depth: int) -> Value | None:
        """One 64-bit operand of a carry chain: its low word as the low op reads it, its high
        word as the ``.X`` op does (None: the word's sign extension, ``.SX32``); ``-x`` with
        ``~x_hi`` is the pair's negation."""
        low, high = parse_operand(low_text), parse_operand(high_text) if high_text else None
        if isinstance(low, Immediate) and isinstance(high, Immediate) and \
                isinstance(low.value, int) and isinstance(high.value, int):
            value = (high.value & MASK32) << 32 | low.value & MASK32
            return Value(value, number(value - (1 << 64) if value >> 63 else value))
        if isinstance(low, ConstantRef) and isinstance(high, ConstantRef) and \
                high.offset == low.offset + 4 and low.bank == high.bank == 0:
            return self._launch.slot(low.offset, 2)
        negated = isinstance(low, Register) and low.negated
        if negated != (isinstance(high, Register) and high.inverted):
            return None
        low_word = self._term(low_text.removeprefix("-"), low_at, depth)
        if high is None or high_text is None:
            joined = replace(low_word, value=None if low_word.value is None
                             else signed32(low_word.value) & MASK64)
        else:
            joined = self._joined(low_word, self._term(high_text.removeprefix("~"), high_at, depth),
                                  depth)
        if negated:
            return Value(None if joined.value is None else -joined.value & MASK64,
                         f"-{joined.text}")
        return joined

    # -- loads and loop variables ---------------------------------------------------------
    def _load(self, at: int, where: str, depth: int) -> Value:
        """A loaded value (every word the load writes: ``LDS.64 R2`` is R3:R2): the dumped
        destination where no later write hides it; what it read is the slice of the load's own
        address."""
        ins = self.code.instructions[at]
        names = [name for name in self.code.instructions[at].writes if name.startswith(("R", "UR"))]
        words = [word for word in (self._from_dump(name, at + 1, depth, said=False)[0]
                                   for name in names) if word is not None]
        value = sum(word << 32 * k for k, word in enumerate(words)) \
            if names and len(words) == len(names) else None
        operand = next((parse_operand(o) for o in ins.operands
                        if isinstance(parse_operand(o), MemoryOperand)), None)
        detail, text = None, f"load at +{ins.address:#x}"
        if isinstance(operand, MemoryOperand):
            address = self.address(operand, at)
            if address.element is not None:
                ordinal, index, size = address.element
                shown = "" if index.value is None else f" = {signed32(index.value)}"
                detail = f"element {index.text}{shown} of param {ordinal} ({size}-byte elements)"
                text = f"arg{ordinal}[{index.text}]"
            elif address.value is not None:
                detail = f"address {address.value:#x} ({address.text})"
        self.record.root(model.Root.model_construct(kind="load", name=where, detail=detail,
                              value=None if value is None else f"{value:#x}",
                              provenance="dump" if value is not None else None))
        return Value(value, text)

    def _induction(self, name: str, at: int, defs: list[int], dumped: int | None,
                   unread: str | None, depth: int) -> Value:
        """A word several definitions reach, or one that not every path passes: a loop
        variable (a start and a step) or guarded alternatives; its value is the dump's, where
        the path to the fault allows."""
        key = (name, min(defs))
        label = self._inductions.setdefault(key, _INDUCTION_NAMES[len(self._inductions) % 6])
        steps = [(j, self._step(j, name, depth)) for j in defs]
        starts = list(dict.fromkeys(self._defined(j, name, depth).text for j, step in steps
                                    if step is None))
        moves = list(dict.fromkeys(step.text for _, step in steps if step is not None))
        shown = "unknown" if dumped is None else f"{signed32(dumped)}"
        if moves and starts:
            self.record.story.append(f"{label} ({name} at +{self._address(at):#x}) = {shown}: a loop "
                              f"variable that starts as {' or '.join(starts)} and steps by "
                              f"{' or '.join(moves)}")
        elif len(defs) == 1:
            self.record.story.append(f"{label} ({name} at +{self._address(at):#x}) = {shown}: set on "
                              "some paths only (a guarded definition, or a path around it)")
        else:
            self.record.story.append(f"{label} ({name} at +{self._address(at):#x}) = {shown}: one of "
                              f"{len(defs)} definitions (guarded or joined paths)")
        if dumped is None and self.registers is not None:
            self.record.stop(f"{name} at +{self._address(at):#x}: no one definition settles it and the "
                       "dump does not give its value there" + (f": {unread}" if unread else ""))
        return Value(dumped, label)

    def _step(self, at: int, name: str, depth: int) -> Value | None:
        """The amount a self-increment ``name = name + x`` at ``at`` adds, else None."""
        ins = self.code.instructions[at]
        family = ins.op.base
        if operation(ins.opcode) is None or family not in _STEPPING:
            return None
        sources = [o for o in ins.operands[1:] if not isinstance(parse_operand(o), Predicate)]
        names = [_plain_name(parse_operand(o)) for o in sources]
        if name not in names:
            return None
        if family == "IMAD":  # name = a * b + name: the step is the product
            if names[2] != name:
                return None
            product = apply(MULTIPLY_ADD, [Term(v.value, v.text) for v in (
                self._term(sources[0], at, depth), self._term(sources[1], at, depth), Value(0, "0"))])
            return None if product is None else Value(product.value, product.text)
        others = [self._term(s, at, depth)
                  for s, n in zip(sources, names, strict=True) if n != name]
        text = " + ".join(o.text for o in others if o.text != "0") or "0"
        return Value(total(o.value for o in others), text)

    def _address(self, at: int) -> int:
        instructions = self.code.instructions
        return instructions[at].address if 0 <= at < len(instructions) else -1


#: the families a loop's induction steps by (name = name + x, name = a * b + name)
_STEPPING = frozenset({"IMAD", "IADD3", "VIADD", "IADD"})


def _plain_name(operand: object) -> str | None:
    """The name of a register operand read as it is (not negated or inverted), else None."""
    if isinstance(operand, Register) and not (operand.negated or operand.inverted):
        return operand.name
    return None


def _where(ins: Instruction) -> str:
    return f"{ins.opcode} at +{ins.address:#x}"


#: families that read a special register (S2R R0, SR_TID.X)
_SPECIAL_READS = frozenset({"S2R", "S2UR", "CS2R"})


def _kind(ins: Instruction) -> str:
    """What kind of definition ``ins`` is, for the table of evaluations."""
    access = ins.access
    if ins.op.family in _SPECIAL_READS:
        return "special"
    if access is not None and access.space == "constant":
        return "constant"
    if access is not None and access.kind == "load":
        return "load"
    if ins.op.family.endswith("SHFL"):
        return "shuffle"
    if ins.op.base == "SEL":
        return "select"
    if ins.op.has("X"):
        return "high word"
    if constant_move(ins.opcode, ins.operands[1:]) is not None:
        return "moved constant"
    return "idiom" if division_idiom(ins.opcode) else "computed"


_EVALUATIONS: dict[str, Evaluation] = {
    "special": Slicer._special_at,
    "constant": Slicer._constant_at,
    "load": Slicer._load_at,
    "shuffle": Slicer._shuffled,
    "select": Slicer._select,
    "high word": Slicer._high_word,
    "moved constant": Slicer._moved_constant,
    "idiom": Slicer._idiom,
    "computed": Slicer._computed,
}
