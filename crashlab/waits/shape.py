"""What the SASS around a hung warp's PC says it waits for: a barrier, or a loop that polls memory.

These are readings of one function's listing (crashlab.sass.function_listing: offsets into its
text section, branch targets resolved), with no dump involved, so that they can be checked on
real nvdisasm output alone. A loop is the natural loop of a back edge (a branch to an instruction
at or before it) over the instruction graph; it polls memory when one of its exits is guarded by
a predicate whose definition, followed back through the loop body, reaches a load whose address
the loop does not change. Every walk is bounded: a stranger's SASS gets a reason, never a long
search.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..explain.access import memory_access
from ..explain.cfg import destination_predicates, destination_words
from ..explain.operands import ConstantRef, MemoryOperand, Predicate, Register, parse_operand
from ..sass import Instruction

#: Opcode roots of the instructions a warp waits at for other warps (a CTA barrier, an
#: asynchronous-transaction barrier, a warp convergence barrier).
BARRIER_ROOTS = frozenset({"BAR", "SYNCS", "WARPSYNC"})
#: Instructions followed back from an exit condition to the load it depends on.
MAX_SLICE_STEPS = 32
#: A loop body longer than this is not read (a hang loop is a few instructions).
MAX_LOOP_INSTRUCTIONS = 512
_BRANCH_ROOTS = frozenset({"BRA", "BRX", "JMP", "JMX"})
_LEAVE_ROOTS = frozenset({"EXIT", "RET"})
_ALWAYS_TRUE = ("PT", "UPT")


def root(opcode: str) -> str:
    """``BAR.SYNC.DEFER_BLOCKING`` -> ``BAR``."""
    return opcode.split(".", 1)[0]


def is_barrier(instruction: Instruction) -> bool:
    return root(instruction.opcode) in BARRIER_ROOTS


def operand_names(text: str) -> tuple[str, ...]:
    """The registers (a ``.64`` pair as its two words) and predicate an operand names:
    ``desc[UR4][R6.64]`` gives R6, R7 (the descriptor is a cache policy, not read here). RZ,
    PT and an operand the grammar does not read name nothing."""
    operand = parse_operand(text)
    if isinstance(operand, Register):
        return operand.words()
    if isinstance(operand, MemoryOperand):
        return tuple(word for register in operand.registers() for word in register.words())
    if isinstance(operand, ConstantRef):
        return operand.register.words() if operand.register else ()
    if isinstance(operand, Predicate) and operand.name not in _ALWAYS_TRUE:
        return (operand.name,)
    return ()


def polls(instruction: Instruction) -> bool:
    """A read of memory another agent can change: a load or an atomic, not a constant bank."""
    access = memory_access(instruction.opcode)
    return access is not None and access.kind in ("load", "atomic") and access.space != "constant"


def _predicates_written(instruction: Instruction) -> tuple[str, ...]:
    """crashlab.explain.cfg's reading, less a branch's condition operand (``BRA.U !UP0``)."""
    if root(instruction.opcode) in _BRANCH_ROOTS | _LEAVE_ROOTS:
        return ()
    return destination_predicates(instruction)


def _destination_operands(instruction: Instruction) -> int:
    """How many leading operands are written: one register, or one or two predicates."""
    return (1 if destination_words(instruction) else 0) + len(_predicates_written(instruction))


@functools.lru_cache(maxsize=1 << 16)
def _writes(instruction: Instruction) -> frozenset[str]:
    """Register words (crashlab.explain.cfg's reading) and predicates the instruction writes
    (cached: the loop walks ask of each instruction of a body many times)."""
    return frozenset(destination_words(instruction)) | set(_predicates_written(instruction))


def _reads(instruction: Instruction) -> list[str]:
    """Registers and predicates the instruction reads (its operands past its destinations)."""
    sources = instruction.operands[_destination_operands(instruction):]
    return [name for text in sources for name in operand_names(text)]


@dataclass(frozen=True)
class Loop:
    """A natural loop: the back edge from ``tail`` to ``head`` (offsets) and every instruction
    that reaches ``tail`` without passing ``head``, in address order (a retry stub placed after
    the function's end belongs to the loop it jumps back into)."""

    head: int
    tail: int
    body: tuple[Instruction, ...]


@dataclass(frozen=True)
class Polling:
    """A loop whose exit depends on a value loaded inside it."""

    loop: Loop
    exit: Instruction
    condition: Instruction
    load: Instruction


def _unconditional(ins: Instruction) -> bool:
    return ins.predicate in (None, "@PT") and root(ins.opcode) in _BRANCH_ROOTS | _LEAVE_ROOTS


def _predecessors(listing: list[Instruction]) -> dict[int, list[int]]:
    """Offsets each instruction is reached from: the one before it (unless that one always
    branches or leaves) and every branch that names it."""
    preds: dict[int, list[int]] = {ins.address: [] for ins in listing}
    for before, ins in zip(listing, listing[1:], strict=False):
        if not _unconditional(before) or before.target == ins.address:
            preds[ins.address].append(before.address)
    for ins in listing:
        if root(ins.opcode) in _BRANCH_ROOTS and ins.target in preds:
            preds[ins.target].append(ins.address)
    return preds


def _natural_body(preds: dict[int, list[int]], head: int, tail: int) -> set[int] | None:
    """Offsets that reach ``tail`` without passing ``head``; None past MAX_LOOP_INSTRUCTIONS."""
    body, pending = {head, tail}, [tail] if tail != head else []
    while pending:
        for before in preds.get(pending.pop(), ()):
            if before not in body:
                if len(body) == MAX_LOOP_INSTRUCTIONS:
                    return None
                body.add(before)
                pending.append(before)
    return body


def innermost_loop(listing: list[Instruction], offset: int) -> Loop | None:
    """The smallest natural loop holding ``offset``; a back edge is a branch to an instruction
    at or before it. None where there is none (or every one is over MAX_LOOP_INSTRUCTIONS)."""
    preds = _predecessors(listing)
    best: tuple[set[int], int, int] | None = None
    for ins in listing:
        if root(ins.opcode) in _BRANCH_ROOTS and ins.target is not None \
                and ins.target <= ins.address and ins.target in preds:
            body = _natural_body(preds, ins.target, ins.address)
            if body is not None and offset in body and (best is None or len(body) < len(best[0])):
                best = body, ins.target, ins.address
    if best is None:
        return None
    inside, head, back = best
    return Loop(head, back, tuple(ins for ins in listing if ins.address in inside))


def _exits(loop: Loop) -> list[tuple[Instruction, str]]:
    """Each guarded way out of the loop, with the predicate guarding it: a branch whose target
    or fall-through lies outside the body (the back edge leaves when its guard is false), a
    guarded EXIT or RET."""
    inside = {ins.address for ins in loop.body}
    exits = []
    for ins in loop.body:
        if ins.predicate is None:
            continue
        predicate = ins.predicate.lstrip("@!")
        kind = root(ins.opcode)
        leaves = kind in _LEAVE_ROOTS or (kind in _BRANCH_ROOTS and ins.target is not None and (
            ins.target not in inside or ins.address + 16 not in inside
            or ins.address == loop.tail))
        if leaves and predicate not in _ALWAYS_TRUE:
            exits.append((ins, predicate))
    return exits


def reaching_definition(loop: Loop, at: int, name: str) -> Instruction | None:
    """The last write of ``name`` before body index ``at``, going round the loop once (a value
    defined later in the body reaches from the previous iteration); None where the loop never
    writes it (it is defined before the loop)."""
    order = list(range(at - 1, -1, -1)) + list(range(len(loop.body) - 1, at - 1, -1))
    return next((loop.body[i] for i in order if name in _writes(loop.body[i])), None)


def _load_behind(loop: Loop, start: Instruction, predicate: str) -> tuple[Instruction, Instruction] | None:
    """(definition of the exit predicate, the load it depends on), following definitions back
    inside the loop, or None where the condition does not come from a load in the loop."""
    index = {id(ins): i for i, ins in enumerate(loop.body)}
    condition = reaching_definition(loop, index[id(start)], predicate)
    if condition is None:
        return None
    pending, seen = [condition], set[int]()
    while pending and len(seen) < MAX_SLICE_STEPS:
        ins = pending.pop()
        if id(ins) in seen:
            continue
        seen.add(id(ins))
        if polls(ins):
            return condition, ins
        for name in _reads(ins):
            found = reaching_definition(loop, index[id(ins)], name)
            if found is not None:
                pending.append(found)
    return None


def _moving_address(loop: Loop, load: Instruction) -> Instruction | None:
    """The instruction in the loop that changes the load's address registers, if one does: a
    loop that walks memory (a search) rather than polling one place."""
    at = loop.body.index(load)
    names = [name for text in load.operands if "[" in text for name in operand_names(text)]
    return next((found for name in names
                 if (found := reaching_definition(loop, at, name)) is not None), None)


def polling_loop(listing: list[Instruction], offset: int) -> Polling | str:
    """The polling loop holding ``offset``, or why the instruction there is not in one: the
    loop must leave on a condition fed by a load whose address the loop does not change."""
    loop = innermost_loop(listing, offset)
    if loop is None:
        return f"+{offset:#x} is in no loop (none of a body up to {MAX_LOOP_INSTRUCTIONS} " \
               "instructions)"
    span = f"the loop +{loop.head:#x}..+{loop.tail:#x}"
    exits = _exits(loop)
    if not exits:
        return f"{span} has no guarded exit"
    walking = None
    for ins, predicate in exits:
        found = _load_behind(loop, ins, predicate)
        if found is None:
            continue
        moving = _moving_address(loop, found[1])
        if moving is None:
            return Polling(loop, ins, *found)
        walking = (found[1], moving)
    if walking is not None:
        load, change = walking
        return (f"{span} leaves on data loaded by {load.opcode} at +{load.address:#x}, whose "
                f"address {change.opcode} at +{change.address:#x} changes: it walks memory, "
                "not polls one place")
    return f"no exit of {span} depends on a load inside it"
