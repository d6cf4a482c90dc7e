"""crashlab and NVIDIA's real cuda-gdb 12.4 read the same SYNTHETIC dumps the same way.

cuda-gdb's coredump reader needs no GPU (it reads the file on the CPU), so these tests
run wherever .ci/get-cuda-gdb installed it; the ``real_cuda_gdb`` fixture skips them elsewhere.
Every scenario the builder (tests/coredump_builder.py, tests/scenarios.py) makes and every
bundled synthetic fixture is opened with ``cuda-gdb -batch``; what cuda-gdb prints is read with
crashlab's own parsers (crashlab/gdb/parse.py) and compared with ``crashlab.inspect``: kernel,
exception, device/SM/warp/lane, block, thread, errorPC and the faulting instruction. Where the
two cannot agree by design, a test says which and why, and asserts what cuda-gdb really does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import crashlab
from benchmarks.bench_inspect import grid_spec
from crashlab.gdb import parse
from tests import make_examples, scenarios
from tests.coredump_builder import NEWEST, OLDEST, ROW_GENERATIONS, markers, write

#: Printed between commands, so that each command's output can be told apart.
_SEPARATOR = "@@crashlab-command@@"
_REFUSED = "Failed to read core file: elfOpenByName() failed: ELF header 'ident' verification failed"


def cuda_gdb(gdb: str, path: Path, *commands: str) -> dict[str, str]:
    """What ``target cudacore PATH`` printed ("load"), then what each command printed."""
    argv = [gdb, "-nx", "-batch", "-ex", f"target cudacore {path}"]
    for command in commands:
        argv += ["-ex", f"echo {_SEPARATOR}{command}\\n", "-ex", command]
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)
    load, *rest = done.stdout.split(_SEPARATOR)
    out = {"load": load}
    for piece in rest:
        command, _, text = piece.partition("\n")
        out[command] = text
    return out


def bare(name: str) -> str:
    """A function's name without its parameter list: cuda-gdb's kernel table shows ``f()``."""
    return name.split("(", 1)[0]


def assert_same_kernels(listed, report) -> None:
    """cuda-gdb's ``info cuda kernels`` lists the kernels crashlab lists, all running."""
    assert sorted((k.device, k.grid, k.name, k.grid_dim, k.block_dim) for k in listed) == sorted(
        (k.device, k.grid_id, bare(k.name), k.grid_dim, k.block_dim) for k in report.kernels)
    assert {k.status for k in listed} == {"Active"}


def _fault_scenario(key: str, exception: int):
    return lambda: scenarios.fault(key, exception)


def _lying_names():
    scenario = scenarios.fault()
    scenario.spec.lying_names = True
    return scenario


def _past_the_elf_section_limit():
    scenario = scenarios.fault(bystander_blocks=1)
    scenario.spec.filler_sections = 70_000
    return scenario


#: Every fault the builder plants, one per marker in fixtures/cubins/index.json, with the
#: exception such a fault raises.
_MARKER_EXCEPTIONS = {
    "assert_trap.sm_90.cubin:assert": scenarios.WARP_ASSERT,
    "assert_trap.sm_90.cubin:trap": scenarios.WARP_ILLEGAL_INSTRUCTION,
    "illegal_address.sm_90.cubin:illegal-address": scenarios.WARP_ILLEGAL_ADDRESS,
    "misaligned.sm_90.cubin:misaligned": scenarios.WARP_MISALIGNED_ADDRESS,
    "moe_align.sm_90.cubin:shared-out-of-range": scenarios.WARP_OUT_OF_RANGE_ADDRESS,
    "tp_ranks.sm_90.cubin:tp-rank0": scenarios.WARP_ILLEGAL_ADDRESS,
}
SCENARIOS = {
    **{key.split(":")[1]: _fault_scenario(key, exception) for key, exception in _MARKER_EXCEPTIONS.items()},
    "cluster": lambda: scenarios.fault("cluster.sm_90.cubin:cluster", cluster=True),
    "device-function": lambda: scenarios.device_function(),
    "device-function-G": lambda: scenarios.device_function(debug_build=True),
    "every-section-type": scenarios.every_section_type,
    "oldest-rows-no-metadata": lambda: scenarios.fault(rows=dict(OLDEST), metadata=False, sm_reports=False),
    "newest-rows": lambda: scenarios.fault(rows=dict(NEWEST)),
    **{f"{table}-rows-{size}": (lambda table=table, size=size: scenarios.fault(
        rows={table: size}, sm_reports=size >= 24 if table == "sm" else True))
       for table, sizes in ROW_GENERATIONS.items() for size in sizes[:-1]},
    "two-devices": lambda: scenarios.fault(device_count=2),
    "three-devices-fault-on-1": lambda: scenarios.fault(device_count=3, faulting_device=1),
    "one-lane-marked": lambda: scenarios.fault(marked_lanes=(7,)),
    "lying-section-names": _lying_names,
    "70k-sections": _past_the_elf_section_limit,
}


FIXTURES = {name: make_examples.FOLDER / name for name in make_examples.examples()}


def _dump(case: str, tmp_path: Path) -> Path:
    if case in FIXTURES:
        return FIXTURES[case]
    if case == "benchmark-shape":  # benchmarks/bench_inspect.py's dumps, two devices, small
        return write(grid_spec(devices=2, sms=3, warps=8, lanes=32, extras=True, memory=0),
                     tmp_path / "bench.nvcudmp").path
    return write(SCENARIOS[case]().spec, tmp_path / "core.nvcudmp").path


FAULT_CASES = sorted(SCENARIOS) + ["benchmark-shape", "moe_align_out_of_range.nvcudmp",
                                   "moe_align_explained.nvcudmp"]


def test_every_fault_marker_is_planted_here():
    planted = {*_MARKER_EXCEPTIONS, "cluster.sm_90.cubin:cluster",
               "device_function.sm_90.cubin:device-function", "device_function.sm_90.G.cubin:device-function"}
    # the fault explainer's planted kernels: tests/test_explain_planted.py opens each in cuda-gdb
    recipes = scenarios._recipes()
    planted |= {f"{recipes[case].program}.{arch}.cubin:{recipes[case].tag}"
                for case, arch in scenarios.EXPLAINED}
    assert {key for key, m in markers().items() if m.kind == "fault"} == planted


@pytest.mark.parametrize("case", FAULT_CASES)
def test_cuda_gdb_opens_the_dump_and_agrees_on_the_fault(real_cuda_gdb, tmp_path, case):
    path = _dump(case, tmp_path)
    seen = cuda_gdb(real_cuda_gdb, path, "info cuda kernels", "info cuda lanes", "x/1i $errorpc",
                    "info registers")
    load, problems = parse.load(seen["load"])
    assert problems == [] and load.focus is not None, seen["load"]
    report = crashlab.inspect(path)
    fault = report.faults[0]

    focus = load.focus
    assert (focus.device, focus.sm, focus.warp, focus.lane, focus.grid) == (
        fault.device, fault.sm, fault.warp, fault.lane, fault.grid_id)
    assert (focus.block_idx, focus.thread_idx) == (fault.block_idx, fault.thread_idx)
    if fault.cluster_idx is not None:
        assert focus.cluster_idx == fault.cluster_idx
    # Warp Assert loads as "Assertion failed." with no "CUDA Exception:" line (and codes 1 and 15
    # too); the lane table names every exception
    assert parse.current_lane_exception(seen["info cuda lanes"]) == fault.exception.display
    assert load.exception in (None, fault.exception.display)
    assert int(load.triggered_pc, 16) == int(fault.pc, 16)

    listed = parse.kernels_table(seen["info cuda kernels"])
    assert [(k.device, k.grid, k.name) for k in listed if k.current] == [
        (fault.device, fault.grid_id, bare(fault.kernel.name))]
    assert_same_kernels(listed, report)

    [instruction] = parse.disassembly(seen["x/1i $errorpc"])
    faulting = [i for i in fault.sass.instructions if i.faulting]
    assert instruction.marker in ("*>", "*=>")
    assert [(instruction.address, instruction.text)] == [(i.address, i.text) for i in faulting]
    assert instruction.offset == fault.function_offset

    registers = parse.registers(seen["info registers"])
    ours = {**fault.registers, **(fault.uniform_registers or {})}
    assert ours and {name: registers.get(name) for name in ours} == ours
    assert int(load.frame.pc, 16) == int(fault.current_pc, 16)


@pytest.mark.parametrize("case", ["hang", "hang_no_exception.nvcudmp"])
def test_no_exception_anywhere(real_cuda_gdb, tmp_path, case):
    """A user-triggered dump of a hang: neither reader finds an exception."""
    path = FIXTURES.get(case) or write(scenarios.hang().spec, tmp_path / "hang.nvcudmp").path
    seen = cuda_gdb(real_cuda_gdb, path, "bt", "info cuda kernels")
    load, problems = parse.load(seen["load"])
    assert problems == [] and load.exception is None
    assert "warning: No exception was found on any device" in load.warnings
    report = crashlab.inspect(path)
    assert report.status == "no-exception" and report.faults == []
    assert_same_kernels(parse.kernels_table(seen["info cuda kernels"]), report)
    [frame] = parse.backtrace(seen["bt"])
    assert frame.function in {bare(k.name) for k in report.kernels}


@pytest.mark.parametrize("which", ["exited-warp", "no-lane-marked"])
def test_sm_level_exception_is_newer_than_cuda_gdb_12_4(real_cuda_gdb, tmp_path, which):
    """By design they differ: an exception only the SM row records (driver r555+, debugger API
    revision 145) is invisible to cuda-gdb 12.4, which finds no exception; crashlab reports it
    from the SM row, with the SM's errorPC."""
    scenario = scenarios.exited_warp() if which == "exited-warp" else scenarios.fault(marked_lanes=())
    path = write(scenario.spec, tmp_path / "core.nvcudmp").path
    load, problems = parse.load(cuda_gdb(real_cuda_gdb, path)["load"])
    assert problems == [] and load.exception is None
    assert load.signal == "SIGTRAP" or "warning: No exception was found on any device" in load.warnings
    fault = crashlab.inspect(path).faults[0]
    assert fault.reported_by_sm and fault.exception.display == "Warp Illegal Address"
    assert fault.pc == hex(scenario.planted.pc)


def test_broken_warp_without_an_exception_code(real_cuda_gdb, tmp_path):
    """By design they differ: with SM rows of 8 bytes (no exception field) and no lane marked,
    only a broken warp with a valid errorPC is left. cuda-gdb sees no exception; crashlab keeps
    the warp as evidence (today: a fault of CUDBG_EXCEPTION_UNKNOWN) but names no exception it
    cannot know."""
    scenario = scenarios.fault(marked_lanes=(), rows=dict(NEWEST, sm=8))
    path = write(scenario.spec, tmp_path / "core.nvcudmp").path
    load, problems = parse.load(cuda_gdb(real_cuda_gdb, path)["load"])
    assert problems == [] and load.exception is None and load.signal == "SIGTRAP"
    report = crashlab.inspect(path)
    assert all(fault.exception.name == "CUDBG_EXCEPTION_UNKNOWN" for fault in report.faults)
    assert any("cuda-gdb reports no CUDA exception" in note for note in report.faults[0].notes)


def test_exception_on_an_inactive_lane(real_cuda_gdb, tmp_path):
    """By design they differ: libcudacore looks for lane exceptions in *active* lanes only
    (readDeviceExceptionState), so a lane that holds an exception but is not in its warp's
    activeLanesMask leaves cuda-gdb with none; crashlab reports the lane and says so."""
    scenario = scenarios.fault(marked_lanes=(3,))
    warp = scenario.spec.devices[0].sms[1].ctas[0].warps[1]
    warp.active_mask = 0xFFFFFFFF & ~(1 << 3)
    path = write(scenario.spec, tmp_path / "core.nvcudmp").path
    load, problems = parse.load(cuda_gdb(real_cuda_gdb, path)["load"])
    assert problems == [] and load.exception is None and load.signal == "SIGTRAP"
    fault = crashlab.inspect(path, sass=False).faults[0]
    assert (fault.lane, fault.exception.display) == (3, "Warp Illegal Address")
    assert any("not active in its warp" in note and "cuda-gdb" in note for note in fault.notes)


def test_without_a_valid_error_pc(real_cuda_gdb, tmp_path):
    """By design they differ on the PC: with errorPCValid 0 in the warp and no SM report,
    cuda-gdb prints no "triggered at PC" and has no $errorpc; crashlab falls back to the
    faulting lane's PC, which is cuda-gdb's frame #0 PC. Everything else agrees."""
    path = write(scenarios.fault(warp_error_pc=False, sm_reports=False).spec, tmp_path / "core.nvcudmp").path
    seen = cuda_gdb(real_cuda_gdb, path, "x/1i $errorpc")
    load, problems = parse.load(seen["load"])
    assert problems == [] and load.triggered_pc is None
    assert "value is not available" in seen["x/1i $errorpc"]
    fault = crashlab.inspect(path).faults[0]
    assert fault.pc_source.startswith("lane PC") and int(fault.pc, 16) == int(load.frame.pc, 16)
    assert (load.focus.sm, load.focus.warp, load.focus.lane) == (fault.sm, fault.warp, fault.lane)
    assert load.exception == fault.exception.display


def test_section_relative_symbols(real_cuda_gdb, tmp_path):
    """By design they differ on names: a driver's relocated image has absolute symbol values,
    and cuda-gdb finds a function by symbol value (libcudacore cuCoreFilterSymbolByAddress). With
    nvcc's section-relative values left in, cuda-gdb names no function and cannot disassemble;
    crashlab names it from the code section's address. The dump still opens."""
    path = write(scenarios.fault(absolute_symbols=False).spec, tmp_path / "core.nvcudmp").path
    seen = cuda_gdb(real_cuda_gdb, path, "info cuda kernels", "x/1i $errorpc")
    load, problems = parse.load(seen["load"])
    assert problems == [] and load.exception == "Warp Illegal Address"
    assert load.frame.function == "??"
    assert "Cannot disassemble instruction" in seen["x/1i $errorpc"]
    assert [k.name for k in parse.kernels_table(seen["info cuda kernels"])] == ["<internal>"]
    assert crashlab.inspect(path).faults[0].kernel.name == "write_past_end(int*, int)"


def test_gzip_dump_is_refused_by_cuda_gdb(real_cuda_gdb, tmp_path):
    """A dump cuda-gdb REFUSES, by design: cuda-gdb 12.4 reads only an uncompressed ELF file
    (a driver writes gzip with the 13.1 flag gzip_compress); crashlab unpacks it and reads it."""
    path = write(scenarios.fault().spec, tmp_path / "core.nvcudmp.gz", compress=True).path
    load_text = cuda_gdb(real_cuda_gdb, path)["load"]
    assert _REFUSED in load_text
    assert parse.load_failure(load_text).kind == "cannot-read-dump"
    assert crashlab.inspect(path).faults[0].exception.display == "Warp Illegal Address"


@pytest.mark.parametrize("abi_version", [8, 9])
def test_newer_elf_abi_version_is_refused_by_cuda_gdb(real_cuda_gdb, tmp_path, abi_version):
    """A dump cuda-gdb REFUSES, by design: libcudacore compares the ELF ident bytes with its own
    ELFOSABIV_LATEST (7) and refuses any other ABI version; crashlab reads it with a warning."""
    scenario = scenarios.fault()
    scenario.spec.abi_version = abi_version
    path = write(scenario.spec, tmp_path / "core.nvcudmp").path
    load_text = cuda_gdb(real_cuda_gdb, path)["load"]
    assert _REFUSED in load_text and parse.load_failure(load_text) is not None
    report = crashlab.inspect(path)
    assert report.faults[0].exception.display == "Warp Illegal Address"
    assert any(f"ELF ABI version {abi_version}" in warning for warning in report.warnings)


def _callers(gdb: str, tmp_path: Path, debug_build: bool):
    """cuda-gdb's frames above #0 and crashlab's backtrace, for a fault in a device function."""
    path = write(scenarios.device_function(debug_build).spec, tmp_path / "core.nvcudmp").path
    frames = parse.backtrace(cuda_gdb(gdb, path, "bt")["bt"])
    return frames[1:], crashlab.inspect(path).faults[0].backtrace


@pytest.mark.parametrize("debug_build", [False, True], ids=["lineinfo", "G"])
def test_backtrace_callers(real_cuda_gdb, tmp_path, debug_build):
    """Frame #0 is the faulting function; each backtrace row is one caller, innermost first."""
    theirs, ours = _callers(real_cuda_gdb, tmp_path, debug_build)
    assert [(int(f.pc, 16), bare(f.function)) for f in theirs] == [
        (int(f.pc, 16), bare(f.function)) for f in ours] != []


@pytest.mark.parametrize("debug_build", [False, True], ids=["lineinfo", "G"])
def test_backtrace_frame_numbers(real_cuda_gdb, tmp_path, debug_build):
    """cuda-gdb reads backtrace rows of level 0..callDepth-1 and shows them as frames #1.."""
    theirs, ours = _callers(real_cuda_gdb, tmp_path, debug_build)
    assert [f.level for f in theirs] == [f.level for f in ours] != []


def _lanes_reversed():
    """The faulting warp's lane rows in descending laneId: row 0 is lane 31."""
    scenario = scenarios.fault()
    scenario.spec.devices[0].sms[1].ctas[0].warps[1].lanes.reverse()
    return scenario


def _sms_reversed():
    """The same fault in two SMs (10 and 17), the SM rows in descending smId."""
    scenario = scenarios.fault(sm_reports=False)
    device = scenario.spec.devices[0]
    warp = device.sms[0].ctas[0].warps[0]
    warp.error_pc, warp.broken = scenario.planted.pc, 1
    for lane in warp.lanes[:2]:
        lane.exception = scenario.planted.exception
    device.sms.reverse()
    return scenario


@pytest.mark.parametrize("make", [_lanes_reversed, _sms_reversed], ids=["lanes-reversed", "sms-reversed"])
def test_shown_lane_is_the_first_by_id(real_cuda_gdb, tmp_path, make):
    """cuda-gdb iterates devices, SMs, warps and lanes by their ids and focuses the first lane
    with its own exception (gdb/cuda/cuda-exceptions.c); rows may come in any order."""
    path = write(make().spec, tmp_path / "core.nvcudmp").path
    load, problems = parse.load(cuda_gdb(real_cuda_gdb, path)["load"])
    assert problems == []
    fault = crashlab.inspect(path).faults[0]
    focus = load.focus
    assert (focus.sm, focus.warp, focus.lane, focus.thread_idx) == (fault.sm, fault.warp, fault.lane, fault.thread_idx)
