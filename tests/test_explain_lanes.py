"""Whose access faulted, on the dumps a real H200 wrote (fixtures/gpu/PROVENANCE.md).

The driver marks a warp exception on all 32 lanes and does not say which lane's access broke the
bound, so crashlab judges every marked lane on its own registers. The truth here comes from each
program's source (fixtures/kernels/*.cu, fixtures/gpu/torch_kernels.py) and what it printed, never
from crashlab's output: which lanes' accesses lie past the bound the launch gave, which operand of
a copy reads the planted pointer.
"""

from __future__ import annotations

import json
import re
from functools import cache

import pytest

import crashlab
from crashlab.explain.lanes import Reading, faulting_side
from crashlab.notation import number_ranges
from crashlab.report.model import Verdict
from crashlab.sass.access import memory_sides
from tests.conftest import ROOT, run_cli

H200 = ROOT / "fixtures" / "gpu" / "h200"
KERNELS = ROOT / "fixtures" / "kernels"


@cache
def _report(case: str):
    """The report of the case's dump that holds a fault (tp_ranks has one dump per rank)."""
    reports = [crashlab.inspect(dump) for dump in sorted((H200 / case).glob("core.*.nvcudmp"))]
    return next(report for report in reports if report.faults)


def _fault(case: str):
    return _report(case).faults[0]


def _number(source: str, pattern: str) -> int:
    found = re.search(pattern, source)
    assert found, pattern
    return int(found.group(1), 0)


def test_dynamic_shared_names_lanes_1_to_31_past_the_launchs_shared_memory():
    """dynamic_shared.cu: tile[threadIdx.x * stride] with stride 4096, launched with
    threads * sizeof(int) bytes of dynamic shared memory: only thread 0's store lies inside."""
    source = (KERNELS / "dynamic_shared.cu").read_text()
    threads = _number(source, r"const int threads = (\d+);")
    stride = _number(source, r"<<<1, threads, threads \* sizeof\(int\)>>>\(out, (\d+)\)")
    dynamic = threads * 4
    outside = [lane for lane in range(32) if 4 * lane * stride + 4 > dynamic]
    fault = _fault("dynamic_shared.explain")
    explanation = fault.explanation
    assert fault.lane == 0 and explanation.focus_lane == 0  # cuda-gdb's focus is kept
    head, *rest = explanation.lanes
    assert head.kind == "out-of-bounds" and head.lanes == outside == list(range(1, 32))
    assert [(g.kind, g.lanes) for g in rest] == [("inside", [0])]
    culprit = explanation.culprit_lane
    assert (culprit.lane, culprit.thread_idx) == (1, (1, 0, 0))
    reserve = 0x400  # sm_90's shared reserve: the first byte of the block's window
    assert int(explanation.address, 16) == reserve + 4 * 1 * stride
    assert explanation.verdict.kind == "out-of-bounds" and explanation.breaks_bound
    # past the bound: each store's end past the launch's bytes (sharedMemSize counts the reserve)
    truth = [4 * lane * stride + 4 - dynamic for lane in outside]
    assert head.past_bound == [min(truth), max(truth)]
    assert culprit.registers["R7"] == 1  # the stored value, threadIdx.x, in the culprit's own file


@pytest.mark.parametrize("case, kind", [("misaligned_argument.explain", "misaligned"),
                                        ("misaligned.explain", "misaligned"),
                                        ("null_argument.explain", "null"),
                                        ("local_overflow.explain", "out-of-bounds"),
                                        ("local_overflow.sglang", "out-of-bounds")])
def test_where_every_lane_breaks_the_bound_every_lane_is_named(case, kind):
    """The planted pointer (offset by 2, null) or index (0x40404040 past a 16-slot frame) is the
    same for every thread, so all 32 marked lanes break the bound the same way."""
    explanation = _fault(case).explanation
    [group] = explanation.lanes
    assert (group.kind, group.lanes, group.count) == (kind, list(range(32)), 32)
    assert explanation.verdict.kind == kind and explanation.culprit_lane.lane == 0


@pytest.mark.parametrize("case", ["cluster.explain", "device_function.explain", "tp_ranks.explain",
                                  "triton_oob.explain"])
def test_no_lane_is_blamed_where_the_dump_holds_no_bound_the_access_broke(case):
    """These wrote global memory through a pointer far past its allocation; the dumps were taken
    with skip_global_memory, so no allocation bound is in them: crashlab says so plainly."""
    assert "skip_global_memory" in _report(case).dump.generation_flags
    fault = _fault(case)
    explanation = fault.explanation
    assert not explanation.breaks_bound
    assert {g.kind for g in explanation.lanes} == {"undetermined"}
    assert sum(g.count for g in explanation.lanes) == explanation.lanes_judged == fault.faulting_lanes
    assert explanation.culprit_lane.lane == fault.lane
    assert explanation.story[0].startswith("No marked lane's access breaks a bound the dump holds")


def test_the_flash_kernels_global_read_is_the_side_that_faulted():
    """torch_kernels.py hands the flash kernel a key tensor 1 TiB past the query's allocation
    (it printed both addresses): of LDGSTS's two operands, the global read through the key's
    pointer faulted, not the shared store."""
    printed = (H200 / "torch_flash_oob.sglang" / "stdout.txt").read_text()
    key, query = (int(v, 16) for v in re.search(r"k at (0x[0-9a-f]+) q at (0x[0-9a-f]+)",
                                                  printed).groups())
    assert key - query == 1 << 40
    key_bytes = 1 * 8 * 256 * 64 * 2  # shape (1, 8, 256, 64) float16
    explanation = _fault("torch_flash_oob.sglang").explanation
    assert explanation.instruction.startswith("LDGSTS")
    assert explanation.operand == "desc[UR16][R20.64]" and explanation.space == "global"
    assert key <= int(explanation.address, 16) < key + key_bytes
    [other] = explanation.other_operands
    assert (other.operand, other.space, other.access) == ("[R216+0x4000]", "shared", "store")


def test_the_lanes_are_in_every_view_and_the_schema():
    dump = next((H200 / "dynamic_shared.explain").glob("core.*.nvcudmp"))
    terminal = run_cli("inspect", dump).stdout.decode()
    assert "lanes 1-31 out-of-bounds" in terminal and "registers of lane 1 (the culprit" in terminal
    markdown = run_cli("inspect", "--markdown", dump).stdout.decode()
    assert "lanes 1-31 out-of-bounds" in markdown and "culprit: lane 1" in markdown
    report = json.loads(run_cli("inspect", "--json", dump).stdout)
    explained = report["faults"][0]["explanation"]
    assert explained["culprit_lane"]["lane"] == 1
    assert explained["lanes"][0]["first"] == {**explained["lanes"][0]["first"], "lane": 1}
    schema = json.loads(run_cli("schema").stdout)
    text = json.dumps(schema)
    assert "culprit_lane" in text and "LaneVerdict" in text


def _cubin_instruction(cubin: str, opcode: str) -> str:
    """An instruction of a real nvcc-built cubin, as nvdisasm prints it."""
    from crashlab.sass.listing import find_nvdisasm

    tool, _ = find_nvdisasm()
    if tool is None:
        pytest.skip("nvdisasm (the nvidia-cuda-nvdisasm wheel, extra 'sass') is not installed")
    import subprocess

    listing = subprocess.run([tool, "-c", str(ROOT / "fixtures" / "cubins" / cubin)],
                             capture_output=True, text=True, check=True).stdout
    found = re.search(rf"/\*[0-9a-f]+\*/\s+({re.escape(opcode)}\S* [^;]*);", listing)
    assert found, opcode
    return found.group(1)


def _verdict(kind: str) -> Verdict:
    return Verdict(kind=kind, basis="")


@pytest.mark.parametrize("opcode, spaces, kinds", [
    # cp.async (async_copy.cu copy_async_rows): shared destination, then the global source
    ("LDGSTS", ("shared", "global"), ("store", "load")),
    # cp.async.bulk to shared (copy_bulk_tile), and from shared to global (store_bulk_tile)
    ("UBLKCP.S.G", ("shared", "global"), ("store", "load")),
    ("UBLKCP.G.S", ("global", "shared"), ("store", "load")),
    # cp.async.bulk.tensor (copy_tma_tile): the shared tile, then the tensor map's address
    ("UTMALDG", ("shared", "unknown"), ("store", "load")),
])
def test_a_copys_two_operands_are_read_as_its_source_says(opcode, spaces, kinds):
    """The SASS of fixtures/kernels/async_copy.cu (sm_90): which operand is which is what the PTX
    in the source says (destination first), checked on the instruction nvcc wrote."""
    text = _cubin_instruction("async_copy.sm_90.cubin", opcode)
    sides = memory_sides(text.split()[0])
    assert tuple(s.access.space for s in sides) == spaces
    assert tuple(s.access.kind for s in sides) == kinds
    assert text.count("[") - text.count("desc[") == len(sides)


@pytest.mark.parametrize("exception, shared, global_, chosen", [
    ("CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS", "inside", "undetermined", "global"),
    ("CUDBG_EXCEPTION_WARP_OUT_OF_RANGE_ADDRESS", "out-of-bounds", "undetermined", "shared"),
    ("CUDBG_EXCEPTION_WARP_MISALIGNED_ADDRESS", "inside", "misaligned", "global"),
    ("CUDBG_EXCEPTION_WARP_MISALIGNED_ADDRESS", "misaligned", "inside", "shared"),
])
def test_the_exception_chooses_the_side_that_faulted(exception, shared, global_, chosen):
    readings = [Reading(0, "[R7]", "store", "shared", 0x400, 0x400, "dump", _verdict(shared)),
                Reading(1, "desc[UR4][R2.64]", "load", "global", 0x7F00_0000_0000,
                        0x7F00_0000_0000, "dump", _verdict(global_))]
    assert faulting_side(readings, exception).space == chosen


def test_number_ranges_read_as_runs():
    assert number_ranges([1, 2, 3, 31, 5, 4, 0]) == "0-5, 31"
    assert number_ranges([7]) == "7"
