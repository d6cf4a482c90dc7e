"""The faulting lane's registers as the dump holds them, read as of an instruction of the slice.

The driver takes a lane's registers where its PC stands: at the faulting instruction or a few
instructions past it, the faulting one issued (on the H200, a faulting ``LDG.E R0`` left R0
reading 0). The lane is taken to have run the shortest way from the faulting instruction to its
PC, around a loop's back edge where that way crosses one (a warp stops within a few
instructions of its exception). So:

- a word written on that way, the faulting instruction's own destination included, is not read
  as it was at the fault;
- where no way in the function leads from the fault to the lane's PC, the registers are read as
  of the fault, but a value recomputed from the code is not compared with them (``sound`` is
  False), and a stop says so;
- a word read at an earlier instruction is the dumped word where nothing on the way from there
  to the fault writes it, or, where what writes it runs straight after that instruction, once
  and in order, the dumped word less those steps (the slicer undoes them); where a loop or a
  branch may write it, the dump does not give its value there, and the reason names the writer
  (the slicer's stop where it skips a comparison for it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from ..sass.flow import FunctionCode
from ..sass.semantics import MASK32


@dataclass
class DumpedRegisters:
    code: FunctionCode
    fault_at: int
    #: index of the lane's PC in the function, None where the dump does not place it there
    dump_at: int | None
    registers: list[int] | None
    uniform_registers: list[int] | None
    predicates: list[bool] | None
    uniform_predicates: list[bool] | None
    #: where the reasons a dumped word is not read go (the slicer's stops)
    note: Callable[[str], None]
    _ways: dict[int, set[int] | None] = field(default_factory=dict)

    @cached_property
    def _ran(self) -> list[int] | None:
        """The instructions on the shortest way from the faulting one (included) to the lane's
        PC (none where the lane stands at the fault or the dump does not place it); None, said
        once, where no way in the function leads there."""
        if self.dump_at is None or self.dump_at == self.fault_at:
            return []
        way = self.code.shortest_way(self.fault_at, self.dump_at)
        if way is None:
            self.note(f"the lane's PC (+{self._address(self.dump_at):#x}) is not reached from "
                      "the faulting instruction in the function's control flow: its registers "
                      "are read as of the fault, and no value recomputed from the code is "
                      "compared with them")
        return way

    @property
    def sound(self) -> bool:
        """Whether the dumped words are the lane's values at the fault, less those it wrote on
        its way to its PC: comparing a value recomputed from the code with them can then show
        that the dump does not fit the code."""
        return self._ran is not None

    def overwritten(self, name: str, said: bool = True) -> bool:
        """Whether the lane wrote ``name`` at the faulting instruction or after it, before its
        PC, on the shortest way there (the dump's value is then not the one at the fault); a
        stop says so where ``said``."""
        writer = next((at for at in self._ran or () if name in self.code.instructions[at].writes), None)
        if writer is None or not said:
            return writer is not None
        where = "the faulting instruction" if writer == self.fault_at else \
            f"{self.code.instructions[writer].opcode} at +{self._address(writer):#x}"
        self.note(f"{name} was overwritten by {where}, before the lane's PC "
                  f"(+{self._address(self.dump_at or 0):#x}) where the dump took the registers: "
                  "its dumped value is not the one at the fault")
        return True

    def word(self, name: str, said: bool = True) -> int | None:
        """A register word as of the faulting instruction, None where the dump lacks it or the
        lane wrote it since (a stop says so where ``said``)."""
        uniform = name.startswith("UR")
        source = self.uniform_registers if uniform else self.registers
        index = int(name[2:] if uniform else name[1:])
        if source is None or index >= len(source) or self.overwritten(name, said):
            return None
        return source[index] & MASK32

    def writes_before_fault(self, name: str, at: int) -> list[int] | str:
        """The instructions that write ``name`` from ``at`` (before it runs) to the faulting
        instruction, in the order they ran, each once; where a loop or a branch may run one of
        them any number of times or none, why the dumped word is not its value at ``at``."""
        if at == self.fault_at:
            return []
        straight = self.code.run_end(at, self.fault_at)
        if straight == self.fault_at:
            return [j for j in range(at, self.fault_at) if name in self.code.instructions[j].writes]
        if at not in self._ways:
            self._ways[at] = self.code.on_paths(at, self.fault_at)
        ways = self._ways[at]
        if ways is None:
            return "no path from there to the fault is known"
        writers = sorted(j for j in ways if name in self.code.instructions[j].writes)
        elsewhere = [j for j in writers if not at <= j <= straight]
        if not elsewhere:
            return writers  # none, or each in the straight run from ``at``: once, in order
        writer = self.code.instructions[elsewhere[0]]
        return (f"{writer.opcode} at +{writer.address:#x} may write it on the way to the fault "
                "(a loop or a branch), so its dumped value need not be its value there")

    def predicate(self, name: str, at: int) -> bool | None:
        """A predicate's value before ``at``, where nothing on the way to the lane's PC may
        write it."""
        if name in ("PT", "UPT"):
            return True
        uniform = name.startswith("U")
        source = self.uniform_predicates if uniform else self.predicates
        index = int(name[2:] if uniform else name[1:])
        if source is None or index >= len(source) or \
                self.writes_before_fault(name, at) != [] or self.overwritten(name):
            return None
        return bool(source[index])

    def _address(self, at: int) -> int:
        instructions = self.code.instructions
        return instructions[at].address if 0 <= at < len(instructions) else -1
