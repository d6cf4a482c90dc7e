"""A function's control flow at instruction granularity, from nvdisasm's branch targets, and the
reaching definitions of a register word over it.

Instruction granularity (no basic blocks) keeps the code short; listings are a few thousand
instructions at most and every walk is bounded by MAX_VISITS, so a hostile listing cannot make it
run long. A predicated definition does not kill the value (the guard may have been false): it is
one alternative among the others that reach. A label operand is a control transfer only on a
branch: ``BSSY B0, `(.L_x_7)`` names where the warp reconverges, and control runs on to the next
instruction (an edge to the label would bypass every definition in the region). A CALL runs on to
the next instruction too (its callee's label is not resolved), and a RET may return after any
CALL of the listing: a value the callee returns in a register reaches the caller's use of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..sass import Instruction
from .access import memory_access
from .operands import parse_register

MAX_VISITS = 20_000
_PREDICATE_NAME = re.compile(r"^(U?P(?:T|\d))$")
_STOPS_FLOW = ("EXIT", "RET", "KILL", "BRA", "JMP", "BRX", "JMX")
#: families whose label operand is not a jump: a convergence barrier's reconvergence point
#: (BSSY, BSSY.RECONVERGENT) and LEPC, which loads the address of one
_NOT_A_JUMP = ("BSSY", "LEPC")
#: families whose first operand is read, not written
_NO_DESTINATION = ("ST", "STG", "STS", "STL", "STSM", "RED", "REDG", "BRA", "BRX", "JMP", "JMX",
                   "CALL", "RET", "EXIT", "BAR", "BSSY", "BSYNC", "WARPSYNC", "MEMBAR", "CCTL",
                   "NOP", "YIELD", "DEPBAR", "ERRBAR", "FENCE", "SYNCS", "UTMALDG", "UTMASTG",
                   "UBLKCP", "STTM", "LDGSTS", "ARRIVES", "NANOSLEEP", "KILL", "BPT", "RPCMOV")


def _family(opcode: str) -> str:
    return opcode.split(".")[0]


def destination_predicates(ins: Instruction) -> tuple[str, ...]:
    """The predicates ``ins`` may write: the run of predicate operands at the start of its
    operands, or right after a register destination (``ISETP P0, PT, ...``, ``IADD3 R2, P0,
    ...``). An over-count only loses a value read from the dump, never invents one."""
    operands = list(ins.operands)
    if operands and parse_register(operands[0]) is not None:
        operands = operands[1:]
    written = []
    for text in operands:
        match = _PREDICATE_NAME.match(text.strip())
        if match is None:
            break
        written.append(match[1])
    return tuple(p for p in written if not p.endswith("PT"))


def destination_words(ins: Instruction) -> tuple[str, ...]:
    """The 32-bit registers ``ins`` writes (R2 and R3 for ``IMAD.WIDE R2, ...``); RZ is never
    written. Width comes from the opcode: ``.64``/``WIDE`` two words, ``.128`` four, a load its
    access size."""
    if not ins.operands or _family(ins.opcode) in _NO_DESTINATION:
        return ()
    register = parse_register(ins.operands[0])
    if register is None or register.index is None:
        return ()
    return _words(register.uniform, register.index, _width(ins.opcode))


def _width(opcode: str) -> int:
    access = memory_access(opcode)
    if access is not None and access.bytes and access.kind in ("load", "atomic"):
        return max(1, access.bytes // 4)
    modifiers = opcode.split(".")[1:]
    if "128" in modifiers:
        return 4
    if "64" in modifiers or "WIDE" in modifiers:
        return 2
    return 1


def _words(uniform: bool, index: int, count: int) -> tuple[str, ...]:
    prefix = "UR" if uniform else "R"
    return tuple(f"{prefix}{index + k}" for k in range(count))


@dataclass
class FunctionCode:
    """One function's listing with its successor and predecessor edges (indices into it)."""

    instructions: list[Instruction]

    def __post_init__(self) -> None:
        self.index_of = {ins.address: at for at, ins in enumerate(self.instructions)}
        self.writes = [destination_words(ins) + destination_predicates(ins)
                       for ins in self.instructions]
        #: where a RET may return to: the instruction after each CALL of the listing
        self._returns = [at + 1 for at, ins in enumerate(self.instructions)
                         if _family(ins.opcode) == "CALL" and at + 1 < len(self.instructions)]
        self.successors = [self._successors(at, ins) for at, ins in enumerate(self.instructions)]
        self.predecessors: list[list[int]] = [[] for _ in self.instructions]
        for at, following in enumerate(self.successors):
            for after in following:
                self.predecessors[after].append(at)
        #: the instructions a path leads from to each instruction asked about (on_paths)
        self._leading_to: dict[int, set[int] | None] = {}

    def _successors(self, at: int, ins: Instruction) -> list[int]:
        following = []
        family = _family(ins.opcode)
        if ins.target is not None and ins.target in self.index_of and family not in _NOT_A_JUMP:
            following.append(self.index_of[ins.target])
        if (family not in _STOPS_FLOW or ins.predicate) and at + 1 < len(self.instructions):
            following.append(at + 1)
        if family == "RET":
            following += [after for after in self._returns if after not in following]
        return following

    def reaching_definitions(self, word: str, at: int) -> tuple[list[int], bool]:
        """Indices of the instructions whose write of ``word`` may reach instruction ``at``
        (before it runs), and whether some path reaches the function's entry (or the walk's
        bound) with no definition."""
        definitions: set[int] = set()
        open_path = False
        seen: set[int] = set()
        todo = list(self.predecessors[at])
        if at == 0:
            open_path = True
        visits = 0
        while todo:
            visits += 1
            if visits > MAX_VISITS:
                return sorted(definitions), True
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            if word in self.writes[node]:
                definitions.add(node)
                if not self.instructions[node].predicate:
                    continue
            if node == 0 or not self.predecessors[node]:
                open_path = True
            todo.extend(self.predecessors[node])
        return sorted(definitions), open_path

    def run_end(self, start: int, end: int) -> int:
        """The last instruction, at most ``end``, that control runs straight to from ``start``:
        each from ``start`` to it runs once, in address order, whenever ``start`` runs (none of
        them branches, and none after ``start`` is entered but from the one before it)."""
        at = start
        while at < min(end, len(self.instructions) - 1) and self.successors[at] == [at + 1] \
                and self.predecessors[at + 1] == [at]:
            at += 1
        return at

    def shortest_way(self, start: int, end: int) -> list[int] | None:
        """The instructions on a shortest path from ``start`` (included) to ``end`` (excluded),
        in order; None where none leads there within MAX_VISITS."""
        came_from: dict[int, int] = {}
        frontier = [start]
        while frontier and end not in came_from and len(came_from) <= MAX_VISITS:
            reached = []
            for node in frontier:
                for after in self.successors[node]:
                    if after not in came_from and after != start:
                        came_from[after] = node
                        reached.append(after)
            frontier = reached
        if end not in came_from:
            return None
        way = [came_from[end]]
        while way[-1] != start:
            way.append(came_from[way[-1]])
        return way[::-1]

    def on_paths(self, start: int, end: int) -> set[int] | None:
        """The instructions on some path from ``start`` (included) to ``end``: all control may
        run between the two, every loop on the way included. None where no path leads there
        (or the walk's bound is reached): then nothing is known of what ran between."""
        if end not in self._leading_to:
            self._leading_to[end] = self._closure(end, self.predecessors)
        leading_to_end = self._leading_to[end]
        if leading_to_end is None or start not in leading_to_end:
            return None
        after_start = self._closure(start, self.successors, within=leading_to_end)
        return None if after_start is None else after_start | {start}

    def _closure(self, seed: int, edges: list[list[int]],
                 within: set[int] | None = None) -> set[int] | None:
        """Instructions one or more ``edges`` away from ``seed`` (within ``within``), None past
        MAX_VISITS."""
        found: set[int] = set()
        todo = list(edges[seed])
        while todo:
            node = todo.pop()
            if node in found or within is not None and node not in within:
                continue
            found.add(node)
            if len(found) > MAX_VISITS:
                return None
            todo.extend(edges[node])
        return found
