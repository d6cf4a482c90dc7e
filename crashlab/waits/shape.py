"""What the SASS around a hung warp's PC says it waits for: a barrier, or a loop that polls memory.

These are readings of one function's listing (crashlab.sass.function_listing: offsets into its
text section, branch targets resolved), with no dump involved, so that they can be checked on
real nvdisasm output alone. A loop is found from its back edge (a branch whose target lies at or
before it, spanning the PC); it polls memory when one of its exits is guarded by a predicate
whose definition, followed back through the loop body, reaches a load. Every walk is bounded: a
stranger's SASS gets a reason, never a long search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..sass import Instruction

#: Opcode roots of the instructions a warp waits at for other warps (a CTA barrier, an
#: asynchronous-transaction barrier, a warp convergence barrier).
BARRIER_ROOTS = frozenset({"BAR", "SYNCS", "WARPSYNC"})
#: Instructions followed back from an exit condition to the load it depends on.
MAX_SLICE_STEPS = 32
#: A loop body longer than this is not read (a hang loop is a few instructions).
MAX_LOOP_INSTRUCTIONS = 512
#: Opcode roots that write no register or predicate (their first operand is a source).
_NO_DESTINATION = frozenset({
    "BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL", "BAR", "SYNCS", "WARPSYNC", "BSSY", "BSYNC",
    "YIELD", "NOP", "NANOSLEEP", "MEMBAR", "FENCE", "ERRBAR", "CCTL", "CCTLL", "DEPBAR", "BPT",
    "BMOV", "WARPGROUP", "ACQBULK", "KILL",
})
_BRANCH_ROOTS = frozenset({"BRA", "BRX", "JMP", "JMX"})
_LEAVE_ROOTS = frozenset({"EXIT", "RET"})
_REGISTER = re.compile(r"(?<![\w.])(U?R)(\d+)(\.64)?")
_PREDICATE = re.compile(r"^!?(U?P[0-6])$")


def root(opcode: str) -> str:
    """``BAR.SYNC.DEFER_BLOCKING`` -> ``BAR``."""
    return opcode.split(".", 1)[0]


def is_barrier(instruction: Instruction) -> bool:
    return root(instruction.opcode) in BARRIER_ROOTS


def registers_in(operand: str) -> list[str]:
    """The registers an operand names, a 64-bit pair as its two halves: ``desc[UR4][R6.64]``
    gives ``UR4, R6, R7``. RZ and URZ are constants and are not named."""
    names = []
    for kind, number, wide in _REGISTER.findall(operand):
        names.append(f"{kind}{number}")
        if wide:
            names.append(f"{kind}{int(number) + 1}")
    return names


def _access_kind(opcode: str) -> str | None:
    """TEMPORARY until crashlab.explain.access lands: load, store, atomic or None."""
    kind = root(opcode)
    if kind in ("LDG", "LD", "LDS", "LDL", "LDSM"):
        return "load"
    if kind in ("STG", "ST", "STS", "STL", "RED", "REDG"):
        return "store"
    if kind in ("ATOM", "ATOMG", "ATOMS"):
        return "atomic"
    return None


def _width(instruction: Instruction) -> int:
    """Registers one destination covers: a pair for ``.64`` and IMAD.WIDE, four for ``.128``."""
    modifiers = instruction.opcode.split(".")[1:]
    if "128" in modifiers:
        return 4
    return 2 if "64" in modifiers or "WIDE" in modifiers else 1


def _writes(instruction: Instruction) -> set[str]:
    """Registers and predicates the instruction writes: its leading destinations."""
    if root(instruction.opcode) in _NO_DESTINATION or not instruction.operands:
        return set()
    if _access_kind(instruction.opcode) == "store":
        return set()
    first, *rest = instruction.operands
    if _PREDICATE.match(first):
        written = {first}
        if rest and _PREDICATE.match(rest[0]):
            written.add(rest[0])  # ISETP P0, P1, ...: both are destinations
        return written - {"PT", "UPT"}
    names = registers_in(first)
    if len(names) == 1 and _width(instruction) > 1:
        kind, number = re.match(r"(U?R)(\d+)", names[0]).groups()
        names = [f"{kind}{int(number) + i}" for i in range(_width(instruction))]
    return set(names)


def _reads(instruction: Instruction) -> list[str]:
    """Registers and predicates the instruction reads (its operands past its destinations)."""
    sources = instruction.operands[len(_destination_operands(instruction)):]
    names = []
    for operand in sources:
        if _PREDICATE.match(operand):
            names.append(operand.lstrip("!"))
        else:
            names += registers_in(operand)
    return [n for n in names if n not in ("PT", "UPT")]


def _destination_operands(instruction: Instruction) -> tuple[str, ...]:
    if not _writes(instruction):
        return ()
    ops = instruction.operands
    if _PREDICATE.match(ops[0]) and len(ops) > 1 and _PREDICATE.match(ops[1]):
        return ops[:2]
    return ops[:1]


@dataclass(frozen=True)
class Loop:
    """Instructions ``head`` to ``tail`` (offsets, inclusive) with a branch back from ``tail``."""

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


def innermost_loop(listing: list[Instruction], offset: int) -> Loop | None:
    """The shortest loop, found from a backward branch, whose body holds ``offset``."""
    spans = [(ins.target, ins.address) for ins in listing
             if root(ins.opcode) in _BRANCH_ROOTS and ins.target is not None
             and ins.target <= offset <= ins.address]
    if not spans:
        return None
    head, tail = min(spans, key=lambda span: span[1] - span[0])
    body = tuple(ins for ins in listing if head <= ins.address <= tail)
    return Loop(head, tail, body) if len(body) <= MAX_LOOP_INSTRUCTIONS else None


def _exits(loop: Loop) -> list[tuple[Instruction, str]]:
    """Each guarded way out of the loop, with the predicate guarding it: the back edge
    (leaving when its guard is false), a branch out of the body, an EXIT or RET."""
    exits = []
    for ins in loop.body:
        if ins.predicate is None:
            continue
        predicate = ins.predicate.lstrip("@!")
        kind = root(ins.opcode)
        leaves = kind in _LEAVE_ROOTS or (kind in _BRANCH_ROOTS and ins.target is not None and (
            ins.address == loop.tail or not loop.head <= ins.target <= loop.tail))
        if leaves and predicate not in ("PT", "UPT"):
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
    pending, seen = [condition], set()
    while pending and len(seen) < MAX_SLICE_STEPS:
        ins = pending.pop()
        if id(ins) in seen:
            continue
        seen.add(id(ins))
        if _access_kind(ins.opcode) in ("load", "atomic"):
            return condition, ins
        for name in _reads(ins):
            found = reaching_definition(loop, index[id(ins)], name)
            if found is not None:
                pending.append(found)
    return None


def polling_loop(listing: list[Instruction], offset: int) -> Polling | str:
    """The polling loop holding ``offset``, or why the instruction there is not in one."""
    loop = innermost_loop(listing, offset)
    if loop is None:
        return f"no backward branch spans +{offset:#x} (no loop, or a body over " \
               f"{MAX_LOOP_INSTRUCTIONS} instructions)"
    exits = _exits(loop)
    if not exits:
        return f"the loop +{loop.head:#x}..+{loop.tail:#x} has no guarded exit"
    for ins, predicate in exits:
        found = _load_behind(loop, ins, predicate)
        if found is not None:
            return Polling(loop, ins, *found)
    return f"no exit of the loop +{loop.head:#x}..+{loop.tail:#x} depends on a load inside it"


def definition_before(listing: list[Instruction], offset: int, name: str) -> Instruction | None:
    """The last write of ``name`` before ``offset`` in program order: what reaches a loop from
    straight-line code before it (branches around it are not followed)."""
    return next((ins for ins in reversed(listing) if ins.address < offset and name in _writes(ins)),
                None)
