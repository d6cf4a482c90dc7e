"""Every real H200 dump's explanation (docs/reference/real-dumps.md) against the truth of the
program that faulted, for every marked lane.

The truth is written here from each source (fixtures/kernels/*.cu, fixtures/gpu/*.cu and *.py:
what the kernel computes for thread t, the values main() passes, what the planting script
printed), never from crashlab's output. Argument values are read from the parameter buffer the
driver wrote; how they combine into each lane's address is the source's. Where the dump holds no
bound the access broke (a global pointer far past its allocation, taken with skip_global_memory)
the truth is that no lane may be blamed.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import cache

import pytest

import crashlab
from tests.conftest import ROOT

H200 = ROOT / "fixtures" / "gpu" / "h200"
SHARED_RESERVE = 0x400  # sm_90: a block's shared window starts past the system's 1 KiB


@dataclass(frozen=True)
class Truth:
    exception: str
    space: str
    #: the marked lanes whose own access breaks a bound the dump holds, and how; None: no lane
    culprits: tuple[range, str] | None
    #: lane's thread index -> the address its access named, from the source, given the arguments
    address: object = None
    #: parameter ordinals the address is computed from
    params: tuple[int, ...] = ()


def _arg(fault, ordinal: int) -> int:
    return next(p.value for p in fault.params.values if p.ordinal == ordinal)


def _printed(case: str, pattern: str) -> int:
    return int(re.search(pattern, (H200 / case / "stdout.txt").read_text()).group(1), 16)


TRUTH = {
    # null_argument.cu: out[t] = weights[t] * 2 with weights == nullptr
    "null_argument.explain": Truth("Warp Illegal Address", "global", (range(32), "null"),
                                   lambda f, t: 4 * t, (0,)),
    # misaligned.cu: *(int *)(bytes + 1 + 4t) = value
    "misaligned.explain": Truth("Warp Misaligned Address", "global", (range(32), "misaligned"),
                                lambda f, t: _arg(f, 0) + 1 + 4 * t, (0,)),
    # misaligned_argument.cu: counts[t] = value, counts = a byte buffer + 2
    "misaligned_argument.explain": Truth("Warp Misaligned Address", "global",
                                         (range(32), "misaligned"), lambda f, t: _arg(f, 0) + 4 * t, (0,)),
    # local_overflow.cu: scratch[picks[t]], every pick 0x40404040, past a 16-int frame
    "local_overflow.explain": Truth("Warp Out-of-range Address", "local", (range(32), "out-of-bounds"),
                                    params=(0,)),
    "local_overflow.sglang": Truth("Warp Out-of-range Address", "local", (range(32), "out-of-bounds"),
                                   params=(0,)),
    # dynamic_shared.cu: tile[t * 4096] with 64 ints of dynamic shared memory: only t = 0 inside
    "dynamic_shared.explain": Truth("Warp Out-of-range Address", "shared",
                                    (range(1, 32), "out-of-bounds"),
                                    lambda f, t: SHARED_RESERVE + 4 * t * 4096, (1,)),
    # moe_align_far.cu: counts[topk_ids[i]]++ in shared memory, every id 0x01010101: its high
    # bits name CTA rank 4 of a launch without clusters
    "moe_align_far.explain": Truth("Warp Illegal Instruction", "shared", (range(32), "out-of-bounds"),
                                   lambda f, t: SHARED_RESERVE + 4 * 0x01010101, (0,)),
    # device_function.cu (-G): out[rows[i]], every row 0x40404040: a generic store 4 GiB past
    # out, which falls in the block's shared window (its rank bits name no CTA of the launch)
    "device_function_G.explain": Truth("Warp Illegal Instruction", "shared",
                                       (range(32), "out-of-bounds")),
    # the same store in the lineinfo build, a global STG: no allocation bound in the dump
    "device_function.explain": Truth("Warp Invalid Address Space", "global", None,
                                     lambda f, t: _arg(f, 0) + 4 * 0x40404040, (0, 1)),
    # cluster.cu: data[idx * stride], stride 1 << 22, 4 KiB allocated
    "cluster.explain": Truth("Warp Invalid Address Space", "global", None, params=(0, 1)),
    # tp_ranks.cu: activations[route[i]] with every route 0x7f7f7f7f
    "tp_ranks.explain": Truth("Warp Illegal Address", "global", None,
                              lambda f, t: _arg(f, 0) + 4 * 0x7F7F7F7F, (0, 1)),
    # triton_oob.py: out_ptr + index with every index 1 << 34 (float32): 64 GiB past out
    "triton_oob.explain": Truth("Warp Illegal Address", "global", None,
                                lambda f, t: _arg(f, 0) + 4 * (1 << 34)),
    # torch_kernels.py flash: the key tensor handed in 1 TiB past the query (it printed both)
    "torch_flash_oob.sglang": Truth("Warp Illegal Address", "global", None),
}


@cache
def _report(case: str):
    reports = [crashlab.inspect(dump) for dump in sorted((H200 / case).glob("core.*.nvcudmp"))]
    return next(report for report in reports if report.faults)


def test_every_real_fault_dump_has_a_truth():
    faulted = {dump.parent.name for dump in H200.glob("*/core.*.nvcudmp")
               if not dump.parent.name.split(".")[0].endswith("_cut")
               and "CUDA Exception" in dump.with_name(dump.name.replace(".nvcudmp", ".cuda-gdb.txt")).read_text()}
    assert faulted == set(TRUTH)


@pytest.mark.parametrize("case", sorted(TRUTH))
def test_the_explanation_is_the_sources_truth_for_every_marked_lane(case):
    truth = TRUTH[case]
    fault = _report(case).faults[0]
    why = fault.explanation
    assert fault.exception.display == truth.exception
    assert why.space == truth.space and why.trust == "consistent", why.story
    assert why.lanes_judged == fault.faulting_lanes and why.lanes_not_judged == 0
    if truth.culprits is None:
        assert not why.breaks_bound and {g.kind for g in why.lanes} == {"undetermined"}
    else:
        lanes, kind = truth.culprits
        head = why.lanes[0]
        assert why.breaks_bound and (head.kind, head.lanes) == (kind, list(lanes))
        assert head.count == len(lanes) * head.warps
        assert why.verdict.kind == kind and why.culprit_lane.lane == lanes[0]
        others = [lane for group in why.lanes[1:] for lane in group.lanes]
        assert sorted(others) == sorted(set(range(32)) - set(lanes))
    if truth.address is not None:
        culprit = why.culprit_lane
        assert int(why.address, 16) == truth.address(fault, culprit.thread_idx[0])
        assert int(culprit.address, 16) == truth.address(fault, culprit.thread_idx[0])
    roots = {r.param_ordinal for r in why.roots if r.kind == "param"}
    assert set(truth.params) <= roots, (truth.params, roots)


def test_the_flash_read_lies_in_the_key_tensor_1_tib_past_the_query():
    key = _printed("torch_flash_oob.sglang", r"k at (0x[0-9a-f]+)")
    query = _printed("torch_flash_oob.sglang", r"q at (0x[0-9a-f]+)")
    why = _report("torch_flash_oob.sglang").faults[0].explanation
    assert key - query == 1 << 40 and key <= int(why.address, 16) < key + 8 * 256 * 64 * 2


def test_the_manuals_table_has_a_row_per_real_dump():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    page = (ROOT / "docs" / "reference" / "real-dumps.md").read_text()
    for dump in sorted(H200.glob("*/core.*.nvcudmp")):
        assert f"| {dump.parent.name}/{dump.name} |" in page
    assert page == generator.real_dumps_page()
