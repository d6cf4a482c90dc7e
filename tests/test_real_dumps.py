"""Coredumps written by a real NVIDIA driver (an H200, driver 580.159.04; fixtures/gpu/PROVENANCE.md)
read by crashlab on this CPU-only machine, against what others said of the same file:

- NVIDIA's cuda-gdb 13.0, on the GPU machine, in the batch transcript recorded beside each dump:
  the exception, the errorPC, the kernel, the source line and the warp cuda-gdb focuses;
- NVIDIA's cuda-gdb 12.4 here (the `real_cuda_gdb` fixture), through crashlab's own debugger flow;
- the planted truth of each program's source (fixtures/kernels, fixtures/gpu).

No dump here was made by crashlab's builder: a driver wrote every byte.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

import crashlab
from crashlab.gdb.agreement import PREDICATES_UNREAD, kernel_key
from crashlab.report.model import TriageReport
from tests import tmux_terminal
from tests.conftest import ROOT, run_cli

H200 = ROOT / "fixtures" / "gpu" / "h200"
DUMPS = sorted(H200.glob("*/core.*.nvcudmp"))
CUT = [d for d in DUMPS if d.parent.name.split(".")[0].endswith("_cut")]
WHOLE = [d for d in DUMPS if d not in CUT]


def _name(dump: Path) -> str:
    return dump.parent.name


def _transcript(dump: Path) -> str:
    return dump.with_name(dump.name.replace(".nvcudmp", ".cuda-gdb.txt")).read_text()


def _said(dump: Path) -> dict:
    """What cuda-gdb 13.0's batch transcript says of the dump."""
    text = _transcript(dump)
    said: dict = {}
    if found := re.search(r"^CUDA Exception: (.+)$", text, re.M):
        said["exception"] = found.group(1).strip()
    if found := re.search(r"^The exception was triggered at PC (0x[0-9a-f]+)\s+(.*?)(?:\s+\((\S+?):(\d+)[ )].*)?$",
                          text, re.M):
        said["pc"] = int(found.group(1), 16)
        if found.group(3):
            said["line"] = f"{found.group(3)}:{found.group(4)}"
    focus = re.search(r"^\[Current focus set to CUDA kernel \d+, grid \d+, (?:cluster .*?, )?block \((\d+),(\d+),(\d+)\), "
                      r"thread \((\d+),(\d+),(\d+)\), device (\d+), sm (\d+), warp (\d+), lane (\d+)\]", text, re.M)
    if focus:
        numbers = [int(n) for n in focus.groups()]
        said["block"], said["thread"] = numbers[0:3], numbers[3:6]
        said["device"], said["sm"], said["warp"], said["lane"] = numbers[6:10]
    kernels = re.search(r"^### info cuda kernels\n.*\n\*\s+\d+\s+\S+\s+\d+\s+\d+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+?)\(",
                        text, re.M)
    if kernels:
        said["kernel"] = kernels.group(1)
    return said


def test_the_fixtures_are_there():
    assert len(WHOLE) >= 15 and len(CUT) >= 3, [d.parent.name for d in DUMPS]


@pytest.mark.parametrize("dump", WHOLE, ids=_name)
def test_the_report_is_one_its_model_validates(dump):
    """The report builder makes its models without running their validators (the terminal view
    builds none); what it makes is what validating its JSON gives back, every value in its set."""
    report = crashlab.inspect(dump)
    assert TriageReport.model_validate_json(report.model_dump_json()) == report


@pytest.mark.parametrize("dump", WHOLE, ids=_name)
def test_crashlab_reads_what_cuda_gdb_13_read(dump):
    said = _said(dump)
    report = crashlab.inspect(dump)
    if "exception" not in said:  # a hang dumped through the pipe
        assert report.status == "no-exception", report.summary
        assert any(said["kernel"] in k.name for k in report.kernels), (said, report.kernels)
        return
    assert report.status == "fault", report.summary
    fault = report.faults[0]
    assert fault.exception.display == said["exception"]
    assert int(fault.pc, 16) == said["pc"]
    assert fault.device == said["device"]
    # cuda-gdb focuses one lane of the exception, crashlab names one of the group's: where more
    # than one warp faulted they may differ, but cuda-gdb's is on one of the group's SMs
    assert said["sm"] in (fault.sms or [fault.sm]), (said, fault.sms)
    if fault.faulting_warps == 1:
        assert [fault.sm, fault.warp, fault.lane] == [said["sm"], said["warp"], said["lane"]]
        assert list(fault.block_idx) == said["block"] and list(fault.thread_idx) == said["thread"]
    if "line" in said:
        lines = [f"{Path(s.file).name}:{s.line}" for s in fault.sass.source]
        assert said["line"] in lines, (said["line"], lines)
    else:  # a wheel's kernel without line information: neither side has a line
        assert not fault.sass.source


#: The next step a cut dump's refusal suggests: the flag the provenance says gave a whole dump.
NEXT_STEP = ("if the driver stopped writing it there, adding skip_constbank_memory to "
             "CUDA_COREDUMP_GENERATION_FLAGS may let the next dump finish")


def _flags(case: str) -> list[str]:
    command = json.loads((H200 / case / "command.json").read_text())
    return command["env"]["CUDA_COREDUMP_GENERATION_FLAGS"].split(",")


def _refusal(given: str, data: bytes) -> str:
    """The line a dump cut before its section table gets: the path as given, where its bytes
    end and where its ELF header places the table (read with int.from_bytes, not crashlab)."""
    table = int.from_bytes(data[0x28:0x30], "little")  # e_shoff
    return (f"crashlab: {given}: it ends at byte {len(data):,}, before its section table (at byte "
            f"{table:,}): nothing readable; {NEXT_STEP}")


@pytest.mark.parametrize("dump", CUT, ids=_name)
def test_a_dump_the_driver_cut_short_says_what_to_do_and_exits_2(dump):
    """The driver stopped writing before the section table (the file ends 68-69 KB in, its
    ELF header placing the table far past it), so nothing but the ELF header is read; every cut
    dump kept the constant banks, and the same fault dumped with skip_constbank_memory added
    (SGLang's flags) is whole: the refusal suggests adding it. Into a pipe, one line."""
    data = dump.read_bytes()
    assert int.from_bytes(data[0x28:0x30], "little") > len(data)  # e_shoff: the table never began
    assert "skip_constbank_memory" not in _flags(dump.parent.name)
    assert "skip_constbank_memory" in _flags("torch_flash_oob.sglang")
    assert any(d.parent.name == "torch_flash_oob.sglang" for d in WHOLE)
    done = run_cli("inspect", dump)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.decode().splitlines() == [_refusal(str(dump), data)]


def test_a_copy_cut_short_names_its_path_and_where_it_ends_and_only_suggests_the_flag(tmp_path):
    """``head -c 100000`` of the whole torch_flash_oob dump, which its driver wrote with
    skip_constbank_memory: the file looks like a driver's cut, so the refusal says where it
    ends, by the path as given (as every other refusal), and suggests the flag only for the
    case where the driver stopped, never as the diagnosis."""
    [whole] = (H200 / "torch_flash_oob.sglang").glob("core.*.nvcudmp")
    assert "skip_constbank_memory" in _flags("torch_flash_oob.sglang")
    cut = tmp_path / "copies" / "tf_trunc.nvcudmp"
    cut.parent.mkdir()
    cut.write_bytes(whole.read_bytes()[:100_000])
    done = run_cli("inspect", "copies/tf_trunc.nvcudmp", cwd=tmp_path)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.decode().splitlines() == [
        _refusal("copies/tf_trunc.nvcudmp", cut.read_bytes())]


@pytest.mark.skipif(tmux_terminal.available() is not None, reason=tmux_terminal.available() or "")
@pytest.mark.parametrize("columns", [80, 50])
def test_a_cut_dumps_refusal_folds_at_words_in_a_real_terminal(columns):
    """In a real terminal (a tmux pane): no line wider than the pane, nothing but the path
    broken inside a word (the path after a slash), its numbers whole, more lines at 50 columns
    than at 80."""
    [dump] = (H200 / "assert_cut.explain").glob("core.*.nvcudmp")
    shown = tmux_terminal.run_in_pane(["inspect", dump.relative_to(ROOT)], columns, ROOT)
    piped = run_cli("inspect", dump.relative_to(ROOT)).stderr.decode()
    assert shown.exit_code == 2
    assert all(cell_len(line) <= columns for line in shown.lines), shown.lines
    given = f"{dump.relative_to(ROOT)}:"
    words = " ".join(shown.lines).split()
    path_ends = next(n for n, word in enumerate(words) if word.endswith(".nvcudmp:"))
    assert "".join(words[1:path_ends + 1]) == given and words[path_ends + 1:] == piped.split()[2:]
    assert 2 <= len(shown.lines) <= 4 if columns == 80 else len(shown.lines) > 4, shown.lines


def test_the_moe_routing_fault_is_explained_from_the_real_dump():
    """fixtures/gpu/moe_align_far.cu: expert ids 0x01010101 past counts[64] in shared memory. The
    H200 raises Warp Illegal Instruction (the offset's high bits name a CTA of a cluster the
    launch does not have); the truth from the source: shared address 0x400 (the reserve) +
    4 * 0x01010101, read from a load of param 0's array."""
    [dump] = (H200 / "moe_align_far.explain").glob("core.*.nvcudmp")
    fault = crashlab.inspect(dump).faults[0]
    explanation = fault.explanation
    assert fault.exception.display == "Warp Illegal Instruction"
    assert explanation.space == "shared" and explanation.access == "atomic"
    assert int(explanation.address, 16) == 0x400 + 4 * 0x01010101
    assert explanation.verdict.kind == "out-of-bounds", explanation.verdict.basis
    roots = {(r.kind, r.param_ordinal) for r in explanation.roots}
    assert ("param", 0) in roots and any(kind == "load" for kind, _ in roots)


def _source(path: str, pattern: str) -> tuple[int, ...]:
    """Numbers a planted program fixes, read from its source (fixtures/kernels, fixtures/gpu)."""
    return tuple(int(v, 0) for v in re.search(pattern, (ROOT / path).read_text()).groups())


def _registers(dump: Path) -> dict[str, int]:
    """cuda-gdb 13.0's ``info registers`` of the focused lane, from the batch transcript."""
    return {name: int(value, 16) for name, value in
            re.findall(r"^(\w+)\s+(0x[0-9a-f]+)\s", _transcript(dump), re.M)}


def test_tp_ranks_is_explained_from_its_source_past_the_faulting_loads_own_destination():
    """fixtures/kernels/tp_ranks.cu: rank_compute<<<n / 256, 256>>> reads activations[route[i]]
    with every route byte 0x7f. The lanes stand past the faulting ``LDG.E R0`` (cuda-gdb: pc one
    instruction past errorpc, R0 reading 0 where the code had left threadIdx.x): R0 is not read
    as it was at the fault, no mismatch is claimed, and the address is activations + 4 *
    0x7f7f7f7f, loaded from element i of route."""
    [dump] = [d for d in (H200 / "tp_ranks.explain").glob("core.*.nvcudmp")
              if "exception" in _said(d)]
    said, registers = _said(dump), _registers(dump)
    assert registers["pc"] - registers["errorpc"] == 0x10 and registers["R0"] == 0
    assert said["thread"][0] != 0  # R0 held threadIdx.x before the load wrote it
    (threads,) = _source("fixtures/kernels/tp_ranks.cu", r"rank_compute<<<n / \d+, (\d+)>>>")
    (byte,) = _source("fixtures/kernels/tp_ranks.cu", r"cudaMemset\(route, (0x[0-9a-f]+)")
    route = int.from_bytes(bytes([byte]) * 4, "little")
    fault = crashlab.inspect(dump).faults[0]
    explanation = fault.explanation
    assert explanation.trust == "consistent", explanation.story
    activations = next(p.value for p in fault.params.values if p.ordinal == 0)
    assert int(explanation.address, 16) == activations + 4 * route
    i = fault.block_idx[0] * threads + fault.thread_idx[0]
    load = next(root for root in explanation.roots if root.kind == "load")
    assert int(load.value, 16) == route and f"= {i} of param 1" in load.detail
    assert any(stop.startswith("R0 was overwritten by the faulting instruction")
               for stop in explanation.stops), explanation.stops


def test_triton_oob_is_explained_from_its_source_through_a_64_bit_shared_load():
    """fixtures/gpu/triton_oob.py: scatter_rows stores to out_ptr + index with every index
    1 << 34 (float32 elements); Triton stages the pointers through shared memory and reads the
    faulting one back with ``LDS.64 R2`` (R3:R2, one value). The address is out + 4 * (1 << 34),
    it is what the load read, and nothing is a mismatch."""
    [dump] = (H200 / "triton_oob.explain").glob("core.*.nvcudmp")
    (shift,) = _source("fixtures/gpu/triton_oob.py", r"torch\.full\(\(n,\), 1 << (\d+)")
    fault = crashlab.inspect(dump).faults[0]
    explanation = fault.explanation
    assert explanation.trust == "consistent", explanation.story
    out = next(p.value for p in fault.params.values if p.ordinal == 0)
    assert int(explanation.address, 16) == out + 4 * (1 << shift)
    load = next(root for root in explanation.roots if root.kind == "load")
    assert load.name.startswith("LDS.64") and int(load.value, 16) == out + 4 * (1 << shift)


@pytest.mark.parametrize("case, ordinal, value", [("null_argument", 0, 0),
                                                  ("misaligned_argument", 0, None)])
def test_the_parameter_buffer_a_driver_kept_gives_the_bad_argument(case, ordinal, value):
    [dump] = (H200 / f"{case}.explain").glob("core.*.nvcudmp")
    fault = crashlab.inspect(dump).faults[0]
    param = next(p for p in fault.params.values if p.ordinal == ordinal)
    if value is not None:
        assert param.value == value
    else:
        assert param.value % 4 == 2  # the host offset a byte buffer by 2
    assert fault.explanation.verdict.kind == ("null" if case == "null_argument" else "misaligned")


@pytest.mark.parametrize("case", ["local_overflow.sglang", "torch_flash_oob.sglang"])
def test_sglangs_lightweight_flags_keep_the_parameter_buffer(case):
    """SGLang's defaults include skip_constbank_memory; the driver still writes the launch's
    parameter section, so the explanation has the kernel's arguments."""
    [dump] = (H200 / case).glob("core.*.nvcudmp")
    command = json.loads((H200 / case / "command.json").read_text())
    assert "skip_constbank_memory" in command["env"]["CUDA_COREDUMP_GENERATION_FLAGS"]
    fault = crashlab.inspect(dump).faults[0]
    assert fault.params is not None and fault.params.values


@pytest.mark.parametrize("dump", WHOLE, ids=_name)
def test_cuda_gdb_12_4_agrees_with_crashlab_on_every_real_dump(dump, real_cuda_gdb, monkeypatch):
    """cuda-gdb 12.4 opens every whole H200 dump, and ``inspect --debugger`` agrees with it on
    every fact it compares. By design: the predicates are never compared (12.4 prints them all
    as <unavailable>); where crashlab names no source line (a wheel's kernel without line
    information) cuda-gdb names none either; a dump without an exception (a hang dumped through
    the pipe) has no fault to compare, so the kernels cuda-gdb lists are compared instead. The
    line tables name the recording machine's files: cuda-gdb cannot list those here, a note."""
    monkeypatch.setenv("CRASHLAB_CUDA_GDB", real_cuda_gdb)
    report = crashlab.inspect(dump, debugger=True, debugger_timeout=120)
    section = report.debugger
    assert section.status == "ok", (section.reason, section.problems)
    assert section.version.startswith("cuda-gdb 12.4")
    assert not any(Path(source).exists() for source in section.missing_sources), section.missing_sources
    assert sorted((k.device, k.grid, kernel_key(k.name), k.grid_dim, k.block_dim) for k in section.kernels) == \
        sorted((k.device, k.grid_id, kernel_key(k.name), k.grid_dim, k.block_dim) for k in report.kernels)
    if not report.faults:
        assert section.load.exception is None and section.faults == []
        assert kernel_key(section.load.frame.function) in {kernel_key(k.name) for k in report.kernels}
        return
    for fault, view in zip(report.faults, section.faults, strict=True):
        verdicts = {a.field: a for a in view.agreement}
        assert verdicts.pop("predicates").note == PREDICATES_UNREAD
        if not fault.sass.source:
            unlisted = verdicts.pop("source")
            assert unlisted.native is None and unlisted.debugger is None, unlisted
        assert {a.verdict for a in verdicts.values()} == {"agree"}, verdicts


def test_a_source_the_dump_names_and_this_machine_lacks_is_a_note_in_every_view(real_cuda_gdb):
    """cuda-gdb cannot list the line table's file here: the terminal and Markdown views say so in
    a note, and the debugger's status stays ok, with no problem listed."""
    [dump] = (H200 / "null_argument.explain").glob("core.*.nvcudmp")
    source = crashlab.inspect(dump).faults[0].sass.source[0].file
    if Path(source).exists():
        pytest.skip(f"{source} is on this machine (.ci/run refuses to run where it is)")
    for view in ([], ["--markdown"]):
        done = run_cli("inspect", dump, "--debugger", *view,
                       env={"CRASHLAB_CUDA_GDB": real_cuda_gdb, "COLUMNS": "200"})
        text = done.stdout.decode()
        assert done.returncode == 0 and "(GNU gdb 13.1): ok" in text, (done.stderr, text)
        [note] = [line for line in text.splitlines() if "note: the debugger could not open" in line]
        assert source in note and "problem" not in text


def test_a_real_hang_dumped_through_the_pipe_shows_every_warp_polling_at_the_planted_line():
    """fixtures/kernels/hang.cu: 8 blocks of 64 threads spin on a flag nobody sets (its HANG
    marker names the line); the dump was taken through CUDA_ENABLE_USER_TRIGGERED_COREDUMP's pipe."""
    from tests.coredump_builder import markers

    marker = [m for key, m in markers().items() if key.startswith("hang.sm_90")][0]
    [dump] = (H200 / "hang.explain").glob("core.*.nvcudmp")
    [kernel] = crashlab.inspect(dump).kernels
    assert kernel.mangled == "_Z13wait_for_flagPViPi" and kernel.resident_warps == 16
    [wait] = kernel.waits
    assert wait.kind == "polling-memory" and wait.warps == 16
    [place] = kernel.warps_at
    assert [f"{Path(s.file).name}:{s.line}" for s in place.source] == [f"{marker.source}:{marker.line}"]


TP_RANKS = H200 / "tp_ranks.explain"


@pytest.mark.parametrize("core, skipped", [
    ("core.1972.nvcudmp", "the explanation of the faults (why)"),
    ("core.1943.nvcudmp", "what the warps wait for"),
], ids=["fault", "hang"])
def test_no_sass_says_once_in_every_view_what_it_skipped_and_why(core, skipped):
    """tp_ranks' two real dumps: rank 1's fault is explained and rank 0's hang classed as a
    collective wait from the SASS; with --no-sass neither can be, and the terminal view, the
    Markdown and the JSON (analysis_skipped) each say so once, naming the option, rather than
    leave the why block and the wait classes silently out."""
    dump = TP_RANKS / core
    full = json.loads(run_cli("inspect", dump, "--json").stdout)
    analysed = (full["faults"][0]["explanation"] is not None if full["faults"]
                else any(kernel["waits"] for kernel in full["kernels"]))
    assert analysed and full["analysis_skipped"] is None
    reason = f"{skipped}, which is read from the SASS that --no-sass leaves out"
    bare = json.loads(run_cli("inspect", dump, "--no-sass", "--json").stdout)
    assert bare["analysis_skipped"] == reason
    assert all(fault["explanation"] is None for fault in bare["faults"])
    assert all(kernel["waits"] == [] for kernel in bare["kernels"])
    terminal = run_cli("inspect", dump, "--no-sass").stdout.decode()
    assert terminal.count("skipped: ") == 1 and f"skipped: {reason}" in terminal, terminal
    markdown = run_cli("inspect", dump, "--no-sass", "--markdown").stdout.decode()
    assert markdown.count("_Skipped: ") == 1 and f"_Skipped: {reason}._" in markdown
    assert "skipped" not in run_cli("inspect", dump).stdout.decode().lower()
    unexplained = json.loads(run_cli("inspect", dump, "--no-explain", "--json").stdout)
    assert unexplained["analysis_skipped"] == f"{skipped}, with --no-explain"


def test_warps_held_at_a_barrier_report_the_next_pc_and_are_read_as_waiting_there():
    """fixtures/kernels/barrier_exit.cu on the H200: the tail block's warps past n return early
    and the rest wait at __syncthreads(). The driver reports each waiting warp at the PC after
    BAR.SYNC (cuda-gdb 13.0 showed the same PCs): crashlab reads them as waiting at that barrier,
    as many warps as the source leaves in the tail block, and the exited ones as exited."""
    from tests import scenarios

    [dump] = (H200 / "barrier_exit.explain").glob("core.*.nvcudmp")
    (n,) = scenarios.source_numbers("barrier_exit.cu", r"const int n = (\d+);")
    blocks, threads = scenarios.source_numbers("barrier_exit.cu", r"reverse_tile<<<(\d+), (\d+)>>>")
    waiting = -(-(n - (blocks - 1) * threads) // 32)
    report = json.loads(run_cli("inspect", dump, "--json").stdout)
    [kernel] = [k for k in report["kernels"] if "reverse_tile" in k["name"]]
    [wait] = kernel["waits"]
    assert wait["kind"] == "barrier-after-exit" and wait["warps"] == waiting, wait
    assert f"{threads // 32 - waiting} warps of that block exited" in wait["summary"]
    [at] = kernel["warps_at"]
    assert "BAR" not in at["instruction"]  # the PC is the one after the barrier ...
    assert any("BAR.SYNC" in line and "the next instruction" in line for line in wait["evidence"])
