"""The SASS operand grammar and the access table, on hand-written operands (values worked out by
hand below) and on every memory instruction real nvdisasm prints for the fixture and production
cubins of every arch."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

import pytest

from crashlab.sass.access import NOT_DECODED, memory_access
from crashlab.sass.listing import find_nvdisasm, parse_listing
from crashlab.sass.operands import (
    ConstantRef,
    Immediate,
    MemoryOperand,
    Predicate,
    Register,
    effective_address,
    parse_memory_operand,
    parse_operand,
)

CUBINS = Path(__file__).resolve().parent.parent / "fixtures" / "cubins"
ALL_CUBINS = sorted(CUBINS.glob("*.cubin")) + sorted((CUBINS / "production").glob("*.cubin"))

REGS = {0: 0x40, 1: 0xFFFFFC00, 2: 0x1000, 3: 0x7F, 5: 0x400}
UREGS = {4: 0x20, 5: 0x1, 6: 0x8}


@pytest.mark.parametrize("text, expected", [
    ("[R0]", 0x40),
    ("[R5+0x10]", 0x410),
    ("[R0+URZ]", 0x40),
    ("[R5+-0x8]", 0x3F8),
    ("[UR4]", 0x20),
    ("[UR4+0x100]", 0x120),
    ("[R0+UR6+0x4]", 0x40 + 0x8 + 0x4),
    # R2.64 is R2 | R3 << 32; beside it UR4 is the pair UR4 | UR5 << 32
    ("[R2.64]", 0x7F_0000_1000),
    ("[R2.64+0x10]", 0x7F_0000_1010),
    ("desc[UR6][R2.64+0x10]", 0x7F_0000_1010),
    ("[R2.64+UR4+0x10]", 0x7F_0000_1000 + 0x1_0000_0020 + 0x10),
    ("[RZ]", 0),
    ("[0x40]", 0x40),
    # a 32-bit window offset wraps at 32 bits
    ("[R1+0x400]", 0),
])
def test_effective_address_sums_the_terms(text, expected):
    operand = parse_memory_operand(text)
    assert operand is not None
    assert effective_address(operand, REGS, UREGS) == expected


def test_effective_address_is_none_where_a_register_is_missing():
    assert effective_address(parse_memory_operand("[R9]"), REGS, UREGS) is None
    # R5.64 needs R6, which the lane's registers lack
    assert effective_address(parse_memory_operand("[R5.64]"), REGS, UREGS) is None
    assert effective_address(parse_memory_operand("[R0+UR40]"), [1, 2], []) is None


def test_registers_read_from_a_list_as_the_dump_keeps_them():
    operand = parse_memory_operand("[R2.64+0x4]")
    assert effective_address(operand, [0, 0, 0xFFFFFFF0, 0x1], []) == 0x1_FFFF_FFF4


def test_memory_operand_fields():
    operand = parse_memory_operand("desc[UR4][R2.64+UR8+0x10]")
    assert operand.descriptor == Register(uniform=True, index=4)
    assert operand.register == Register(uniform=False, index=2, wide=True)
    assert operand.uniform == Register(uniform=True, index=8)
    assert operand.offset == 0x10 and operand.wide
    assert [r.name for r in operand.registers()] == ["R2", "UR8"]
    assert operand.register.words() == ("R2", "R3")
    assert parse_memory_operand("[R0+URZ]").registers() == (Register(uniform=False, index=0),)


@pytest.mark.parametrize("text", ["R2", "[R2+R3]", "[UR4+UR5]", "[R2.X4]x", "c[0x0][0x10]",
                                  "[-R2]", "[R2+(0x10)]", "", "gdesc[UR4]", "tmem[UR4]"])
def test_what_the_grammar_does_not_read_is_none(text):
    assert parse_memory_operand(text) is None


@pytest.mark.parametrize("text, expected", [
    ("R7", Register(uniform=False, index=7)),
    ("R7.reuse", Register(uniform=False, index=7)),
    ("R2.64", Register(uniform=False, index=2, wide=True)),
    ("RZ", Register(uniform=False, index=None)),
    ("URZ", Register(uniform=True, index=None)),
    ("UR12", Register(uniform=True, index=12)),
    ("-R3", Register(uniform=False, index=3, negated=True)),
    ("~R3", Register(uniform=False, index=3, inverted=True)),
    ("|R3|", Register(uniform=False, index=3, absolute=True)),
    ("R4.H1", Register(uniform=False, index=4, modifiers=("H1",))),
    ("P0", Predicate("P0")),
    ("!P3", Predicate("P3", negated=True)),
    ("PT", Predicate("PT")),
    ("UPT", Predicate("UPT")),
    ("0x1f", Immediate(31)),
    ("-0x4", Immediate(-4)),
    ("1.5", Immediate(1.5)),
    ("c[0x0][0x210]", ConstantRef(bank=0, offset=0x210)),
    ("c[0x3][R3+0x8]", ConstantRef(bank=3, offset=8, register=Register(uniform=False, index=3))),
    ("c[0x0][UR4+0x4]", ConstantRef(bank=0, offset=4, register=Register(uniform=True, index=4))),
    ("[R1+0x8]", MemoryOperand("[R1+0x8]", Register(uniform=False, index=1), None, 8)),
])
def test_parse_operand(text, expected):
    assert parse_operand(text) == expected


@pytest.mark.parametrize("text", ["SR_TID.X", "`(.L_x_3)", "gdesc[UR4]", "R2.64+", "c[0x0]"])
def test_unread_operands_are_none(text):
    assert parse_operand(text) is None


@pytest.mark.parametrize("opcode, expected", [
    ("LDG.E", ("load", "global", 4)),
    ("LDG.E.64", ("load", "global", 8)),
    ("LDG.E.128.CONSTANT", ("load", "global", 16)),
    ("LDG.E.U8", ("load", "global", 1)),
    ("LDG.E.S16", ("load", "global", 2)),
    ("STG.E.64", ("store", "global", 8)),
    ("LD.E", ("load", "generic", 4)),
    ("ST.E.U16", ("store", "generic", 2)),
    ("LDS.U8", ("load", "shared", 1)),
    ("STS.128", ("store", "shared", 16)),
    ("LDL.64", ("load", "local", 8)),
    ("STL", ("store", "local", 4)),
    ("ATOMS.POPC.INC.32", ("atomic", "shared", 4)),
    ("ATOMG.E.EXCH.STRONG.GPU", ("atomic", "global", 4)),
    ("ATOM.E.ADD.F64.RN", ("atomic", "generic", 8)),
    ("ATOMG.E.CAS.64.STRONG.GPU", ("atomic", "global", 8)),
    ("RED.E.ADD.STRONG.GPU", ("atomic", "generic", 4)),
    ("REDG.E.ADD.F32.FTZ.RN.STRONG.GPU", ("atomic", "global", 4)),
    ("LDGSTS.E.BYPASS.LTC128B.128", ("load", "global", 16)),
    ("LDSM.16.M88.4", ("load", "shared", 16)),
    ("LDC.64", ("load", "constant", 8)),
    ("CCTL.E.PF2", ("prefetch", "generic", None)),
])
def test_memory_access(opcode, expected):
    access = memory_access(opcode)
    assert (access.kind, access.space, access.bytes) == expected
    assert access.undecoded is None


@pytest.mark.parametrize("opcode", ["UTMALDG.2D.MULTICAST", "UTMASTG.2D", "UBLKCP.S.G", "LDTM.16",
                                    "STTM.x4", "SULD.P.2D", "UTMAPF.L2.3D"])
def test_descriptor_ops_are_not_decoded(opcode):
    access = memory_access(opcode)
    assert access.undecoded == NOT_DECODED and access.space == "unknown"


@pytest.mark.parametrize("opcode", ["IMAD.WIDE", "FFMA", "BAR.SYNC", "CCTL.IVALL", "LEA.HI.X",
                                    "MEMBAR.ALL.CTA", "S2R", "LOP3.LUT", ""])
def test_other_opcodes_touch_no_memory(opcode):
    assert memory_access(opcode) is None


@cache
def _listing(cubin: Path):
    tool, why = find_nvdisasm()
    if tool is None:
        pytest.skip(why)
    done = subprocess.run([tool, "-c", str(cubin)], capture_output=True, text=True, check=True)
    return parse_listing(done.stdout)


#: families whose first memory operand is the address a lane names
_LANE_ADDRESSED = ("LD", "ST", "LDG", "STG", "LDS", "STS", "LDL", "STL", "ATOM", "ATOMG",
                   "ATOMS", "RED", "REDG", "LDGSTS", "LDSM", "STSM", "SYNCS")


@pytest.mark.parametrize("cubin", ALL_CUBINS, ids=lambda p: p.name)
def test_every_memory_operand_of_the_real_cubins_decodes(cubin):
    """Each lane-addressed load, store or atomic nvdisasm prints has a memory operand the grammar
    reads, every register of which it names appears in the instruction's own text."""
    seen = 0
    for ins in _listing(cubin):
        family = ins.opcode.split(".")[0]
        if family not in _LANE_ADDRESSED:
            continue
        access = memory_access(ins.opcode)
        assert access is not None, ins.text
        addressed = [op for op in ins.operands if op.startswith(("[", "desc["))]
        assert addressed, ins.text
        operand = parse_memory_operand(addressed[0])
        assert operand is not None, ins.text
        assert all(r.name in ins.text for r in operand.registers()), ins.text
        seen += 1
    assert seen > 0
