"""The whole debugger flow end to end: crashlab's real driver, readers, flow and cross-check
behind a real pty, talking to tests/standin_cuda_gdb.py (a STAND-IN replaying real cuda-gdb 12.4
output shapes with the values planted in a SYNTHETIC dump). Real cuda-gdb:
tests/test_gdb_real_cuda_gdb.py (no GPU needed) and tests/test_gpu_debugger.py (GPU)."""

from __future__ import annotations

import json
import os
import sys

import psutil
import pytest
from rich.console import Console

import crashlab
from crashlab.report import markdown, terminal
from tests import scenarios
from tests.conftest import ROOT, run_cli

STANDIN = ROOT / "tests" / "standin_cuda_gdb.py"


@pytest.fixture(scope="module")
def planted_dump(tmp_path_factory):
    from tests.coredump_builder import write

    scenario = scenarios.fault()
    built = write(scenario.spec, tmp_path_factory.mktemp("triage") / "core.nvcudmp")
    return built.path, scenario.planted


@pytest.fixture
def standin(tmp_path, planted_dump, monkeypatch):
    """configure(**changes) -> path of an executable stand-in that answers for the planted fault."""
    _, planted = planted_dump

    def configure(**changes):
        values = {
            "device": planted.device, "sm": planted.sm, "warp": planted.warp, "lane": planted.lane,
            "grid": planted.grid_id, "block": list(planted.block_idx), "thread": list(planted.thread_idx),
            "exception": "Warp Illegal Address", "pc": planted.pc,
            "entry": planted.pc - planted.function_offset, "current_pc": planted.pc + 0x20,
            "mangled": planted.kernel, "short": "write_past_end", "name": "write_past_end(int*, int)",
            "grid_dim": [4, 1, 1], "block_dim": [256, 1, 1], "file": planted.marker.source,
            "line": planted.marker.line, "registers": planted.registers,
            "uniform_registers": [0x11, 0x22], "uniform_predicates": [1, 0],
        }
        values.update(changes)
        (tmp_path / "scenario.json").write_text(json.dumps(values))
        program = tmp_path / "cuda-gdb"
        program.write_text(f"#!/bin/sh\nexec {sys.executable} {STANDIN} \"$@\"\n")
        program.chmod(0o755)
        monkeypatch.setenv("STANDIN_SCENARIO", str(tmp_path / "scenario.json"))
        return str(program)

    return configure


@pytest.fixture(autouse=True)
def no_process_left():
    yield
    left = [p for p in psutil.Process(os.getpid()).children(recursive=True)
            if "standin" in " ".join(p.cmdline()) or p.name() == "cuda-gdb"]
    assert not left, left


def _inspect(path, program, **options):
    return crashlab.inspect(path, sass=False, debugger=True, debugger_program=program, **options)


#: What is compared without SASS (inspect --no-sass): all but the window (the source line comes
#: from the cubin's line table); cuda-gdb 12.4 prints no predicate (tests/standin_cuda_gdb.py does
#: the same).
COMPARED = ["kernel", "exception", "block", "thread", "pc", "registers", "uniform", "backtrace",
            "source"]
NOT_COMPARED = ["predicates", "disassembly"]


@pytest.mark.parametrize("order", ["exception-first", "focus-first"])
def test_debugger_view_agrees_with_the_native_one(planted_dump, standin, order):
    path, planted = planted_dump
    report = _inspect(path, standin(order=order))
    section = report.debugger
    assert section.status == "ok", section.problems
    assert section.version == "cuda-gdb 12.4 (GNU gdb 13.1)"
    assert section.load.exception == "Warp Illegal Address"
    assert section.load.triggered_pc == f"{planted.pc:#x}"
    assert section.load.focus.block_idx == planted.block_idx
    assert [k.name for k in section.kernels] == ["write_past_end"]
    view = section.faults[0]
    verdicts = {a.field: a for a in view.agreement}
    assert {field: verdicts[field].verdict for field in COMPARED} == dict.fromkeys(COMPARED, "agree")
    assert {field: verdicts[field].verdict for field in NOT_COMPARED} == dict.fromkeys(NOT_COMPARED, "unknown")
    assert verdicts["predicates"].note.startswith("the debugger prints every predicate as <unavailable>")
    assert verdicts["registers"].native == verdicts["registers"].debugger == "32 (R0..R31)"
    assert view.error_pc == f"{planted.pc:#x}" and view.kernel == "write_past_end"
    assert view.source == f"{planted.marker.source}:{planted.marker.line}"
    # without a native SASS window: --context's default, 8 instructions each side of the errorPC
    assert commands_of(section)[-1] == "x/17i $errorpc-0x80"
    assert [i.marker for i in view.disassembly if i.marker] == ["*>", "=>"]
    assert [view.registers[f"R{i}"] for i in range(32)] == planted.registers
    assert view.registers["R200"] == 0 and "R255" in view.registers_unavailable
    assert view.backtrace[0].launch == "<<<(4,1,1),(256,1,1)>>>"
    commands = commands_of(section)
    assert commands[:2] == ["show version", f"target cudacore {path.resolve()}"]
    assert any("-cuda-focus-switch device" in c for c in commands)
    # the native report is the same with or without the debugger
    native = crashlab.inspect(path, sass=False)
    assert report.model_copy(update={"debugger": None}) == native


def commands_of(section) -> list[str]:
    return [entry.command for entry in section.transcript]


def test_disassembly_window_follows_the_native_one(planted_dump, standin):
    """With SASS, x/Ni covers exactly the native window (--context N each side, clipped at the
    function's start), and each instruction is compared."""
    path, planted = planted_dump
    report = crashlab.inspect(path, context=2, debugger=True, debugger_program=standin())
    window = report.faults[0].sass.instructions
    assert len(window) == 5
    assert commands_of(report.debugger)[-1] == f"x/5i {window[0].address}"
    verdict = {a.field: a for a in report.debugger.faults[0].agreement}["disassembly"]
    # the stand-in prints NOP where nvdisasm prints the cubin's real instructions
    assert verdict.verdict == "disagree" and verdict.native == f"{window[0].address}: {window[0].text}"
    assert verdict.debugger == f"{window[0].address}: NOP"


def test_register_disagreement_names_the_registers(planted_dump, standin):
    path, planted = planted_dump
    wrong = list(planted.registers)
    wrong[5] ^= 0xFF
    verdict = {a.field: a for a in _inspect(path, standin(registers=wrong)).debugger.faults[0].agreement}["registers"]
    assert verdict.verdict == "disagree"
    assert verdict.native == f"R5={planted.registers[5]:#x}" and verdict.debugger == f"R5={wrong[5]:#x}"


def test_disagreement_is_shown_with_both_values(planted_dump, standin):
    path, planted = planted_dump
    wrong = [planted.block_idx[0] + 1, 0, 0]
    report = _inspect(path, standin(block=wrong, exception="Warp Misaligned Address"))
    verdicts = {a.field: a for a in report.debugger.faults[0].agreement}
    assert verdicts["block"].verdict == "disagree"
    assert verdicts["block"].native == "(1,0,0)" and verdicts["block"].debugger == "(2,0,0)"
    assert verdicts["exception"].verdict == "disagree"
    assert verdicts["kernel"].verdict == verdicts["pc"].verdict == "agree"
    console = Console(record=True, width=200)
    terminal.render(report, console)
    shown = console.export_text()
    rows = {row.split()[0]: " ".join(row.split()[1:]) for row in shown.splitlines()[1:] if row.startswith("    ")}
    assert rows["block"] == "differs: ours (1,0,0), cuda-gdb (2,0,0)"  # a line per field
    assert rows["exception"] == "differs: ours Warp Illegal Address, cuda-gdb Warp Misaligned Address"
    assert rows["kernel"] == rows["pc"] == "agrees"
    body = markdown.render(report)
    assert "**block disagrees**: native `(1,0,0)`, debugger `(2,0,0)`" in body


def test_dump_the_debugger_cannot_read(planted_dump, standin):
    path, _ = planted_dump
    report = _inspect(path, standin(load_error="Failed to read core file: Invalid ELF header"))
    section = report.debugger
    assert section.status == "failed" and section.faults == []
    assert [p.kind for p in section.problems] == ["cannot-read-dump"]
    assert section.reason == "Failed to read core file: Invalid ELF header"
    assert report.faults == crashlab.inspect(path, sass=False).faults


def test_command_that_hangs_is_killed_and_the_flow_goes_on(planted_dump, standin):
    path, _ = planted_dump
    report = _inspect(path, standin(hang_on="bt"), debugger_timeout=3)
    section = report.debugger
    assert section.status == "partial"
    assert [p.kind for p in section.problems] == ["timeout"]
    assert "killed" in section.problems[0].message
    view = section.faults[0]
    assert view.backtrace == []  # the command that hung
    # after the restart (dump reloaded, focus switched back) the rest of the fault's commands ran
    assert view.disassembly and view.registers and view.source
    verdicts = {a.field: a.verdict for a in view.agreement}
    assert {field: verdicts[field] for field in COMPARED if field != "backtrace"} == dict.fromkeys(
        [f for f in COMPARED if f != "backtrace"], "agree")
    assert verdicts["backtrace"] == "unknown"


def test_debugger_that_dies_is_a_problem_not_a_crash(planted_dump, standin):
    path, _ = planted_dump
    report = _inspect(path, standin(die_on="info registers"))
    kinds = [p.kind for p in report.debugger.problems]
    assert kinds == ["died"]
    view = report.debugger.faults[0]
    # the restarted debugger answered the commands after the one it died on
    assert "R0" not in view.registers and "errorpc" in view.registers and view.disassembly
    assert {a.field: a.verdict for a in view.agreement}["registers"] == "unknown"


def test_focus_the_debugger_refuses(planted_dump, standin):
    path, planted = planted_dump
    report = _inspect(path, standin(lane=planted.lane + 5))
    section = report.debugger
    assert "no-focus" in [p.kind for p in section.problems]
    view = section.faults[0]
    assert {a.field: a.verdict for a in view.agreement}["block"] == "unknown"
    assert view.disassembly == []  # nothing is read from a thread that is not the fault's


def test_focus_left_elsewhere_is_a_problem(planted_dump, standin):
    """A switch the debugger answers with success but that leaves the focus on another lane."""
    path, planted = planted_dump
    report = _inspect(path, standin(lane=planted.lane + 5, ignore_switch=True))
    [problem] = [p for p in report.debugger.problems if p.kind == "no-focus"]
    assert problem.message.endswith(f"but on device {planted.device} sm {planted.sm} warp "
                                    f"{planted.warp} lane {planted.lane + 5}")
    view = report.debugger.faults[0]
    assert view.registers == {} and view.disassembly == [] and view.focus is None
    assert {a.field: a.verdict for a in view.agreement}["thread"] == "unknown"


def test_cli_debugger_section_and_exit_codes(planted_dump, standin, no_cuda_gdb):
    path, _ = planted_dump
    done = run_cli("inspect", path, "--no-sass", "--debugger", "--json",
                   env={"CRASHLAB_CUDA_GDB": standin(), "STANDIN_SCENARIO": os.environ["STANDIN_SCENARIO"]})
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["debugger"]["status"] == "ok"
    verdicts = {a["field"]: a["verdict"] for a in data["debugger"]["faults"][0]["agreement"]}
    assert [verdicts[field] for field in COMPARED] == ["agree"] * len(COMPARED)
    # no cuda-gdb: the same native report, the same exit code, one line saying why
    bare = run_cli("inspect", path, "--no-sass", "--debugger", "--json", **no_cuda_gdb)
    assert bare.returncode == 0
    assert json.loads(bare.stdout)["debugger"]["status"] == "unavailable"
    lines = bare.stderr.decode().splitlines()
    assert len(lines) == 1 and "cuda-gdb not found" in lines[0] and "native report stands" in lines[0]


def test_a_gzip_dump_is_unpacked_for_the_debugger(planted_dump, standin, tmp_path):
    """cuda-gdb reads only plain files: the driver's gzip_compress output is unpacked first."""
    import gzip

    path, planted = planted_dump
    packed = tmp_path / "core.nvcudmp.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    report = _inspect(packed, standin())
    assert report.source.compressed
    assert report.debugger.status == "ok", report.debugger.problems
    assert report.debugger.load.triggered_pc == f"{planted.pc:#x}"
