"""What the SASS around a hung warp's PC says it waits for: a barrier, or a loop that polls memory.

These are readings of one function's code (crashlab.sass.finder.function_code: its listing, as
offsets into its text section, and its control-flow graph, whose rules crashlab.sass.flow gives
for the explanation and these readings alike), with no dump involved, so that they can be checked
on real nvdisasm output alone. A loop is the natural loop of a back edge (a branch to an
instruction at or before it) over that graph; it polls memory when one of its exits is
conditioned on a predicate whose definition, followed back through the loop body, reaches a load
whose address the loop does not change. Every walk is bounded: a stranger's SASS gets a reason,
never a long search.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..sass.flow import ENDS, JUMPS, FunctionCode
from ..sass.instruction import ALWAYS_TRUE, Instruction
from ..sass.operands import ConstantRef, MemoryOperand, Predicate, Register

#: Opcode families of the instructions a warp waits at for other warps (a CTA barrier, an
#: asynchronous-transaction barrier, a warp convergence barrier).
BARRIER_FAMILIES = frozenset({"BAR", "SYNCS", "WARPSYNC"})
#: Instructions followed back from an exit condition to the load it depends on.
MAX_SLICE_STEPS = 32
#: A loop body longer than this is not read (a hang loop is a few instructions).
MAX_LOOP_INSTRUCTIONS = 512


def is_barrier(instruction: Instruction) -> bool:
    return instruction.op.family in BARRIER_FAMILIES


def operand_names(operand: object) -> tuple[str, ...]:
    """The registers (a ``.64`` pair as its two words) and predicate a parsed operand names:
    ``desc[UR4][R6.64]`` gives R6, R7 (the descriptor is a cache policy, not read here). RZ,
    PT and an operand the grammar does not read name nothing."""
    if isinstance(operand, Register):
        return operand.words()
    if isinstance(operand, MemoryOperand):
        return tuple(word for register in operand.registers() for word in register.words())
    if isinstance(operand, ConstantRef):
        return operand.register.words() if operand.register else ()
    if isinstance(operand, Predicate) and operand.name not in ALWAYS_TRUE:
        return (operand.name,)
    return ()


def polls(instruction: Instruction) -> bool:
    """A read of memory another agent can change: a load or an atomic, not a constant bank."""
    access = instruction.access
    return access is not None and access.kind in ("load", "atomic") and access.space != "constant"


def _reads(instruction: Instruction) -> list[str]:
    """Registers and predicates the instruction reads (its operands past its destinations)."""
    written = (1 if instruction.written_words else 0) + len(instruction.written_predicates)
    return [name for operand in instruction.parsed[written:] for name in operand_names(operand)]


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


def _natural_body(code: FunctionCode, head: int, tail: int) -> set[int] | None:
    """Indices that reach ``tail`` without passing ``head``; None past MAX_LOOP_INSTRUCTIONS."""
    body, pending = {head, tail}, [tail] if tail != head else []
    while pending:
        for before in code.predecessors[pending.pop()]:
            if before not in body:
                if len(body) == MAX_LOOP_INSTRUCTIONS:
                    return None
                body.add(before)
                pending.append(before)
    return body


def innermost_loop(code: FunctionCode, offset: int) -> Loop | None:
    """The smallest natural loop holding ``offset``; a back edge is a branch to an instruction
    at or before it. None where there is none (or every one is over MAX_LOOP_INSTRUCTIONS)."""
    at = code.index_of.get(offset)
    if at is None:
        return None
    best: tuple[set[int], int, int] | None = None
    for tail in range(len(code.instructions)):
        if not code.is_back_edge(tail):
            continue
        head = code.index_of[code.instructions[tail].target]  # type: ignore[index]
        body = _natural_body(code, head, tail)
        if body is not None and at in body and (best is None or len(body) < len(best[0])):
            best = body, head, tail
    if best is None:
        return None
    inside, head, tail = best
    listing = code.instructions
    return Loop(listing[head].address, listing[tail].address,
                tuple(listing[k] for k in sorted(inside)))


def _exits(loop: Loop) -> list[tuple[Instruction, str]]:
    """Each conditioned way out of the loop, with a predicate conditioning it: a branch whose
    target or fall-through lies outside the body (the back edge leaves when its condition is
    false), an EXIT or RET that may not run."""
    inside = {ins.address for ins in loop.body}
    exits = []
    for ins in loop.body:
        family = ins.op.family
        leaves = family in ENDS or (family in JUMPS and ins.target is not None and (
            ins.target not in inside or ins.address + 16 not in inside
            or ins.address == loop.tail))
        if leaves and ins.acts is None:
            exits += [(ins, condition.name) for condition in ins.conditions]
    return exits


def reaching_definition(loop: Loop, at: int, name: str) -> Instruction | None:
    """The last write of ``name`` before body index ``at``, going round the loop once (a value
    defined later in the body reaches from the previous iteration); None where the loop never
    writes it (it is defined before the loop)."""
    order = list(range(at - 1, -1, -1)) + list(range(len(loop.body) - 1, at - 1, -1))
    return next((loop.body[i] for i in order if name in loop.body[i].writes), None)


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
    names = [name for text, operand in zip(load.operands, load.parsed, strict=True) if "[" in text
             for name in operand_names(operand)]
    return next((found for name in names
                 if (found := reaching_definition(loop, at, name)) is not None), None)


def polling_loop(code: FunctionCode, offset: int) -> Polling | str:
    """The polling loop holding ``offset``, or why the instruction there is not in one: the
    loop must leave on a condition fed by a load whose address the loop does not change."""
    loop = innermost_loop(code, offset)
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
