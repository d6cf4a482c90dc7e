"""The fault explained on the MoE kernel (fixtures/kernels/moe_align.cu, built for sm_90):
a SYNTHETIC builder dump whose faulting lane's registers are computed here, by hand, from chosen
roots and the kernel's SASS, must be explained back to those roots; the bundled example's pattern
registers must give trust "mismatch".

The SASS of moe_align_block_size (nvdisasm 13.5 on fixtures/cubins/moe_align.sm_90.cubin):
  0x0010 S2R R7, SR_TID.X              0x01a0 LDC.64 R4, c[0x0][0x210]      (param 0)
  0x0020 ULDC UR4, c[0x0][0x220]       0x01b0 LEA R11, R3, R0, 0x18        (rank<<24 + 0x400)
  0x0160 S2R R3, SR_CgaCtaId           0x01c0 IMAD.WIDE R2, R9, 0x4, R4    (&topk_ids[i])
  0x0170 LDC R6, c[0x0][RZ]            0x01d0 LDG.E R2, desc[UR6][R2.64]   (e = topk_ids[i])
  0x0180 MOV R0, 0x400                 0x01e0 IMAD.IADD R9, R6, 0x1, R9    (i += blockDim.x)
  0x0190 IMAD.MOV.U32 R9, RZ, RZ, R7   0x0200 IMAD R0, R2, 0x4, R11
                                       0x0210 ATOMS.POPC.INC.32 RZ, [R0+URZ]   <- fault
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from crashlab.api import inspect
from tests import coredump_builder, scenarios
from tests.conftest import run_cli

EXAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
#: the chosen roots
TOPK_IDS = 0x7F12_3400_0000  # param 0, int const*
COUNTS = 0x7F12_3500_0000  # param 1, int*
NUMEL = 2048  # param 2, int
BLOCK_DIM = 256  # the scenario's grid: block_dim (256, 1, 1)
THREAD = 32  # lane 0 of the scenario's faulting warp 1
ITERATION = 1
#: from the .cu file: __shared__ int counts[kNumExperts = 64]; sm_90 reserves 0x400 before it
DECLARED_SHARED = 64 * 4
RESERVE = 0x400


def _registers(expert_id: int) -> tuple[list[int], list[int], bytes, int]:
    """The lane's registers at the ATOMS, worked out from the SASS above."""
    i = THREAD + ITERATION * BLOCK_DIM
    element_address = TOPK_IDS + i * 4
    r = [0] * 32
    r[7] = THREAD
    r[6] = BLOCK_DIM
    r[4], r[5] = TOPK_IDS & 0xFFFFFFFF, TOPK_IDS >> 32
    r[11] = (0 << 24) + RESERVE
    r[9] = i + BLOCK_DIM  # stepped once after the load
    r[2] = expert_id & 0xFFFFFFFF  # the LDG overwrote the pair's low word
    r[3] = element_address >> 32
    r[0] = (expert_id * 4 + r[11]) & 0xFFFFFFFF
    r[1] = 0xFFFDC0  # the stack pointer (LDC R1, c[0x0][0x28]); no part of the address
    uniform = [NUMEL, 0, 0x1000, 0x2000]  # UR4 = numel; UR6:UR7 the access descriptor
    uniform += [0] * (64 - len(uniform))
    params = struct.pack("<QQi", TOPK_IDS, COUNTS, NUMEL)
    return r, uniform, params, i


def _dump(folder: Path, registers, uniform, params, lane_pc_after: int = 0x20) -> Path:
    scenario = scenarios.moe_align(registers, uniform, params, shared_mem_size=DECLARED_SHARED,
                                   lane_pc_after=lane_pc_after)
    return coredump_builder.write(scenario.spec, folder / "core.nvcudmp").path


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    """Explanations of two builder dumps: a garbage id past the array and -1 before it."""
    found = {}
    for expert_id in (1999, -1):
        registers, uniform, params, i = _registers(expert_id)
        path = _dump(tmp_path_factory.mktemp("moe"), registers, uniform, params)
        found[expert_id] = (inspect(path).faults[0], i, path)
    return found


def test_the_moe_story_reads_from_a_consistent_dump(explained):
    fault, i, _ = explained[1999]
    why = fault.explanation
    assert why.trust == "consistent", why.story
    assert why.instruction.startswith("ATOMS.POPC.INC.32") and why.access == "atomic"
    assert why.space == "shared" and why.access_bytes == 4
    shared_offset = RESERVE + 1999 * 4
    assert why.address == hex(shared_offset) and why.address_provenance == "dump"
    assert why.verdict.kind == "out-of-bounds"
    assert f"{DECLARED_SHARED:#x} bytes" in why.verdict.basis
    assert ".nv.shared._Z20moe_align_block_sizePKiPii" in why.verdict.basis
    load = next(root for root in why.roots if root.kind == "load")
    assert load.name.startswith("LDG") and "+0x1d0" in load.name
    assert f"= {i} of param 0" in load.detail
    assert load.value == hex(1999)
    param = next(root for root in why.roots if root.kind == "param")
    assert param.param_ordinal == 0 and param.value == hex(TOPK_IDS)
    assert param.provenance == "parameter buffer"
    assert {root.name for root in why.roots if root.kind == "special"} >= {"threadIdx.x",
                                                                           "blockDim.x"}
    assert why.formula == "address = arg0[i]*4 + (ctaRank << 24) + 0x400"
    assert f"param 2 (int) = {NUMEL}" in why.compare_with
    assert not any("param 0" in c or "param 1" in c for c in why.compare_with)
    assert any(f"= {i}: a loop variable" in line for line in why.story)
    assert any(line.startswith("LDG.E at +0x1d0 loaded 1999 (0x7cf)") and f"element i = {i} of "
               "param 0" in line for line in why.story)
    # LEA R11, R3, R0, 0x18 (+0x1b0) reads R3 and R0 before the loop, whose IMAD.WIDE R2 (+0x1c0)
    # and IMAD R0 (+0x200) write them again: their dumped values are not compared there
    loop_written = [("R3", "IMAD.WIDE at +0x1c0"), ("R0", "IMAD at +0x200")]
    assert len(why.stops) == len(loop_written), why.stops
    for register, writer in loop_written:
        assert any(stop.startswith(f"{register} at +0x1b0 is not compared with the dump: {writer}")
                   for stop in why.stops), why.stops


def test_a_negative_id_lands_in_the_reserve(explained):
    why = explained[-1][0].explanation
    assert why.trust == "consistent"
    assert why.verdict.kind == "out-of-bounds"
    assert f"{RESERVE - 4:#x}" in why.verdict.basis and "reserves" in why.verdict.basis


def test_the_json_report_carries_the_explanation(explained):
    path = explained[1999][2]
    done = run_cli("inspect", path, "--json")
    assert done.returncode == 0, done.stderr
    why = json.loads(done.stdout)["faults"][0]["explanation"]
    assert why["verdict"]["kind"] == "out-of-bounds" and why["trust"] == "consistent"


def test_the_pattern_registers_of_the_bundled_example_give_mismatch():
    why = inspect(EXAMPLE).faults[0].explanation
    assert why.trust == "mismatch"
    assert any("Nothing here is a cause" in line for line in why.story)
    # the dumped address itself is still shown, from the dump, with its space
    assert why.address_provenance == "dump" and why.space == "shared"


@pytest.mark.parametrize("register, wrong", [(6, 128), (3, 0x7F13), (0, 0x2344)])
def test_one_register_that_does_not_fit_the_code_gives_mismatch(tmp_path, register, wrong):
    """blockDim.x in R6, the high word of &topk_ids[i] in R3, the address itself in R0: each is
    recomputed from the roots and checked against the dump."""
    registers, uniform, params, _ = _registers(1999)
    registers[register] = wrong
    why = inspect(_dump(tmp_path, registers, uniform, params)).faults[0].explanation
    assert why.trust == "mismatch"
    assert any(f"R{register} at" in line for line in why.story)


def test_a_lane_pc_the_fault_does_not_lead_to_claims_no_mismatch(tmp_path):
    """The lane's PC at +0x110, in the zeroing loop before the fault, which no path from the
    ATOMS at +0x210 reaches: its registers are read as of the fault, but a register that does
    not fit the code (blockDim.x in R6 as 128) is a stop, not a mismatch."""
    registers, uniform, params, _ = _registers(1999)
    registers[6] = 128
    path = _dump(tmp_path, registers, uniform, params, lane_pc_after=0x110 - 0x210)
    why = inspect(path).faults[0].explanation
    assert why.trust == "consistent", why.story
    assert any("(+0x110) is not reached from the faulting instruction" in stop
               for stop in why.stops), why.stops
    assert any(stop.startswith("R6 at ") and "is 0x80 in the dump but 0x100 recomputed" in stop
               for stop in why.stops), why.stops


def test_no_explain_leaves_the_explanation_out():
    done = run_cli("inspect", EXAMPLE, "--json", "--no-explain")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["faults"][0]["explanation"] is None
    assert inspect(EXAMPLE, explain=False).faults[0].explanation is None


@pytest.mark.parametrize("explain", [True, False])
def test_report_inputs_follow_no_explain(explain, monkeypatch, tmp_path):
    """crashlab report's triage of a coredump given on its command line (ReportOptions.explain,
    --no-explain); no cuda-gdb here, so the debugger part says why and costs nothing."""
    from crashlab.issue.inputs import read

    monkeypatch.setenv("CRASHLAB_CUDA_GDB", str(tmp_path / "no-cuda-gdb"))
    [core] = read([str(EXAMPLE)], explain=explain).cores
    assert (core.report.faults[0].explanation is not None) is explain


def test_registers_written_after_the_fault_are_not_read_from_the_dump(tmp_path):
    """The lane's PC at +0x290, past ``LDC.64 R4, c[0x0][0x218]`` (+0x280): R4:R5 then hold
    param 1, not param 0. The slice must not take them from the dump (no false mismatch), must
    say so, and still recompute &topk_ids[i] from the parameter buffer."""
    registers, uniform, params, i = _registers(1999)
    registers[4], registers[5] = COUNTS & 0xFFFFFFFF, COUNTS >> 32
    why = inspect(_dump(tmp_path, registers, uniform, params, lane_pc_after=0x80)).faults[0].explanation
    assert why.trust == "consistent", why.story
    assert any(stop.startswith("R4 was overwritten") for stop in why.stops)
    load = next(root for root in why.roots if root.kind == "load")
    assert f"= {i} of param 0" in load.detail
    assert why.verdict.kind == "out-of-bounds"
