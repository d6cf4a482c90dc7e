"""`inspect --debugger` and `debug` against NVIDIA's REAL cuda-gdb 12.4, which reads coredumps on
CPU (fixture ``real_cuda_gdb``; skipped with a reason where .ci/get-cuda-gdb has not run).

The dumps are the bundled MoE fixture and builder scenarios that cuda-gdb 12.4 opens (all
SYNTHETIC, around real nvcc-built cubins). On each, every fact crashlab compares must agree; a
fact left 'unknown' must be one of the two cuda-gdb 12.4 cannot give, with the reason:
- predicates: 12.4 prints every P register of a coredump as <unavailable>;
- the source line, on a dump whose relocated cubin keeps its line table at the cubin's own
  addresses (the builder's, today): cuda-gdb finds no line there (crashlab/gdb/lineinfo.py).
The MoE dump with its line tables relocated (fixtures/transcripts/) shows that once the line
table is where the code is, cuda-gdb names the same source chain as crashlab. One REAL H200
dump (fixtures/gpu/h200) tells a dump cuda-gdb cannot open from a source file it cannot list.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from crashlab.coredump.fault import DETAILED_GROUPS
from crashlab.gdb import parse
from crashlab.gdb.agreement import PREDICATES_UNREAD
from tests import scenarios
from tests.conftest import ROOT, run_cli

MOE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
RELOCATED = ROOT / "fixtures" / "transcripts" / "moe_align_line_table_relocated.nvcudmp"
INLINE = ROOT / "fixtures" / "transcripts" / "moe_align_inline_frame.nvcudmp"
COMPARED = ["kernel", "exception", "block", "thread", "pc", "registers", "uniform", "backtrace",
            "disassembly"]
#: Builder scenarios cuda-gdb 12.4 opens and reads like crashlab does.
SCENARIOS = {
    "illegal_address": lambda: scenarios.fault(),
    "misaligned": lambda: scenarios.fault("misaligned.sm_90.cubin:misaligned",
                                          scenarios.WARP_MISALIGNED_ADDRESS),
    "moe_align": lambda: scenarios.fault("moe_align.sm_90.cubin:shared-out-of-range",
                                         scenarios.WARP_OUT_OF_RANGE_ADDRESS),
    "no_sm_report": lambda: scenarios.fault(sm_reports=False),
}


def inspect_json(real_cuda_gdb, path, *options) -> dict:
    done = run_cli("inspect", path, "--debugger", "--json", *options,
                   env={"CRASHLAB_CUDA_GDB": real_cuda_gdb}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""  # no "--debugger: ..." line: the debugger section is whole
    return json.loads(done.stdout)


def assert_agrees(data: dict) -> None:
    section = data["debugger"]
    assert section["status"] == "ok", (section["reason"], section["problems"])
    assert section["version"].startswith("cuda-gdb 12.4")
    assert len(section["faults"]) == len(data["faults"])
    for view in section["faults"]:
        verdicts = {a["field"]: a for a in view["agreement"]}
        assert {f: verdicts[f]["verdict"] for f in COMPARED} == dict.fromkeys(COMPARED, "agree"), verdicts
        assert verdicts["predicates"]["verdict"] == "unknown"
        assert verdicts["predicates"]["note"] == PREDICATES_UNREAD
        source = verdicts["source"]
        assert source["verdict"] == "agree" or (
            source["verdict"] == "unknown" and ".rela.debug_line not applied" in source["note"]), source


def test_bundled_moe_fixture(real_cuda_gdb):
    data = inspect_json(real_cuda_gdb, MOE)
    assert_agrees(data)
    source = {a["field"]: a for a in data["debugger"]["faults"][0]["agreement"]}["source"]
    assert source["native"] == "device_atomic_functions.hpp:107 <- moe_align.cu:24"
    # the reason is read from this dump: its line table starts at 0x0, its code at 0x7fff3a000000
    assert "says 0x0 where its code is at 0x7fff3a000000" in source["note"]


def test_relocated_line_table_gives_the_same_source_chain(real_cuda_gdb):
    data = inspect_json(real_cuda_gdb, RELOCATED)
    assert_agrees(data)
    verdicts = {a["field"]: a for a in data["debugger"]["faults"][0]["agreement"]}
    assert verdicts["source"]["verdict"] == "agree"
    assert verdicts["source"]["debugger"] == "device_atomic_functions.hpp:107 <- moe_align.cu:24"
    assert verdicts["backtrace"]["debugger"] == "0x7fff3a000230 at moe_align.cu:23"


def test_inline_frame_of_the_current_pc(real_cuda_gdb):
    """The lane stands at the errorPC, inside the inlined atomicAdd: cuda-gdb's frame #0 has no
    PC printed (the first address of a line) and an 'inlined from' tail; both sides agree on
    the chain."""
    data = inspect_json(real_cuda_gdb, INLINE)
    assert_agrees(data)
    verdicts = {a["field"]: a for a in data["debugger"]["faults"][0]["agreement"]}
    chain = "device_atomic_functions.hpp:107 <- moe_align.cu:24"
    assert verdicts["backtrace"]["native"] == verdicts["backtrace"]["debugger"] == f"0x7fff3a000210 at {chain}"
    assert verdicts["source"]["verdict"] == "agree"


@pytest.mark.parametrize("name", SCENARIOS)
def test_builder_scenarios(real_cuda_gdb, build, name):
    built = build(SCENARIOS[name]())
    assert_agrees(inspect_json(real_cuda_gdb, built.path))


def test_call_frames(real_cuda_gdb, build):
    """A fault in a non-inlined device function: one return address in the dump. The builder
    numbers that row level 1 where cuda-gdb reads level 0 first; until it writes 0 the backtrace
    disagrees, and the note says why."""
    data = inspect_json(real_cuda_gdb, build(scenarios.device_function()).path)
    verdicts = {a["field"]: a for a in data["debugger"]["faults"][0]["agreement"]}
    assert {f: verdicts[f]["verdict"] for f in COMPARED if f != "backtrace"} == dict.fromkeys(
        [f for f in COMPARED if f != "backtrace"], "agree")
    frames = verdicts["backtrace"]
    assert frames["native"].count(" <- ") == 1
    assert frames["verdict"] == "agree" or (
        frames["verdict"] == "disagree" and "cuda-gdb asks for level 0 first" in frames["note"]), frames


def test_disassembly_window_follows_context(real_cuda_gdb):
    data = inspect_json(real_cuda_gdb, MOE, "--context", "2")
    window = data["faults"][0]["sass"]["instructions"]
    assert len(window) == 5
    commands = [entry["command"] for entry in data["debugger"]["transcript"]]
    assert f"x/5i {window[0]['address']}" in commands
    view = data["debugger"]["faults"][0]
    assert [i["address"] for i in view["disassembly"]] == [i["address"] for i in window]
    assert_agrees(data)


def many_groups() -> scenarios.Scenario:
    """The fault scenario plus one faulting warp at its own PC in each of 10 more blocks:
    11 fault groups, more than crashlab details (DETAILED_GROUPS)."""
    scenario = scenarios.fault(bystander_blocks=10)
    device = scenario.spec.devices[0]
    entry = device.grids[0].function_entry
    for number, sm in enumerate(device.sms):
        if sm.exception:
            continue
        warp = sm.ctas[0].warps[0]
        warp.broken, warp.error_pc = 1, entry + 0x10 * (number + 1)
        for lane in warp.lanes:
            lane.pc = warp.error_pc + 0x20
            lane.exception = scenarios.WARP_ILLEGAL_ADDRESS if lane.ln < 2 else lane.exception
    return scenario


def test_every_fault_group_is_visited(real_cuda_gdb, build):
    data = inspect_json(real_cuda_gdb, build(many_groups()).path)
    assert len(data["faults"]) > DETAILED_GROUPS
    section = data["debugger"]
    assert [view["fault"] for view in section["faults"]] == list(range(len(data["faults"])))
    assert section["status"] == "ok", section["problems"]
    for view in section["faults"]:
        verdicts = {a["field"]: a for a in view["agreement"]}
        for field in ("kernel", "exception", "block", "thread", "pc", "backtrace"):
            assert verdicts[field]["verdict"] == "agree", (view["fault"], verdicts[field])
    beyond = {a["field"]: a for a in section["faults"][-1]["agreement"]}
    assert beyond["registers"]["verdict"] == "unknown" and "most relevant" in beyond["registers"]["note"]


def test_debug_command_line_is_accepted_by_cuda_gdb(real_cuda_gdb):
    done = run_cli("debug", MOE, "--print", env={"CRASHLAB_CUDA_GDB": real_cuda_gdb})
    assert done.returncode == 0, done.stderr
    argv = shlex.split(done.stdout.decode())
    assert argv[0] == real_cuda_gdb and argv[-1] == "cuda device 0 sm 17 warp 5 lane 0"
    # the same command line, made non-interactive: -batch exits non-zero if a command fails
    ran = subprocess.run([argv[0], "-nx", "-batch", *argv[1:], "-ex", "cuda device sm warp lane block thread"],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "CUDA Exception: Warp Out-of-range Address" in ran.stdout
    assert ran.stdout.strip().splitlines()[-1] == "block (1,0,0), thread (32,0,0), device 0, sm 17, warp 5, lane 0"


def test_the_checkouts_cuda_gdb_is_found_unasked(tmp_path):
    """After .ci/get-cuda-gdb, crashlab run from the checkout finds its .cuda-gdb/bin/cuda-gdb
    with no CRASHLAB_CUDA_GDB and none on PATH or under CUDA_HOME or CUDA_PATH."""
    fetched = ROOT / ".cuda-gdb" / "bin" / "cuda-gdb"
    if not os.access(fetched, os.X_OK):
        pytest.skip(f"{fetched} is not there (run .ci/get-cuda-gdb)")
    system = "/usr/bin:/bin"  # what the fetched tree's wrapper script runs (sh, dirname)
    if os.path.exists("/usr/local/cuda/bin/cuda-gdb") or shutil.which("cuda-gdb", path=system):
        pytest.skip("this machine has a cuda-gdb of its own, which comes first")
    done = run_cli("inspect", MOE, "--debugger", "--json", timeout=300, env={
        "CRASHLAB_CUDA_GDB": "", "PATH": system, "CUDA_HOME": str(tmp_path), "CUDA_PATH": str(tmp_path)})
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    data = json.loads(done.stdout)
    assert data["debugger"]["tool"] == str(fetched)
    assert_agrees(data)


def _opened(gdb: str, path) -> str:
    done = subprocess.run([gdb, "-nx", "-batch", "-ex", f"target cudacore {path}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return done.stdout


def test_a_missing_dump_fails_and_a_missing_source_is_a_note(real_cuda_gdb, tmp_path):
    """cuda-gdb 12.4 says "No such file or directory" both for a dump it cannot open and for a
    source file its line table names but this machine lacks (a REAL H200 dump, whose line table
    names the recording machine's folder): only the first is a failure to read the dump."""
    _, problems = parse.load(_opened(real_cuda_gdb, tmp_path / "gone.nvcudmp"))
    assert [p.kind for p in problems] == ["cannot-read-dump"] and "gone.nvcudmp" in problems[0].message
    [dump] = (ROOT / "fixtures" / "gpu" / "h200" / "null_argument.explain").glob("core.*.nvcudmp")
    text = _opened(real_cuda_gdb, dump)
    load, problems = parse.load(text)
    assert problems == [] and load.exception == "Warp Illegal Address"
    frame_file = load.frame.file
    assert parse.unlisted_sources(text) == ([] if Path(frame_file).exists() else [frame_file])
