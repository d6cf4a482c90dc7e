"""Cost of crashlab's debugger driver, and of the whole --debugger flow.

    python benchmarks/bench_gdb.py [--commands 2000] [--repeat 5]

1. Per-command overhead of the pexpect driver against ``gdb -batch`` running the same commands,
   both on the same real host core (a gcc-built program cored by GNU gdb), same run:
   driver: one session, N commands sent one at a time, each waited for;
   batch:  ``gdb -nx -batch EXE CORE -ex C1 ... -ex CN`` minus the same with no command.
   The figure is seconds per command for each, and their ratio (median of --repeat runs).
2. The whole triage flow (``crashlab.inspect(..., debugger=True)``) on the dumps in
   fixtures/synthetic/, against the STAND-IN debugger of tests/standin_cuda_gdb.py (there is no
   cuda-gdb here): it measures crashlab's side (pty, driver, readers, cross-check), not cuda-gdb's
   own loading, which dominates on real dumps and must be measured on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import crashlab  # noqa: E402
from crashlab.gdb.driver import Debugger  # noqa: E402
from tests.conftest import HOST_PROGRAM  # noqa: E402

COMMANDS = ["print 6 * 7", "info registers rip", "bt 2", "x/2i $pc", "info line *$pc"]


def host_core(work: Path) -> tuple[Path, Path]:
    (work / "crash.c").write_text(HOST_PROGRAM.lstrip("\n"))
    exe, core = work / "crash", work / "crash.core"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(exe), str(work / "crash.c")], check=True)
    subprocess.run(["gdb", "-nx", "-batch", "-ex", "run", "-ex", f"generate-core-file {core}", str(exe)],
                   check=True, capture_output=True)
    return exe, core


def driver_per_command(gdb: str, exe: Path, core: Path, commands: list[str]) -> float:
    with Debugger(gdb, [str(exe), str(core)]) as session:
        assert session.start().ok
        began = time.perf_counter()
        for command in commands:
            assert session.run(command, timeout=60).ok
        return (time.perf_counter() - began) / len(commands)


def batch_seconds(gdb: str, exe: Path, core: Path, commands: list[str]) -> float:
    argv = [gdb, "-nx", "-batch", str(exe), str(core)]
    for command in commands:
        argv += ["-ex", command]
    began = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env={**os.environ, "TERM": "dumb"})
    return time.perf_counter() - began


def standin_program(work: Path) -> str:
    program = work / "cuda-gdb"
    program.write_text(f"#!/bin/sh\nexec {sys.executable} {ROOT / 'tests' / 'standin_cuda_gdb.py'} \"$@\"\n")
    program.chmod(0o755)
    return str(program)


def standin_scenario(report) -> dict:
    """Stand-in answers that match the dump's first fault (timing only, not a correctness check)."""
    fault = report.faults[0]
    pc = int(fault.pc, 16)
    return {
        "device": fault.device, "sm": fault.sm, "warp": fault.warp, "lane": fault.lane,
        "grid": fault.grid_id, "block": list(fault.block_idx), "thread": list(fault.thread_idx),
        "exception": fault.exception.display, "pc": pc, "entry": pc - (fault.function_offset or 0),
        "current_pc": pc + 0x20, "mangled": fault.kernel.mangled, "short": fault.kernel.name,
        "name": fault.kernel.name, "grid_dim": list(fault.grid_dim), "block_dim": list(fault.block_dim),
        "file": "kernel.cu", "line": 1, "registers": list((fault.registers or {}).values())[:32],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commands", type=int, default=2000,
                        help="enough that gdb -batch spends clearly more than its start-up noise")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    gdb = shutil.which("gdb")
    if gdb is None:
        sys.exit("bench_gdb: needs GNU gdb")
    version = subprocess.run([gdb, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    commands = [COMMANDS[i % len(COMMANDS)] for i in range(options.commands)]
    with tempfile.TemporaryDirectory(prefix="crashlab-bench-gdb-") as tmp:
        work = Path(tmp)
        exe, core = host_core(work)
        driver, batch = [], []
        for _ in range(options.repeat):
            driver.append(driver_per_command(gdb, exe, core, commands))
            empty = batch_seconds(gdb, exe, core, [])
            batch.append((batch_seconds(gdb, exe, core, commands) - empty) / len(commands))
        d, b = statistics.median(driver), statistics.median(batch)
        print(f"{version}; {options.commands} commands ({', '.join(COMMANDS)}), median of {options.repeat}")
        print(f"  driver (pexpect, one at a time): {d * 1e3:.2f} ms/command")
        print(f"  gdb -batch (same commands):      {b * 1e3:.2f} ms/command")
        print(f"  driver overhead:                 {(d - b) * 1e3:.2f} ms/command")
        print(f"  ratio driver / batch:            {d / b:.1f}x")

        print("whole --debugger flow on fixtures/synthetic (STAND-IN debugger, not cuda-gdb):")
        program = standin_program(work)
        for dump in sorted((ROOT / "fixtures" / "synthetic").glob("*.nvcudmp")):
            native = crashlab.inspect(dump, sass=False)
            if not native.faults:
                print(f"  {dump.name}: no fault, skipped")
                continue
            (work / "scenario.json").write_text(json.dumps(standin_scenario(native)))
            os.environ["STANDIN_SCENARIO"] = str(work / "scenario.json")
            times, flows = [], []
            for _ in range(options.repeat):
                began = time.perf_counter()
                report = crashlab.inspect(dump, sass=False, debugger=True, debugger_program=program)
                times.append(time.perf_counter() - began)
                flows.append(report.debugger.seconds)
            verdicts = [a.verdict for a in report.debugger.faults[0].agreement]
            print(f"  {dump.name}: inspect --no-sass --debugger {statistics.median(times):.2f} s, of which "
                  f"the debugger flow {statistics.median(flows):.2f} s ({len(report.debugger.transcript)} "
                  f"commands, status {report.debugger.status}, agreement {verdicts})")


if __name__ == "__main__":
    main()
