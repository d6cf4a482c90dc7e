"""Verdicts against the bounds a dump holds, on hand-made facts (each expected verdict follows from
the numbers written here), and the explainer on hostile SASS: never an exception, always bounded."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from crashlab.cubin import Cubin, CubinError
from crashlab.cubin.nvinfo import SharedLayout
from crashlab.explain.bounds import Bounds, Windows, classify, verdict
from crashlab.explain.launch import Launch, ParamSource
from crashlab.explain.slice import MAX_WORDS, Slicer
from crashlab.sass.access import memory_access
from crashlab.sass.flow import FunctionCode
from crashlab.sass.instruction import Instruction
from crashlab.sass.listing import cubin_listings
from crashlab.sass.operands import parse_memory_operand

CUBINS = Path(__file__).resolve().parent.parent / "fixtures" / "cubins"
STATIC = SharedLayout(start=0x400, declared=0x100, section=".nv.shared.k")
SHARED = 0x7E00_0000_0000
LOCAL = 0x7D00_0000_0000


@pytest.mark.parametrize("space, address, expected", [
    ("generic", SHARED + 0x440, ("shared", 0x440)),
    ("generic", LOCAL + 0x20, ("local", 0x20)),
    ("generic", 0x7F00_0000_1000, ("global", 0x7F00_0000_1000)),
    ("shared", 0x440, ("shared", 0x440)),
])
def test_generic_addresses_are_classified_by_the_window_bases(space, address, expected):
    assert classify(space, address, True, Windows(SHARED, LOCAL)) == expected


@pytest.mark.parametrize("offset, size, recorded, kind, words", [
    (0x400, 4, None, "inside", "inside the 0x100 bytes"),
    (0x4FC, 4, None, "inside", "inside"),
    (0x4F8, 8, None, "inside", "inside"),
    (0x500, 4, None, "undetermined", "not ruled out"),  # past the static end, no size recorded
    # a size below the 0x400 reserve cannot count it: bytes after the reserve
    (0x500, 4, 0x100, "out-of-bounds", "sharedMemSize 0x100, read as bytes after"),
    (0x3FC, 4, 0x100, "out-of-bounds", "reserves"),
    (0x600, 4, 0x300, "inside", "read as bytes after the 0x400 reserve"),
    # one of at least the reserve counts it, as the H200's driver writes it (dynamic_shared:
    # 256 bytes recorded as 0x500)
    (0x500, 4, 0x500, "out-of-bounds", "which counts the 0x400 reserve"),
    (0x5FC, 4, 0x600, "inside", "which counts the 0x400 reserve (dynamic shared memory)"),
    (0x600, 4, 0x800, "inside", "dynamic shared memory"),
    (0x1000440, 4, 0x100, "out-of-bounds", "CTA rank 1"),
    (0x402, 4, 0x100, "misaligned", "multiple of the access size"),
])
def test_shared_verdicts(offset, size, recorded, kind, words):
    bounds = Bounds(shared=STATIC, sm90=True, shared_mem_size=recorded)
    found = verdict("shared", offset, size, bounds)
    assert found.kind == kind and words in found.basis


def test_shared_before_sm90_has_no_reserve_or_rank():
    bounds = Bounds(shared=SharedLayout(0, 0x100, ".nv.shared.k"), sm90=False, shared_mem_size=0x100)
    assert verdict("shared", 0x0, 4, bounds).kind == "inside"
    assert verdict("shared", 0x100, 4, bounds).kind == "out-of-bounds"


@pytest.mark.parametrize("address, kind", [(0, "null"), (0x18, "null"), (0x4000, "not-a-pointer"),
                                           (0x7F00_0000_0004, "misaligned")])
def test_pointer_verdicts(address, kind):
    assert verdict("global", address, 8, Bounds()).kind == kind


def test_global_verdicts_never_assert_an_allocation_bound():
    bounds = Bounds(global_segments=[(0x7F00_0000_0000, 0x1000)])
    assert verdict("global", 0x7F00_0000_0FFC, 4, bounds).kind == "inside"
    outside = verdict("global", 0x7F00_0000_1000, 4, bounds)
    assert outside.kind == "undetermined" and "1 global memory segment" in outside.basis
    assert "skip_global_memory" in verdict("global", 0x7F00_0000_1000, 4, Bounds()).basis


def test_local_verdicts_use_the_frame():
    bounds = Bounds(frame_size=0x40, stack_pointer=0xFFFC00)
    assert verdict("local", 0xFFFC38, 8, bounds).kind == "inside"
    assert verdict("local", 0xFFFC40, 4, bounds).kind == "undetermined"
    assert verdict("local", 0xFFFC40, 4, Bounds()).kind == "undetermined"
    kernel = Bounds(frame_size=0x40, stack_pointer=0xFFFC00, outermost=True)
    past = verdict("local", 0xFFFC40, 4, kernel)
    assert past.kind == "out-of-bounds" and "no caller" in past.basis
    assert verdict("local", 0xFFFBF0, 4, kernel).kind == "undetermined"  # below R1


def test_constant_bank_verdicts_use_the_dumps_bank_table():
    bounds = Bounds(constant_banks={3: 0x100})
    assert verdict("constant", 0xFC, 4, bounds, bank=3).kind == "inside"
    past = verdict("constant", 0x100, 4, bounds, bank=3)
    assert past.kind == "out-of-bounds" and "0x100 bytes of constant bank 3" in past.basis
    assert verdict("constant", 0x0, 4, bounds, bank=2).kind == "undetermined"


def test_cubin_facts_of_the_moe_kernel():
    """moe_align.cu declares __shared__ int counts[64]: 0x100 bytes after sm_90's 0x400 reserve."""
    cubin = Cubin((CUBINS / "moe_align.sm_90.cubin").read_bytes())
    assert cubin.shared_layout("_Z20moe_align_block_sizePKiPii", "sm_90") == SharedLayout(
        0x400, 0x100, ".nv.shared._Z20moe_align_block_sizePKiPii")
    assert cubin.shared_layout("k", "sm_90") is None
    with pytest.raises(CubinError):
        Cubin(b"not an elf")


def _ins(address: int, text: str, target: int | None = None) -> Instruction:
    return Instruction(address, text, target=target)


HOSTILE = [
    _ins(0x0, "IMAD R2, R2, R2, R2"),  # reads itself
    _ins(0x10, "@P0 BRA 0x0", target=0x0),
    _ins(0x20, "BRA 0x9990", target=0x9990),  # a target outside the function
    _ins(0x30, "LEA.HI.X R3, R2, R9, R8, 0x2, P0"),
    _ins(0x40, "SHFL.IDX PT, R4, R2, 0x1, 0x1f"),
    _ins(0x50, "MOV R5, c[0x9][R200000+0x8]"),
    _ins(0x60, "IADD3 R6, R4, -R5, ~R3"),
    _ins(0x70, "LDG.E.64 R2, desc[UR4][R2.64+-0x8]"),
    _ins(0x80, "ATOMG.E.ADD.STRONG.GPU PT, R7, [R6.64+UR9999], R5"),
    _ins(0x90, "STG.E desc[UR4][R255.64], R2"),
]


@pytest.mark.parametrize("registers", [None, [], [0xFFFFFFFF] * 8, list(range(300))])
def test_hostile_sass_gives_stops_not_exceptions(registers):
    code = FunctionCode(HOSTILE)
    for at, ins in enumerate(HOSTILE):
        if memory_access(ins.opcode) is None:
            continue
        operand = next(m for m in map(parse_memory_operand, ins.operands) if m)
        slicer = Slicer(code, at, len(HOSTILE) - 1, registers, registers, Launch({}, {}),
                        ParamSource(0x210, b"\x01", ((0, 0, 8, None),)))
        findings = slicer.slice(operand, at)
        assert isinstance(findings.value.text, str)
        assert findings.stops or findings.value.value is not None


def test_random_registers_on_every_memory_instruction_of_a_production_cubin():
    """Bounded: the largest listing, every memory instruction, random registers; each slice
    stays under the word budget and the walk under its visit bound."""
    data = (CUBINS / "production" / "cutlass_mxfp8_grouped_gemm.sm_100.cubin").read_bytes()
    listings = cubin_listings(data)
    assert not isinstance(listings, str)
    rng = random.Random(26)
    for listing in listings.values():
        code = FunctionCode(listing)
        for at, ins in enumerate(listing):
            access = memory_access(ins.opcode)
            operand = next((m for m in map(parse_memory_operand, ins.operands) if m), None)
            if access is None or operand is None:
                continue
            registers = [rng.getrandbits(32) for _ in range(255)]
            slicer = Slicer(code, at, None, registers, registers[:64], Launch({}, {}),
                            ParamSource(None, None, ()))
            slicer.address(operand, at)
            assert slicer.resolved <= MAX_WORDS


SELECT = [
    _ins(0x0, "S2R R0, SR_TID.X"),
    _ins(0x10, "ISETP.GE.AND P0, PT, R0, 0x10, PT"),
    _ins(0x20, "SEL R2, R0, RZ, !P0"),
    _ins(0x30, "LDS R3, [R2+0x400]"),
]


@pytest.mark.parametrize("p0, registers, expected, trust", [
    # threadIdx.x = 5 < 0x10: P0 false, so !P0 holds and SEL takes R0
    ([False], [5, 0, 5], 0x405, "consistent"),
    ([True], [5, 0, 0], 0x400, "consistent"),
    ([False], [5, 0, 0], 0x405, "mismatch"),  # R2 does not fit P0
])
def test_sel_follows_the_dumped_predicate(p0, registers, expected, trust):
    code = FunctionCode(SELECT)
    slicer = Slicer(code, 3, None, registers, [], Launch({"SR_TID.X": 5}, {}),
                    ParamSource(None, None, ()), predicates=p0 + [False] * 6)
    findings = slicer.slice(parse_memory_operand("[R2+0x400]"), 3)
    assert findings.trust == trust
    slicer = Slicer(code, 3, None, None, None, Launch({"SR_TID.X": 5}, {}),
                    ParamSource(None, None, ()), predicates=p0 + [False] * 6)
    value = slicer.address(parse_memory_operand("[R2+0x400]"), 3)
    assert value.value == expected and "!P0 ? threadIdx.x : 0" in value.text


def test_sel_with_a_predicate_written_after_it_is_unknown():
    code = FunctionCode(SELECT[:3] + [_ins(0x30, "ISETP.GE.AND P0, PT, R0, 0x20, PT"),
                                      _ins(0x40, "LDS R3, [R2+0x400]")])
    slicer = Slicer(code, 4, None, None, None, Launch({"SR_TID.X": 5}, {}),
                    ParamSource(None, None, ()), predicates=[False] * 7)
    assert slicer.address(parse_memory_operand("[R2+0x400]"), 4).value is None
