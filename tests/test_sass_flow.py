"""crashlab.sass.flow: the one control-flow graph, with one set of rules for the fault's slice
(crashlab.explain) and the hang's loops (crashlab.waits). Each listing is written here by hand in
nvdisasm's notation; the expected edges follow from the rules, stated in the module's docstring.

Before the graph was shared, the explanation's graph let an ``@PT`` branch fall through and read
``BRA.U !UP0`` as unconditional, and the hang's graph let control run on after a KILL and also
read ``BRA.U !UP0`` as unconditional (so a loop leaving through it had no exit): the tests marked
"was wrong" hold the fixes.
"""

from __future__ import annotations

import pytest

from crashlab.sass.flow import FunctionCode
from crashlab.sass.instruction import Instruction
from crashlab.waits.shape import innermost_loop, polling_loop


def _code(*lines: str, targets: dict[int, int] | None = None) -> FunctionCode:
    """Instructions 16 bytes apart from 0; ``targets`` maps an index to its branch target's."""
    targets = targets or {}
    return FunctionCode([Instruction(16 * k, text, target=16 * targets[k] if k in targets else None)
                         for k, text in enumerate(lines)])


@pytest.mark.parametrize("text, falls_through", [
    ("EXIT", False),
    ("KILL", False),  # the hang's graph ran on past it (was wrong)
    ("RET.REL.NODEC R20 `(_Z1fv)", False),
    ("@P0 EXIT", True),
    ("@!P1 KILL", True),
    ("@PT EXIT", False),
    ("@!PT EXIT", True),  # never runs
    ("BAR.SYNC.DEFER_BLOCKING 0x0", True),
])
def test_exit_kill_and_ret_end_the_flow_where_they_run(text, falls_through):
    code = _code("S2R R0, SR_TID.X", text, "NOP")
    assert (2 in code.successors[1]) is falls_through


@pytest.mark.parametrize("text, edges", [
    ("BRA `(.L_x_0)", [0]),
    ("@P0 BRA `(.L_x_0)", [0, 2]),
    ("@!P0 BRA `(.L_x_0)", [0, 2]),
    ("@PT BRA `(.L_x_0)", [0]),  # the explanation's graph fell through (was wrong)
    ("@!PT BRA `(.L_x_0)", [2]),  # never taken
    ("BRA.U !UP0, `(.L_x_0)", [0, 2]),  # a condition operand: both graphs fell through nowhere (was wrong)
    ("BRA.U UP1, `(.L_x_0)", [0, 2]),
    ("BRA.U !UPT, `(.L_x_0)", [2]),
    ("@P1 BRA P2, `(.L_x_0)", [0, 2]),
    ("BRA.DIV UR4, `(.L_x_0)", [0, 2]),  # taken where the warp has diverged
    ("BSSY B0, `(.L_x_0)", [2]),  # a reconvergence point, not a jump
])
def test_branches_fall_through_only_where_a_predicate_decides(text, edges):
    code = _code("S2R R0, SR_TID.X", text, "NOP", targets={1: 0})
    assert sorted(code.successors[1]) == edges


def test_an_always_true_guard_defines_and_a_never_true_one_does_not():
    """``@PT MOV`` kills the earlier definition (the explanation kept both: was wrong); ``@!PT
    MOV`` never runs, so it defines nothing and the earlier one reaches."""
    code = _code("MOV R2, 0x1", "@PT MOV R2, 0x2", "@!PT MOV R2, 0x3", "@P0 MOV R2, 0x4",
                 "STG.E desc[UR4][R4.64], R2")
    assert code.instructions[2].writes == () and code.instructions[1].writes == ("R2",)
    assert code.reaching_definitions("R2", 4) == ([1, 3], False)


def test_a_branch_condition_is_read_not_written():
    """``BRA.U UP0`` reads UP0: it is no definition of it (the explanation's graph took its first
    predicate operand for a destination, as ISETP's: was wrong)."""
    code = _code("UISETP.NE.AND UP0, UPT, UR4, URZ, UPT", "BRA.U UP0, `(.L_x_0)", "NOP",
                 targets={1: 0})
    assert code.instructions[1].writes == () and code.instructions[0].writes == ("UP0",)
    assert code.instructions[1].conditions[0].name == "UP0"


def test_a_ret_returns_after_each_call_of_the_listing():
    code = _code("CALL.REL.NOINC `(_Z1gv)", "EXIT", "MOV R2, 0x1", "RET.REL.NODEC R20 `(_Z1fv)")
    assert code.successors[3] == [1]
    assert code.successors[1] == []


def test_a_polling_loop_that_leaves_through_a_uniform_condition_is_found():
    """A spin on a flag whose exit is ``BRA.U !UP0`` (the loop's condition a uniform predicate
    operand, not a guard): read as polling once the condition is a condition."""
    code = _code(
        "LDC.64 R2, c[0x0][0x210]",
        "LDG.E.STRONG.SYS R0, desc[UR4][R2.64]",  # the loop head: the load of the flag
        "R2UR UR6, R0",
        "UISETP.NE.AND UP0, UPT, UR6, URZ, UPT",
        "BRA.U !UP0, `(.L_x_1)",  # back to the load while the flag is 0
        "EXIT",
        targets={4: 1})
    assert code.is_back_edge(4)
    loop = innermost_loop(code, 16)
    assert loop is not None and (loop.head, loop.tail) == (16, 64)
    found = polling_loop(code, 16)
    assert not isinstance(found, str), found
    assert found.load.address == 16 and found.condition.address == 48 and found.exit.address == 64


def test_the_instruction_after_a_kill_is_reached_by_branches_only():
    """A KILL ends the flow: the loop below it is entered by the branches that name it."""
    code = _code("@P0 BRA `(.L_x_2)", "KILL", "NOP", "@P1 BRA `(.L_x_2)", "EXIT",
                 targets={0: 2, 3: 2})
    assert code.predecessors[2] == [0, 3]
    loop = innermost_loop(code, 32)
    assert loop is not None and [ins.address for ins in loop.body] == [32, 48]
