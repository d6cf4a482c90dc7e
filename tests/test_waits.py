"""Hangs explained: what the warps of a dump with no exception wait for.

The kernels are real (fixtures/kernels/barrier_exit.cu, hang.cu, custom_allreduce.cu, built by
nvcc); the dumps around them are SYNTHETIC (tests/scenarios.py), with the polling lanes'
registers computed from chosen roots along the SASS. Expected values come from the .cu sources
(launch sizes), the planted roots and the HANG markers of fixtures/cubins/index.json, never from
crashlab's output.
"""

from __future__ import annotations

import io
import json
import re
import subprocess

import pytest

import crashlab
from crashlab.console import ViewConsole
from crashlab.report import markdown, terminal
from crashlab.report.markdown_escape import inline
from crashlab.sass.flow import FunctionCode
from crashlab.sass.listing import find_nvdisasm, parse_listing
from crashlab.waits.classify import COLLECTIVE_NAME
from crashlab.waits.shape import is_barrier, polling_loop
from tests import scenarios
from tests.conftest import run_cli
from tests.coredump_builder import CUBINS, markers, write


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Each hang scenario written once, with its report."""
    folder = tmp_path_factory.mktemp("waits")
    made = {}
    for name, scenario in [("barrier", scenarios.barrier_after_exit()),
                           ("peer", scenarios.peer_wait())]:
        path = write(scenario.spec, folder / f"{name}.nvcudmp").path
        made[name] = (scenario, path, crashlab.inspect(path))
    return made


def _kernel(report, mangled_part: str):
    return next(k for k in report.kernels if mangled_part in k.mangled)


def _wait(kernel, kind: str):
    found = [w for w in kernel.waits if w.kind == kind]
    assert len(found) == 1, [w.kind for w in kernel.waits]
    return found[0]


def test_a_barrier_after_an_early_return_counts_the_waiting_and_the_exited_warps(dumps):
    scenario, _, report = dumps["barrier"]
    (n,) = scenarios.source_numbers("barrier_exit.cu", r"const int n = (\d+);")
    blocks, threads = scenarios.source_numbers("barrier_exit.cu", r"reverse_tile<<<(\d+), (\d+)>>>")
    waiting = -(-(n - (blocks - 1) * threads) // 32)
    exited = threads // 32 - waiting
    kernel = _kernel(report, "reverse_tile")
    assert [w.kind for w in kernel.waits] == ["barrier-after-exit"]
    wait = kernel.waits[0]
    assert wait.warps == waiting and wait.pcs == [f"{scenario.notes['bar_pc']:#x}"]
    assert f"{waiting} warps at BAR.SYNC" in wait.summary and f"{exited} warps" in wait.summary
    block = "(" + ",".join(map(str, scenario.notes["block"])) + ")"
    assert f"block {block}: {waiting} of {threads // 32} warps resident, {exited} exited" \
        in wait.evidence
    marker = scenario.notes["marker"]
    assert any(marker.instruction in item and f"{marker.source}:{marker.line}" in item
               for item in wait.evidence)
    assert wait.address is None and wait.root is None


def test_a_flag_polling_loop_names_the_polled_address_and_its_parameter(dumps):
    scenario, _, report = dumps["barrier"]
    wait = _wait(_kernel(report, "wait_for_flag"), "polling-memory")
    assert wait.warps == scenario.notes["spin_warps"]
    assert sorted(wait.pcs) == sorted(f"{pc:#x}" for pc in scenario.notes["spin_pcs"])
    # hang.cu's loop loads *flag through R6.64, which LDC.64 R6, c[0x0][0x210] (param 0) set
    assert wait.address == f"{scenarios.HANG_FLAG:#x}"
    assert wait.root.kind == "param" and wait.root.param_ordinal == 0
    assert wait.root.value == f"{scenarios.HANG_FLAG:#x}"
    assert wait.root.provenance == "parameter buffer"
    assert "int volatile*" in wait.root.name
    assert any(item.startswith("loop +") and "LDG" in item and "BRA" in item
               for item in wait.evidence)
    assert any(item.startswith("address = arg0 ") for item in wait.evidence)


def test_without_a_parameter_buffer_the_parameter_value_comes_from_the_registers(build):
    scenario = scenarios.barrier_after_exit()
    for grid in scenario.spec.devices[0].grids:
        grid.params = None
    report = crashlab.inspect(build(scenario).path)
    wait = _wait(_kernel(report, "wait_for_flag"), "polling-memory")
    assert wait.root.param_ordinal == 0 and wait.root.provenance == "dump"
    assert wait.root.value == f"{scenarios.HANG_FLAG:#x}"
    assert any("no parameter buffer" in item for item in wait.evidence)


def test_a_custom_all_reduce_waits_on_a_peer_at_each_block_s_slot(dumps):
    scenario, _, report = dumps["peer"]
    kernel = _kernel(report, "cross_device_reduce_1stage")
    wait = _wait(kernel, "collective-wait")
    blocks = scenario.notes["blocks"]
    assert wait.warps == blocks and wait.pcs == [f"{scenario.notes['wait_pc']:#x}"]
    polled = scenario.notes["polled"]
    said = next(item for item in wait.evidence if item.startswith("polled address "))
    lane, block = re.search(r"of lane (\d+) of warp \d+, block \((\d+),0,0\)", said).groups()
    assert wait.address == f"{polled[(int(block), int(lane))]:#x}"  # that lane's slot
    distinct = next(item for item in wait.evidence if "distinct polled addresses" in item)
    assert distinct.startswith(f"{blocks} distinct")  # one warp per block reads its own slot
    # R8.64 = self_sg + blockIdx.x*0x20 + threadIdx.x*4 (two IMAD.WIDE.U32 on LDC.64 c[0x0][0x210])
    assert wait.root.kind == "param" and wait.root.param_ordinal == 0
    assert wait.root.value == f"{scenarios.PEER_SIGNAL:#x}" and "Signal*" in wait.root.name
    formula = next(item for item in wait.evidence if item.startswith("address = "))
    assert all(term in formula for term in ("arg0", "blockIdx.x*32", "threadIdx.x*4"))
    assert not any("do not fit" in item for item in wait.evidence)
    rest = _wait(kernel, "barrier")
    assert rest.warps == blocks * (scenario.notes["warps_per_block"] - 1)
    assert rest.pcs == [f"{scenario.notes['rest_pc']:#x}"]
    assert f"{blocks} warps of those blocks are not at a barrier: what the barrier waits for" \
        in rest.evidence


def test_a_dump_with_a_fault_has_no_waits(build):
    report = crashlab.inspect(build(scenarios.fault()).path)
    assert report.faults and all(k.waits == [] for k in report.kernels)


def test_warps_outside_any_loop_or_barrier_are_other_with_the_reason(build):
    report = crashlab.inspect(build(scenarios.hang()).path)
    kernel = _kernel(report, "wait_for_flag")  # its warps stand before the loop (the first load)
    wait = _wait(kernel, "other")
    assert wait.warps == sum(k.resident_warps for k in report.kernels if k is kernel)
    assert all("is in no loop" in item for item in wait.evidence)


def _listing(cubin: str, section: str):
    out = subprocess.run([find_nvdisasm()[0], "-c", "-gi", str(CUBINS / cubin)],
                         capture_output=True, text=True, check=True).stdout
    body = out.split(f"//--------------------- {section} ")[1].split("//-----")[0]
    return parse_listing(body)


@pytest.mark.parametrize("key", ["tp_ranks.sm_90.cubin:tp-rank1",
                                 "custom_allreduce.sm_90.cubin:peer-wait"])
def test_the_polling_load_a_hang_marker_names_feeds_its_loop_s_exit(key):
    marker = markers()[key]
    found = polling_loop(FunctionCode(_listing(marker.cubin, marker.text_section)), marker.offset)
    assert not isinstance(found, str), found
    assert found.load.address == marker.offset
    assert found.loop.head <= marker.offset <= found.loop.tail
    assert found.exit.predicate and found.condition.opcode.startswith("ISETP")


def test_code_that_is_not_a_polling_loop_gets_a_reason():
    spin = markers()["hang.sm_90.cubin:spin"]  # the first read of the flag, before the loop
    listing = _listing(spin.cubin, spin.text_section)
    assert "is in no loop" in polling_loop(FunctionCode(listing), spin.offset)
    # every kernel ends in `BRA` to itself: a loop with no way out
    tail = next(ins for ins in listing if ins.target == ins.address)
    assert "no guarded exit" in polling_loop(FunctionCode(listing), tail.address)


def test_the_scenario_s_spinning_warps_stand_in_hang_cu_s_loop(dumps):
    """The scenario's PCs (chosen by hand from the SASS) are the loop's load, compare and back
    edge on the `while` line, as nvdisasm lists them."""
    scenario, _, _ = dumps["barrier"]
    spin = scenario.notes["spin_marker"]
    listing = {ins.address: ins for ins in _listing(spin.cubin, spin.text_section)}
    chosen = [listing[pc - scenario.notes["spin_entry"]] for pc in scenario.notes["spin_pcs"]]
    assert [ins.opcode.split(".")[0] for ins in chosen] == ["LDG", "ISETP", "BRA"]
    assert all(any(place.line == spin.line for place in ins.source) for ins in chosen)


def test_the_barrier_markers_stand_at_barriers():
    for key in ("barrier_exit.sm_90.cubin:barrier", "custom_allreduce.sm_90.cubin:peer-wait-rest"):
        marker = markers()[key]
        listing = _listing(marker.cubin, marker.text_section)
        assert is_barrier(next(ins for ins in listing if ins.address == marker.offset))


def _terminal(report) -> str:
    console = ViewConsole(width=160, file=io.StringIO(), force_terminal=False)
    terminal.render(report, console)
    return console.file.getvalue()


def test_each_class_is_a_line_under_its_kernel_in_the_terminal_and_markdown_views(dumps):
    _, _, report = dumps["peer"]
    shown, md = _terminal(report), markdown.render(report)
    for wait in _kernel(report, "cross_device_reduce_1stage").waits:
        assert f"{wait.kind}: {wait.summary}" in shown
        assert f"**{wait.kind}** (grid 5)" in md
    assert "where warps stand" in shown


def test_inspect_json_carries_the_waits(dumps):
    _, path, _ = dumps["barrier"]
    done = run_cli("inspect", path, "--json")
    assert done.returncode == 1, done.stderr  # no exception: nothing found
    kernels = json.loads(done.stdout)["kernels"]
    kinds = {k["name"].split("(")[0]: [w["kind"] for w in k["waits"]] for k in kernels}
    assert kinds == {"reverse_tile": ["barrier-after-exit"], "wait_for_flag": ["polling-memory"]}


HOSTILE = "[bold red]ncclDevKernel_x[/bold red]<img src=x>`|*_\x1b[31m\x07\x9b\u2067\u200f\u202e"


def test_hostile_kernel_names_stay_text(build):
    scenario = scenarios.barrier_after_exit(kernel_name=HOSTILE)
    grids = scenario.spec.devices[0].grids
    grids[1].function = HOSTILE + "_allreduce"  # a collective by name: its name is in the evidence
    report = crashlab.inspect(build(scenario).path)
    collective = next(k for k in report.kernels if k.mangled.endswith("_allreduce"))
    wait = _wait(collective, "collective-wait")
    assert HOSTILE in wait.evidence[0]
    shown = _terminal(report)
    assert "[bold red]ncclDevKernel_x[/bold red]" in shown and "\x1b[31m" not in shown
    assert not [char for char in shown if not (char.isprintable() or char == "\n")]
    assert "\\u202e" in shown  # the override shown as its escape, not acted on
    md = markdown.render(report)
    assert f"  - {inline(wait.evidence[0])}" in md
    ours = [line for line in md.splitlines() if line.startswith(("  - ", "- **"))]
    assert any("img" in line for line in ours)
    assert not any(re.search(r"(?<!\\)<img", line) for line in ours)  # escaped: no HTML tag


def test_lanes_that_returned_from_a_waiting_warp_are_counted_from_its_valid_mask(build):
    scenario = scenarios.barrier_after_exit()
    last = scenario.spec.devices[0].sms[0].ctas[0].warps[-1]
    gone = 8
    last.lanes = last.lanes[:-gone]  # the driver lists valid lanes only
    report = crashlab.inspect(build(scenario).path)
    wait = _wait(_kernel(report, "reverse_tile"), "barrier-after-exit")
    assert f"{gone} lanes of the waiting warps exited (their warps' valid-lane masks)" in wait.evidence


def test_a_base_register_that_disagrees_with_the_parameter_buffer_is_said(build):
    scenario = scenarios.barrier_after_exit()
    other = scenarios.HANG_FLAG + 0x40
    for sm in scenario.spec.devices[0].sms[1:]:  # the spinning kernel's blocks
        for warp in sm.ctas[0].warps:
            for lane in warp.lanes:
                lane.registers[6] = other & 0xFFFFFFFF
    report = crashlab.inspect(build(scenario).path)
    wait = _wait(_kernel(report, "wait_for_flag"), "polling-memory")
    assert wait.address == f"{other:#x}"  # what the lane polls is what its registers say
    assert wait.root.value == f"{scenarios.HANG_FLAG:#x}"
    unfit = next(item for item in wait.evidence if "do not fit the code" in item)
    assert f"{other & 0xFFFFFFFF:#x} in the dump" in unfit


def test_an_mbarrier_try_wait_loop_is_fed_by_its_syncs_and_read_as_a_barrier():
    """CUTLASS on sm_100 retries SYNCS.PHASECHK...TRYWAIT in a stub at the function's end."""
    cubin = "production/cutlass_mxfp8_grouped_gemm.sm_100.cubin"
    out = subprocess.run([find_nvdisasm()[0], "-c", "-gi", str(CUBINS / cubin)],
                         capture_output=True, text=True, check=True).stdout
    found = 0
    for section in out.split("//--------------------- ")[1:]:
        listing = parse_listing(section) if section.startswith(".text") else []
        syncs = {ins.address for ins in listing if ins.opcode.startswith("SYNCS.PHASECHK")}
        for back in (ins for ins in listing if ins.target in syncs and ins.target <= ins.address
                     and ins.predicate):  # the retry; the stub's plain BRA returns forward
            loop = polling_loop(FunctionCode(listing), back.address)
            assert loop.loop.head == back.target and is_barrier(loop.load), loop
            found += 1
    assert found


def test_a_loop_that_walks_memory_is_not_polling():
    """ngram_ids (vLLM, sm_80) searches token ids: its loops leave on loaded data, but each
    iteration reads a new address."""
    out = subprocess.run([find_nvdisasm()[0], "-c", "-gi",
                          str(CUBINS / "production" / "ngram_ids.sm_80.cubin")],
                         capture_output=True, text=True, check=True).stdout
    readings = [polling_loop(FunctionCode(listing), ins.address)
                for section in out.split("//--------------------- ")[1:]
                if section.startswith(".text")
                for listing in [parse_listing(section)] for ins in listing]
    walking = [r for r in readings if isinstance(r, str) and "walks memory" in r]
    assert walking and not any(not isinstance(r, str) for r in readings)


@pytest.mark.parametrize("name,collective", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", True),          # NCCL 2.19+
    ("ncclKernel_AllReduce_RING_LL_Sum_float", True),           # NCCL before 2.19
    ("_ZN4vllm26cross_device_reduce_1stageIfLi8EEEvPNS_8RankDataENS_6SignalEPS3_PT_ii", True),
    ("_ZN8sglang26cross_device_reduce_2stageI6__halfLi4EEEvPNS_8RankDataEPNS_6SignalES6_PT_ii",
     True),
    ("_Z13wait_for_flagPViPi", False),
    ("_Z12reduce_rowsPKfPfi", False),
])
def test_collective_kernels_are_known_by_name(name, collective):
    assert bool(COLLECTIVE_NAME.search(name)) is collective


def test_without_nvdisasm_the_warps_are_other_with_the_reason(build, monkeypatch):
    monkeypatch.setattr("crashlab.sass.listing.find_nvdisasm", lambda: (None, "nvdisasm not found"))
    report = crashlab.inspect(build(scenarios.barrier_after_exit()).path)
    for kernel in report.kernels:
        wait = _wait(kernel, "other")
        assert wait.warps == kernel.resident_warps
        assert all(item.endswith("nvdisasm not found") for item in wait.evidence)


def test_a_barrier_whose_warps_lost_lanes_only_is_after_an_early_return_too(build):
    scenario = scenarios.peer_wait()  # every block whole: its barrier class is plain 'barrier'
    gone = 5
    for sm in scenario.spec.devices[0].sms:
        waiting = sm.ctas[0].warps[-1]
        waiting.lanes = waiting.lanes[:-gone]
    report = crashlab.inspect(build(scenario).path)
    wait = _wait(_kernel(report, "cross_device_reduce_1stage"), "barrier-after-exit")
    lanes = gone * scenario.notes["blocks"]
    assert f"while {lanes} lanes of them exited" in wait.summary


def test_no_explain_leaves_the_waits_out(dumps):
    _, path, _ = dumps["barrier"]
    report = crashlab.inspect(path, explain=False)
    assert report.kernels and all(k.waits == [] for k in report.kernels)
