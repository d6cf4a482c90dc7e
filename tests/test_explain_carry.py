"""64-bit carry chains and the small kernels' idioms, on real nvcc/ptxas output: the sm_90
misaligned store builds its address as ``LEA R2, P0, R2, UR4, 0x2`` + ``IADD3.X R3, RZ, UR5, RZ,
P0, !PT``; the expected addresses come from misaligned.cu's arithmetic (``bytes + 1 + 4 *
threadIdx.x``), not from the slicer. The parameter bytes are planted (synthetic)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from crashlab.cubin import Cubin
from crashlab.cubin.nvinfo import kernel_param_layout
from crashlab.explain.carry import CarryChain, carry_chain, constant_move, division_idiom
from crashlab.explain.launch import Launch, ParamSource
from crashlab.explain.slice import Slicer
from crashlab.explain.survey import survey
from crashlab.sass.flow import FunctionCode
from crashlab.sass.listing import cubin_listings
from crashlab.sass.operands import parse_memory_operand

CUBINS = Path(__file__).resolve().parent.parent / "fixtures" / "cubins"
BYTES = 0x7F3A_C000_0F00  # a planted `char *bytes`, its high word not zero


@pytest.fixture(scope="module")
def misaligned():
    data = (CUBINS / "misaligned.sm_90.cubin").read_bytes()
    (section, listing), = cubin_listings(data).items()
    layout, _ = kernel_param_layout(Cubin(data), section.removeprefix(".text."))
    return FunctionCode(listing), listing, layout


def _store_address(misaligned, tid: int, base: int = BYTES):
    code, listing, layout = misaligned
    at = next(k for k, ins in enumerate(listing) if ins.opcode.startswith("STG"))
    planted = base.to_bytes(8, "little") + (7).to_bytes(4, "little")
    params = ParamSource(layout.cbank_offset, planted,
                         tuple((p.ordinal, p.offset, p.size, None) for p in layout.params))
    slicer = Slicer(code, at, None, None, None, Launch({"SR_TID.X": tid}, {}), params)
    operand = next(m for m in map(parse_memory_operand, listing[at].operands) if m is not None)
    return slicer.slice(operand, at)


def test_the_sm90_store_is_a_lea_and_iadd3x_chain(misaligned):
    code, listing, _ = misaligned
    high = next(k for k, ins in enumerate(listing) if ins.opcode == "IADD3.X")
    chain = carry_chain(code, high)
    assert isinstance(chain, CarryChain), chain
    assert listing[chain.low_at].opcode == "LEA"


@pytest.mark.parametrize("tid", [0, 5, 31, 1023])
def test_the_carry_chain_gives_the_source_address(misaligned, tid):
    findings = _store_address(misaligned, tid)
    address = findings.value
    assert address.value == BYTES + 1 + 4 * tid  # misaligned.cu: bytes + 1 + 4 * threadIdx.x
    assert not findings.stops and findings.trust == "consistent"
    assert "arg0" in address.text and "threadIdx.x" in address.text


def test_a_carry_out_of_the_low_word_reaches_the_high_word(misaligned):
    base = BYTES | 0xFFFF_FF00  # low word 0xffffff00: 1 + 4 * 1023 carries into the high word
    assert (base & 0xFFFF_FFFF) + 1 + 4 * 1023 >= 1 << 32
    address = _store_address(misaligned, 1023, base).value
    assert address.value == base + 1 + 4 * 1023


def test_hfma2_moves_its_halves():
    # IEEE binary16: 1.875 is 0x3f80 (so the pair 1.875, 0 is 1.0f's bits), 2.0 is 0x4000
    assert constant_move("HFMA2.MMA", ("-RZ", "RZ", "1.875", "0")) == 0x3F80_0000
    assert constant_move("HFMA2", ("-RZ", "RZ", "0", "2")) == 0x4000
    expected = struct.unpack("<H", struct.pack("<e", 3.5762786865234375e-07))[0]
    assert constant_move("HFMA2.MMA", ("-RZ", "RZ", "0", "3.5762786865234375e-07")) == expected
    assert constant_move("HFMA2.MMA", ("R2", "RZ", "0", "2")) is None  # a real product
    assert constant_move("HFMA2.MMA", ("-RZ", "RZ", "0", "0.1")) is None  # not a half


def test_the_division_idiom_is_named_on_the_small_kernels():
    assert division_idiom("I2F.U32.RP") and division_idiom("MUFU.RCP")
    assert division_idiom("IADD3") is None
    found = survey("merge_attn_states.sm_90a.cubin",
                   (CUBINS / "production" / "merge_attn_states.sm_90a.cubin").read_bytes())
    assert any("unsigned division by a variable" in reason for reason in found.stops)
    assert not any("does not model" in reason for reason in found.stops)


@pytest.mark.parametrize("name", ["ngram_ids.sm_120.cubin", "cutlass_mxfp8_grouped_gemm.sm_100.cubin"])
def test_the_production_chains_are_read_or_named(name):
    """sm_120's IADD.64 and cutlass's IMAD.X / LEA.HI.X.SX32 chains: each is evaluated or its
    stop names why (a 128-bit product), never an unmodelled op."""
    found = survey(name, (CUBINS / "production" / name).read_bytes())
    unread = [r for r in found.stops if r == "unmodelled op" or "chain not modelled" in r]
    assert not unread, unread


@pytest.mark.parametrize("a,selector,b,expected", [
    (0x44332211, 0x3210, 0x88776655, 0x44332211),   # identity
    (0x44332211, 0x7654, 0x88776655, 0x88776655),   # the other word
    (0x44332211, 0x0123, 0x88776655, 0x11223344),   # bytes reversed
    (0x000000F0, 0x8880, 0, 0xFFFFFFF0),             # byte 0's sign replicated into bytes 1-3
    (0x00000070, 0x8880, 0, 0x00000070),             # a positive byte's sign is 0
])
def test_prmt_permutes_bytes_as_ptx_documents(a, selector, b, expected):
    """Worked examples of PTX's prmt.b32 (default mode) table: the pool is b:a, byte 0 lowest."""
    from crashlab.sass.semantics import Term, apply, operation

    assert apply(operation("PRMT"), [Term(a, "a"), Term(selector, "s"), Term(b, "b")]).value == expected
