"""One function's control flow at instruction granularity, from nvdisasm's branch targets, and the
reaching definitions of a register word over it: the one graph the fault's explanation and the
hang's loops are read on.

The rules, whoever reads the graph:

- EXIT, KILL and RET end the flow where they run; a guarded one (``@P0 EXIT``) may not run, so
  control may also go on to the next instruction;
- a branch (BRA, BRX, JMP, JMX) goes to its target; an unconditional one does not fall through;
  one conditioned by its guard (``@P0``, ``@!P0``) or by a condition operand (``BRA.U !UP0``,
  ``@P0 BRA P1``, ``BRA.DIV UR4``) may also fall through;
- ``@PT`` (or ``UPT``) is no condition: the instruction always runs; ``@!PT`` never runs, so its
  branch is never taken and it writes nothing;
- a label operand is a control transfer only on a branch: ``BSSY B0, `(.L_x_7)`` names where the
  warp reconverges and LEPC loads the address of one (an edge to the label would bypass every
  definition in the region), and control runs on to the next instruction;
- a CALL runs on to the next instruction (its callee's label is not resolved), and a RET may
  return after any CALL of the listing: a value the callee returns in a register reaches the
  caller's use of it.

Instruction granularity (no basic blocks) keeps the code short; listings are a few thousand
instructions at most and every walk is bounded by MAX_VISITS, so a hostile listing cannot make it
run long. A predicated definition does not kill the value (the guard may have been false): it is
one alternative among the others that reach.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from .instruction import Instruction

MAX_VISITS = 20_000
#: branches: an unconditional one does not fall through
JUMPS = frozenset({"BRA", "BRX", "JMP", "JMX"})
#: where the flow ends when they run
ENDS = frozenset({"EXIT", "RET", "KILL"})
#: families whose label operand is not a jump: a convergence barrier's reconvergence point
#: (BSSY, BSSY.RECONVERGENT) and LEPC, which loads the address of one
_NOT_A_JUMP = frozenset({"BSSY", "LEPC"})


@dataclass
class FunctionCode:
    """One function's listing with its successor and predecessor edges (indices into it)."""

    instructions: list[Instruction]

    def __post_init__(self) -> None:
        self.index_of = {ins.address: at for at, ins in enumerate(self.instructions)}
        self._addresses = [ins.address for ins in self.instructions]
        #: where a RET may return to: the instruction after each CALL of the listing
        self._returns = [at + 1 for at, ins in enumerate(self.instructions)
                         if ins.op.family == "CALL" and at + 1 < len(self.instructions)]
        self.successors = [self._successors(at, ins) for at, ins in enumerate(self.instructions)]
        self.predecessors: list[list[int]] = [[] for _ in self.instructions]
        for at, following in enumerate(self.successors):
            for after in following:
                self.predecessors[after].append(at)
        #: the instructions a path leads from to each instruction asked about (on_paths)
        self._leading_to: dict[int, set[int] | None] = {}
        #: shortest ways asked for (every lane of a fault asks for the way to its own PC)
        self._ways: dict[tuple[int, int], list[int] | None] = {}

    def _successors(self, at: int, ins: Instruction) -> list[int]:
        after = [at + 1] if at + 1 < len(self.instructions) else []
        acts = ins.acts
        if acts is False:
            return after
        family = ins.op.family
        following = []
        if ins.target is not None and ins.target in self.index_of and family not in _NOT_A_JUMP:
            following.append(self.index_of[ins.target])
        if not (acts and family in JUMPS | ENDS):
            following += [a for a in after if a not in following]
        if family == "RET":
            following += [a for a in self._returns if a not in following]
        return following

    def at(self, offset: int) -> int | None:
        """The index of the instruction holding ``offset`` (an instruction is 16 bytes)."""
        found = self.index_of.get(offset)
        if found is not None or not self.instructions:
            return found
        before = bisect_right(self._addresses, offset) - 1
        if before >= 0 and offset < self.instructions[before].address + 16:
            return before
        return None

    def is_back_edge(self, at: int) -> bool:
        """A branch at ``at`` to an instruction at or before it: a loop's back edge."""
        ins = self.instructions[at]
        return ins.op.family in JUMPS and ins.target is not None and ins.target <= ins.address \
            and ins.target in self.index_of and ins.acts is not False

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
            if word in self.instructions[node].writes:
                definitions.add(node)
                if self.instructions[node].runs:
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
        if (start, end) not in self._ways:
            self._ways[start, end] = self._shortest_way(start, end)
        return self._ways[start, end]

    def _shortest_way(self, start: int, end: int) -> list[int] | None:
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
