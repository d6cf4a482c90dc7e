"""Attribution as NVIDIA's reader, cuda-gdb, does it: which warp and lane a dump's exception is
given to, from the rows the dump holds.

SYNTHETIC dumps from tests.coredump_builder, some patched afterwards with tests.elf_patch into
shapes the builder will not write (repeated ids, all-zero rows, lying links). The malformed shapes
mirror the LLDB NVIDIA-GPU fork's tests (clayborg/llvm-project,
lldb/test/API/gpu/nvidia/corefiles/TestNVGPUArtificial*.py): bad sh_link, sh_info out of range,
zero sh_entsize and wrong parent type are refused; a memory section past the end of the file is
skipped and the rest read. Where real cuda-gdb is installed it judges the lane choice.
"""

from __future__ import annotations

import re
import struct
import subprocess

import pytest
from rich.console import Console

import crashlab
from crashlab.errors import BadInput
from crashlab.report import markdown, terminal
from tests import scenarios
from tests.conftest import run_cli
from tests.elf_patch import patched, read_section, section_count, set_row, set_section, zero_row

SHT = {"GLOBAL_MEM": 0x80000002, "DEV_REGS": 0x80000005, "DEV_TABLE": 0x80000009,
       "SM_TABLE": 0x8000000B, "GRID_TABLE": 0x8000000C, "CTA_TABLE": 0x8000000D,
       "WP_TABLE": 0x8000000E, "LN_TABLE": 0x8000000F}
VICTIM_LANES = "lntbl dev0.sm1.cta0.wp1"
VICTIM_WARPS = "wptbl dev0.sm1.cta0"


def _views(report) -> str:
    """Every human rendering of a report, as text."""
    console = Console(record=True, width=200, color_system=None)
    terminal.render(report, console)
    return console.export_text() + markdown.render(report) + report.summary


def _first_of_type(data, kind: str) -> int:
    return next(i for i in range(section_count(data)) if read_section(data, i, "type") == SHT[kind])


# -- ids, never rows ----------------------------------------------------------------------------
def test_lanes_are_found_by_lane_id_not_by_row(build):
    """The victim warp's lane rows written in reverse: lane 0 is still lane 0."""
    scenario = scenarios.fault()
    victim = scenario.spec.devices[0].sms[1].ctas[0].warps[1]
    victim.lanes.reverse()
    fault = crashlab.inspect(build(scenario).path, sass=False).faults[0]
    assert fault.lane == 0 and fault.thread_idx == scenario.planted.thread_idx
    assert fault.faulting_lanes == 4


def test_an_all_zero_row_is_not_a_lane(build, tmp_path):
    scenario = scenarios.fault()
    built = build(scenario)
    lanes = built.sections["lntbl dev0.sm0.cta0.wp0"]
    path = patched(built.path, tmp_path / "zero.nvcudmp", lambda d: zero_row(d, lanes, 0))
    report = crashlab.inspect(path, sass=False)
    assert any(f"section {lanes}) rows 0 are all zero" in w for w in report.warnings)
    assert all(p.pc != "0x0" for k in report.kernels for p in k.warps_at)


def _duplicate_lane_zero(data, built):
    """Row 31 of the victim warp claims laneId 0 (thread 999, own exception); lane 31 is
    dropped from the warp's masks, so that cuda-gdb still opens the dump."""
    mask = 0x7FFFFFFF
    set_row(data, built.sections[VICTIM_LANES], 31, "lane", ln=0, threadIdxX=999,
            exception=scenarios.WARP_ILLEGAL_ADDRESS)
    set_row(data, built.sections[VICTIM_WARPS], 1, "warp", validLanesMask=mask,
            activeLanesMask=mask)


def test_two_lanes_with_one_lane_id_warn_and_show_the_row_cuda_gdb_shows(build, tmp_path):
    built = build(scenarios.fault())
    path = patched(built.path, tmp_path / "dup.nvcudmp", lambda d: _duplicate_lane_zero(d, built))
    report = crashlab.inspect(path, sass=False)
    section = built.sections[VICTIM_LANES]
    assert any(f"2 lane rows with laneId 0 (section {section} row 0 and section {section} row "
               "31)" in w and "returns one of them" in w for w in report.warnings)
    fault = report.faults[0]
    assert fault.lane == 0 and fault.thread_idx == (32, 0, 0)
    assert any("may show another row" in n for n in fault.notes)


def _cuda_gdb_load(cuda_gdb: str, path) -> str:
    """What real cuda-gdb prints on opening ``path`` (no GPU needed)."""
    return subprocess.run([cuda_gdb, "-nx", "-batch", "-ex", f"target cudacore {path}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300).stdout


def _agree_on_focus(fault, out: str) -> None:
    """crashlab's first fault is where cuda-gdb put its focus, and the same exception."""
    focus = re.search(r"block \((\S+)\), thread \((\S+)\), device (\d+), sm (\d+), warp (\d+), "
                      r"lane (\d+)\]", out)
    assert focus and f"CUDA Exception: {fault.exception.display}" in out, out
    assert focus.group(1) == ",".join(map(str, fault.block_idx))
    assert focus.group(2) == ",".join(map(str, fault.thread_idx))
    assert tuple(int(g) for g in focus.groups()[2:]) == (fault.device, fault.sm, fault.warp,
                                                         fault.lane)


def test_cuda_gdb_shows_one_row_of_a_repeated_lane_id(build, tmp_path, real_cuda_gdb):
    """The judge: real cuda-gdb's focus is the lane crashlab shows, with the thread of one of
    the two rows that claim it, as crashlab's note says."""
    built = build(scenarios.fault())
    path = patched(built.path, tmp_path / "dup.nvcudmp", lambda d: _duplicate_lane_zero(d, built))
    fault = crashlab.inspect(path, sass=False).faults[0]
    out = _cuda_gdb_load(real_cuda_gdb, path)
    for thread in ((32, 0, 0), (999, 0, 0)):
        if f"thread ({','.join(map(str, thread))})" in out:
            _agree_on_focus(fault.model_copy(update={"thread_idx": thread}), out)
            return
    pytest.fail(out)


def _reversed_lane_rows(scenario):
    scenario.spec.devices[0].sms[1].ctas[0].warps[1].lanes.reverse()


def _lane_fault_on_each_device(scenario):
    """Device 1's SM reports its exception, device 0 only has a lane with its own."""
    scenario.spec.devices[0].sms[2].ctas[0].warps[0].lanes[5].exception = \
        scenarios.WARP_MISALIGNED_ADDRESS


@pytest.mark.parametrize("make,change", [
    (lambda: scenarios.fault(), _reversed_lane_rows),
    (lambda: scenarios.fault(device_count=2, faulting_device=1), _lane_fault_on_each_device),
])
def test_first_fault_is_where_cuda_gdb_stops(build, real_cuda_gdb, make, change):
    scenario = make()
    change(scenario)
    path = build(scenario).path
    _agree_on_focus(crashlab.inspect(path, sass=False).faults[0],
                    _cuda_gdb_load(real_cuda_gdb, path))


def test_two_warps_with_one_warp_id_on_an_sm(build):
    scenario = scenarios.fault()
    warps = scenario.spec.devices[0].sms[1].ctas[0].warps
    warps[0].warp_id = warps[1].warp_id
    report = crashlab.inspect(build(scenario).path, sass=False)
    assert any(f"two warp rows with warpId {warps[1].warp_id}" in w and "returns one of them" in w
               for w in report.warnings)
    assert any("may show another row" in n for n in report.faults[0].notes)


def test_sm_rows_beyond_num_sms(build):
    scenario = scenarios.fault()
    scenario.spec.devices[0].num_sms = 3
    report = crashlab.inspect(build(scenario).path, sass=False)
    assert any("rows but the device row says numSMs = 3" in w for w in report.warnings)
    assert any("smId 17" in w and "never examines" in w for w in report.warnings)
    fault = report.faults[0]
    assert fault.sm == 17 and any("never examines this SM" in n for n in fault.notes)


def _num_sms_3(spec):
    spec.devices[0].num_sms = 3


def _repeated_warp_id(spec):
    warps = spec.devices[0].sms[1].ctas[0].warps
    warps[0].warp_id = warps[1].warp_id


def _repeated_sm_id(spec):
    """A bystander SM row comes first under the victim's smId: cuda-gdb still reads the victim's
    warps (keyed by smId and warpId, which differ), so it still sees the fault."""
    spec.devices[0].sms[0].sm_id = spec.devices[0].sms[1].sm_id


def _repeated_sm_and_warp_ids(spec):
    _repeated_sm_id(spec)
    bystander, victim = (sm.ctas[0].warps[1] for sm in spec.devices[0].sms[:2])
    bystander.warp_id = victim.warp_id


@pytest.mark.parametrize("change,seen", [
    (None, "shown"), (_num_sms_3, "hidden"), (_repeated_sm_id, "shown"),
    (_repeated_warp_id, "either"), (_repeated_sm_and_warp_ids, "either"),
])
def test_cuda_gdb_reads_what_crashlab_says_it_reads(build, real_cuda_gdb, change, seen):
    """The judge: where crashlab notes that cuda-gdb would not show the fault (smId >= numSMs),
    real cuda-gdb finds no exception; where it notes that cuda-gdb shows one of two rows with one
    id, cuda-gdb shows the fault or the other row; where it notes nothing, cuda-gdb stops at
    that very fault."""
    scenario = scenarios.fault()
    if change:
        change(scenario.spec)
    path = build(scenario).path
    fault = crashlab.inspect(path, sass=False).faults[0]
    notes = " ".join(fault.notes)
    assert ("cuda-gdb would not show this fault" in notes) == (seen == "hidden")
    assert ("may show another row" in notes) == (seen == "either")
    out = _cuda_gdb_load(real_cuda_gdb, path)
    if seen == "shown":
        _agree_on_focus(fault, out)
    elif seen == "hidden":
        assert "CUDA Exception" not in out and "No exception was found" in out, out
    else:
        assert "CUDA Exception: Warp Illegal Address" in out or "SIGTRAP" in out, out


def test_two_sm_rows_with_one_sm_id(build):
    scenario = scenarios.fault()
    scenario.spec.devices[0].sms[2].sm_id = 17
    built = build(scenario)
    report = crashlab.inspect(built.path, sass=False)
    table = built.sections["smtbl dev0"]
    assert any(f"section {table} row 1 and section {table} row 2 both have smId 17" in w
               and "errorPC from one row only" in w for w in report.warnings)


# -- order and SM-level exceptions --------------------------------------------------------------
def test_a_lane_with_its_own_exception_comes_before_an_sm_level_one(build):
    """SM 10 reports an exception no lane claims; SM 17 has lanes with their own (its SM row is
    silent). cuda-gdb stops at the lane first, although SM 10 comes first by id."""
    scenario = scenarios.fault(sm_reports=False)
    quiet = scenario.spec.devices[0].sms[0]
    quiet.exception, quiet.error_pc = scenarios.WARP_MISALIGNED_ADDRESS, scenario.planted.pc
    report = crashlab.inspect(build(scenario).path, sass=False)
    assert [(f.sm, f.exception.code) for f in report.faults] == [
        (17, scenarios.WARP_ILLEGAL_ADDRESS), (10, scenarios.WARP_MISALIGNED_ADDRESS)]
    sm_level = report.faults[1]
    assert sm_level.warp is None and sm_level.block_idx is None
    assert len(sm_level.candidates) == 2
    assert "candidate (not attributed): SM 10 warp 0, block (0,0,0)" in _views(report)


def test_a_fault_group_spanning_sms_names_every_sm(build):
    scenario = scenarios.fault()
    sms = scenario.spec.devices[0].sms
    twin = sms[0].ctas[0].warps[0]
    twin.error_pc = sms[1].ctas[0].warps[1].error_pc
    twin.lanes[3].exception = scenarios.WARP_ILLEGAL_ADDRESS
    report = crashlab.inspect(build(scenario).path, sass=False)
    assert len(report.faults) == 1 and report.faults[0].sms == [10, 17]
    assert "SMs 10, 17" in report.summary
    assert "SMs 10, 17" in markdown.render(report)


def test_no_kernel_is_deduced_from_an_entry_point_of_zero(build):
    scenario = scenarios.exited_warp()
    for grid in scenario.spec.devices[0].grids:
        grid.function_entry = 0
    fault = crashlab.inspect(build(scenario).path, sass=False).faults[0]
    assert fault.kernel is None and not fault.kernel_inferred


def test_a_kernel_without_a_name_string_is_named_from_its_entry_point(build):
    """What a driver writes (fixtures/gpu): the grid's name field holds no string of the dump;
    its entry point is the address of the kernel's .text section in the relocated cubin."""
    scenario = scenarios.fault()
    for grid in scenario.spec.devices[0].grids:
        grid.function = ""
    report = crashlab.inspect(build(scenario).path, sass=False)
    assert report.faults[0].kernel.mangled == scenario.planted.kernel


def test_an_unnamed_kernel_is_never_printed_as_an_empty_string(build):
    scenario = scenarios.fault()
    for grid in scenario.spec.devices[0].grids:
        grid.function = ""
        grid.function_entry = 0x10  # no cubin's code starts there
    report = crashlab.inspect(build(scenario).path, sass=False)
    text = _views(report)
    assert "in , " not in text and "`, grid" not in text and "| `` |" not in text
    assert "an unnamed kernel (grid 7)" in report.summary
    assert text.count("an unnamed kernel (grid 7)") >= 4


# -- salvage and refusal ------------------------------------------------------------------------
def test_memory_section_past_the_end_is_skipped_and_the_rest_triaged(build, tmp_path):
    """LLDB's salvaged shape: a memory section whose bytes run past the end of the file."""
    scenario = scenarios.fault()
    scenario.spec.global_memory = [(0x7F00_0000_0000, 4096)]
    built = build(scenario)
    path = patched(built.path, tmp_path / "past.nvcudmp",
                   lambda d: set_section(d, _first_of_type(d, "GLOBAL_MEM"), "size", 1 << 40))
    done = run_cli("inspect", path, "--json")
    assert done.returncode == 0, done.stderr
    assert b"1 GLOBAL_MEM section past the end of the file" in done.stdout
    assert scenario.planted.kernel.encode() in done.stdout


def test_registers_past_the_end_are_skipped(build, tmp_path):
    scenario = scenarios.fault()
    built = build(scenario)

    def cut(data):
        lanes = built.sections[VICTIM_LANES]
        regs = next(i for i in range(section_count(data))
                    if read_section(data, i, "type") == SHT["DEV_REGS"]
                    and read_section(data, i, "link") == lanes
                    and read_section(data, i, "info") == 0)
        set_section(data, regs, "offset", len(data) - 8)

    report = crashlab.inspect(patched(built.path, tmp_path / "regs.nvcudmp", cut), sass=False)
    assert report.faults[0].registers is None and report.faults[0].lane == 0
    assert any("1 DEV_REGS section past the end" in w for w in report.warnings)


def test_a_cubin_past_the_end_costs_the_sass_only(build, tmp_path):
    """The relocated cubin cut off: SASS goes, with a reason; kernel, block and thread stay."""
    scenario = scenarios.fault()
    built = build(scenario)
    cubin = built.sections[f"relfimg {0x5550_0000:#x}"]
    path = patched(built.path, tmp_path / "cubin.nvcudmp",
                   lambda d: set_section(d, cubin, "size", 1 << 40))
    report = crashlab.inspect(path)
    fault = report.faults[0]
    assert fault.kernel.mangled == scenario.planted.kernel
    assert fault.block_idx == scenario.planted.block_idx
    assert not fault.sass.instructions and fault.sass.unavailable_reason
    assert any("1 RELF_IMG section past the end" in w for w in report.warnings)


def test_a_hang_dump_with_memory_past_the_end_exits_1(build, tmp_path):
    scenario = scenarios.hang()
    scenario.spec.global_memory = [(0x7F00_0000_0000, 4096)]
    path = patched(build(scenario).path, tmp_path / "hang.nvcudmp",
                   lambda d: set_section(d, _first_of_type(d, "GLOBAL_MEM"), "offset", 1 << 40))
    done = run_cli("inspect", path)
    assert done.returncode == 1, done.stderr
    assert b"section past the end of the file" in done.stdout


def _lying(build, tmp_path, kind: str, field: str, value):
    """The fault scenario with one header field of the first ``kind`` section rewritten;
    ``value`` is a number or the type whose first section it should name."""
    def lie(data):
        target = _first_of_type(data, value) if isinstance(value, str) else value
        set_section(data, _first_of_type(data, kind), field, target)

    return patched(build(scenarios.fault()).path, tmp_path / "lie.nvcudmp", lie)


@pytest.mark.parametrize("kind,field,value,fragment", [
    ("WP_TABLE", "link", 0xFFFFFF, "links to section"),                  # sh_link beyond the file
    ("CTA_TABLE", "link", "DEV_TABLE", "its parent must be a SM_TABLE"),  # wrong parent kind
    ("SM_TABLE", "entsize", 0, "entry size 0"),                          # zero sh_entsize
    ("LN_TABLE", "info", 1000, "names row 1000"),                        # sh_info out of range
])
def test_lldb_malformed_shapes_are_refused_in_one_line(build, tmp_path, kind, field, value,
                                                       fragment):
    path = _lying(build, tmp_path, kind, field, value)
    done = run_cli("inspect", path)
    assert done.returncode == 2 and fragment in done.stderr.decode()
    assert len(done.stderr.decode().splitlines()) == 1


@pytest.mark.parametrize("kind,field,value,fragment", [
    # LLDB's out-of-range row index: a register section naming row 99 of a 32-row lane table
    ("DEV_REGS", "info", 99, "1 section naming a row beyond the parent table"),
    ("DEV_REGS", "link", "GRID_TABLE", "1 section of a kind a LN_TABLE holds, linked to something else"),
    # LLDB's invalid parent link (sh_link 0): libcudacore reads a device's tables by sh_info
    # alone and so does crashlab, but not silently
    ("SM_TABLE", "link", 0, "1 SM_TABLE section with sh_link 0"),
])
def test_lies_that_leave_the_rest_readable_are_warned_about(build, tmp_path, kind, field, value,
                                                            fragment):
    path = _lying(build, tmp_path, kind, field, value)
    report = crashlab.inspect(path, sass=False)
    assert any(fragment in w for w in report.warnings), report.warnings
    assert report.faults


def test_a_dump_cut_short_is_refused_cleanly_where_tables_are_lost(build, tmp_path):
    """A dump cut at many points, its section header table kept (as a writer that puts it first
    would): the builder interleaves tables with per-lane sections, so every cut loses a table,
    and each is one clean refusal, never a traceback."""
    data = build(scenarios.fault()).path.read_bytes()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    headers = data[shoff:]
    for cut in range(4096, shoff, max(1, shoff // 60)):
        body = bytearray(data[:cut]) + bytes(-cut % 8)
        body[0x28:0x30] = struct.pack("<Q", len(body))
        path = tmp_path / "cut.nvcudmp"
        path.write_bytes(bytes(body) + headers)
        with pytest.raises(BadInput) as refusal:
            crashlab.inspect(path, sass=False)
        assert "\n" not in str(refusal.value)
