"""``crashlab inspect`` against NVIDIA's cuda-gdb on the same dumps: wall time and peak RSS.

    python benchmarks/bench_vs_cuda_gdb.py [--only NAME] [--keep DIR] [--timeout 300] [--repeat 3]

crashlab: ``python -m crashlab inspect DUMP``, the real command as a user runs it (a fresh
interpreter, text report to a pipe, SASS by nvdisasm included).
cuda-gdb: ``cuda-gdb -nx -batch -ex 'target cudacore DUMP' -ex 'info cuda kernels' -ex bt``
(found as $CRASHLAB_TEST_CUDA_GDB, ./.cuda-gdb/bin/cuda-gdb from .ci/get-cuda-gdb, or on PATH).
cuda-gdb does not disassemble there, crashlab does; so the small dump is also timed with cuda-gdb
running ``x/17i $pc`` after ``bt`` (both pay for a disassembler), and with ``crashlab inspect
--no-sass`` (neither does). ``--breakdown`` times the parts of crashlab's run on the small dump:
interpreter start, importing the CLI, nvdisasm alone on that dump's cubin. crashlab's runs find
the SASS listing that the warm-up run cached (a user's second inspect of the same kernel), except
the "empty cache" case, which gives each run a fresh XDG_CACHE_HOME (nvdisasm runs every time).

Dumps: the bundled SYNTHETIC fixture and SYNTHETIC builder dumps made by benchmarks/
bench_inspect.py's grid_spec (cached in --keep): half an H100 with 4 GiB of sparse memory, two
full H100s, eight full H100s with 4 GiB. Each command is a fresh process; peak RSS is os.wait4's
for that child and the children it waited for (nvdisasm), spawned by a small trampoline
interpreter (see TRAMPOLINE; cuda-gdb's wrapper script execs the loader: same process).
crashlab runs from bytecode (cached under --keep, one warm-up run first), as an installed package
does, even where PYTHONDONTWRITEBYTECODE is set. Before each command the dump's data is read
once (warm_page_cache), so that both start from the same page cache. Dumps below --repeat-below
sections are run --repeat times (median shown), the others once. cuda-gdb has --timeout seconds;
a non-zero exit, a timeout, an internal error or no backtrace is a failure, and its first error
line is printed. The load average is printed with each figure: on a shared machine the times
move with it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_inspect import GIB, SIZES, grid_spec  # noqa: E402
from crashlab.coredump.elf import ElfImage  # noqa: E402
from tests.coredump_builder import write  # noqa: E402

FIXTURE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
#: Builder dumps, by bench_inspect.grid_spec's shape arguments.
BUILT = {
    "1xh100-half+4GiB": dict(devices=1, sms=132, warps=32, lanes=32, extras=False, memory=4 * GIB),
    "2xh100": SIZES["2xh100"],
    "8xh100+4GiB": SIZES["8xh100+4GiB"],
}
CRASHLAB_INSPECT = [sys.executable, "-m", "crashlab", "inspect"]
GDB_COMMANDS = ["info cuda kernels", "bt"]


@dataclass
class Case:
    label: str
    dump: str
    gdb_commands: list[str]
    crashlab_options: tuple[str, ...] = ()
    #: crashlab starts each run with an empty SASS cache (a fresh XDG_CACHE_HOME); the other
    #: cases find the listing the warm-up run cached, as a user's second inspect does
    cold_cache: bool = False


CASES = [
    Case("moe_align", "moe_align", GDB_COMMANDS),
    Case("moe_align, empty cache", "moe_align", GDB_COMMANDS, cold_cache=True),
    Case("moe_align, gdb +x/17i", "moe_align", GDB_COMMANDS + ["x/17i $pc"]),
    Case("moe_align, --no-sass", "moe_align", GDB_COMMANDS, ("--no-sass",)),
    *(Case(name, name, GDB_COMMANDS) for name in BUILT),
]
#: What marks a cuda-gdb run that did not read the dump (its messages, as 12.4 prints them).
GDB_FAILURE = re.compile(r"internal-error|internal to GDB|error=CUDBG_|failed to|No CUDA focus|"
                         r"^Error|is not a CUDA coredump|No stack", re.I | re.M)


@dataclass
class Run:
    wall_s: float
    peak_mib: float
    exit_code: int | None  # None: killed at the timeout
    output: str
    load: float


#: Runs one command and writes "wall_s peak_kib exit_code" (exit code "timeout" when killed) to
#: argv[1]. The measured process is spawned by this small interpreter, not by the benchmark: a
#: child's peak RSS starts at the RSS of the process it was forked from, so counting from a
#: parent that has imported crashlab would put a floor of tens of MiB under every figure.
TRAMPOLINE = """
import os, sys, time
result, timeout, *command = sys.argv[1:]
start = time.perf_counter()
pid = os.posix_spawnp(command[0], command, os.environ)
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(status)
        break
    if time.perf_counter() - start > float(timeout):
        os.kill(pid, 9)
        _, _, usage = os.wait4(pid, 0)
        code = "timeout"
        break
    time.sleep(0.005)
with open(result, "w") as out:
    out.write(f"{time.perf_counter() - start} {usage.ru_maxrss} {code}")
"""


def measure(command: list[str], timeout: float, env: dict[str, str] | None = None) -> Run:
    """One fresh process: wall time, its peak RSS (os.wait4), exit code and output."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        result, log = Path(scratch, "result"), Path(scratch, "output")
        with log.open("wb") as sink:
            subprocess.run([sys.executable, "-I", "-S", "-c", TRAMPOLINE, str(result),
                            str(timeout), *command], stdout=sink, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env=env or os.environ, check=True)
        wall, peak_kib, code = result.read_text().split()
        output = log.read_text(errors="replace")
    return Run(float(wall), int(peak_kib) / 1024, None if code == "timeout" else int(code),
               output, load)


def warm_page_cache(path: Path) -> None:
    """Read the dump's data (not its holes) so that each tool starts from the same page cache.

    A VM with less page cache than the dump keeps only part of it: without this, whichever tool
    ran second would find the file read for it by the first."""
    with path.open("rb") as dump:
        fd, end = dump.fileno(), os.fstat(dump.fileno()).st_size
        offset = 0
        while offset < end:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:  # nothing but a hole up to the end
                break
            stop = os.lseek(fd, start, os.SEEK_HOLE)
            while start < stop:
                start += len(os.pread(fd, min(16 << 20, stop - start), start))
            offset = stop


def find_cuda_gdb(given: str | None) -> str:
    for candidate in (given, os.environ.get("CRASHLAB_TEST_CUDA_GDB"),
                      str(ROOT / ".cuda-gdb" / "bin" / "cuda-gdb"), shutil.which("cuda-gdb")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("bench_vs_cuda_gdb: no cuda-gdb (run .ci/get-cuda-gdb or pass --cuda-gdb)")


def gdb_verdict(run: Run) -> str:
    """'ok', or why this cuda-gdb run does not count as having read the dump."""
    if run.exit_code is None:
        return "timed out"
    failure = GDB_FAILURE.search(run.output)
    if failure:
        line = run.output[run.output.rfind("\n", 0, failure.start()) + 1:].split("\n", 1)[0]
        return line.strip()[:160]
    if run.exit_code != 0:
        return f"exit {run.exit_code}"
    if not re.search(r"^#0 ", run.output, re.M):
        return "no backtrace"
    return "ok"


def dump_path(name: str, keep: Path) -> Path:
    if name == "moe_align":
        return FIXTURE
    path = keep / f"{name}.nvcudmp"
    if not path.exists():
        # A child builds it: a parent holding the description would inflate later children's RSS.
        subprocess.run([sys.executable, __file__, "--build", name, str(path)], check=True)
    return path


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda run: run.wall_s)[len(runs) // 2]


def breakdown(repeat: int, python: dict[str, str]) -> None:
    """Median wall time of each part of ``crashlab inspect`` on the small dump, each alone."""
    from crashlab.sass.listing import find_nvdisasm

    nvdisasm, _ = find_nvdisasm()
    cubin = ROOT / "fixtures" / "cubins" / "moe_align.sm_90.cubin"  # the code in FIXTURE
    parts = {
        "interpreter start (python -c pass)": [sys.executable, "-c", "pass"],
        "interpreter + import crashlab.cli": [sys.executable, "-c", "import crashlab.cli"],
        "nvdisasm -c -gi -ndf on the cubin alone": [nvdisasm, "-c", "-gi", "-ndf", str(cubin)],
        "crashlab inspect --no-sass": [*CRASHLAB_INSPECT, "--no-sass", str(FIXTURE)],
        "crashlab inspect": [*CRASHLAB_INSPECT, str(FIXTURE)],
    }
    for label, command in parts.items():
        runs = [measure(command, 600, python) for _ in range(repeat)]
        run = median_run(runs)
        print(f"  {label:<42} {run.wall_s:5.2f} s {run.peak_mib:5.0f} MiB  load {run.load:.1f}")


def main() -> None:
    if sys.argv[1:2] == ["--build"]:
        _, _, name, path = sys.argv
        write(grid_spec(**BUILT[name]), path)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["moe_align", *BUILT])
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "crashlab-bench")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds cuda-gdb may take")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--repeat-below", type=int, default=100_000,
                        help="dumps with fewer sections are run --repeat times")
    parser.add_argument("--cuda-gdb")
    parser.add_argument("--breakdown", action="store_true",
                        help="first time the parts of crashlab's run on the small dump")
    args = parser.parse_args()
    gdb = find_cuda_gdb(args.cuda_gdb)
    args.keep.mkdir(parents=True, exist_ok=True)
    # crashlab as an installed package runs: from bytecode, kept out of the source tree.
    python = {name: value for name, value in os.environ.items()
              if name != "PYTHONDONTWRITEBYTECODE"}
    python["PYTHONPYCACHEPREFIX"] = str(args.keep / "pycache")
    measure([*CRASHLAB_INSPECT, str(FIXTURE)], 600, python)
    print(f"cores {os.cpu_count()}, cuda-gdb {gdb}")
    if args.breakdown:
        breakdown(args.repeat, python)
    print(f"{'dump':<24} {'sections':>9} {'size GiB':>8} | {'crashlab s':>10} {'MiB':>5} | "
          f"{'cuda-gdb s':>10} {'MiB':>6} | {'time x':>6} {'mem x':>6} | {'load':>4} | cuda-gdb")
    for case in CASES:
        if args.only and case.dump != args.only:
            continue
        path = dump_path(case.dump, args.keep)
        with ElfImage(path) as image:
            sections = image.section_count
        repeat = args.repeat if sections < args.repeat_below else 1
        ours, theirs = [], []
        gdb_command = [gdb, "-nx", "-batch", "-ex", f"target cudacore {path}"]
        for command in case.gdb_commands:
            gdb_command += ["-ex", command]
        for _ in range(repeat):  # alternate, so that both see the same load
            warm_page_cache(path)
            with tempfile.TemporaryDirectory() as cache:
                env = {**python, "XDG_CACHE_HOME": cache} if case.cold_cache else python
                ours.append(measure([*CRASHLAB_INSPECT, *case.crashlab_options, str(path)], 600,
                                    env))
            warm_page_cache(path)
            theirs.append(measure(gdb_command, args.timeout))
        mine, other = median_run(ours), median_run(theirs)
        verdict = gdb_verdict(other)
        if mine.exit_code not in (0, 1):
            verdict += f"; crashlab exit {mine.exit_code}: {mine.output.strip()[-160:]}"
        load = statistics.mean(run.load for run in ours + theirs)
        print(f"{case.label:<24} {sections:>9,} {path.stat().st_size / GIB:>8.2f} | "
              f"{mine.wall_s:>10.2f} {mine.peak_mib:>5.0f} | {other.wall_s:>10.2f} "
              f"{other.peak_mib:>6.0f} | {other.wall_s / mine.wall_s:>6.2f} "
              f"{other.peak_mib / mine.peak_mib:>6.1f} | {load:>4.1f} | {verdict}", flush=True)
    print("time x, mem x: cuda-gdb's figure over crashlab's (above 1: crashlab is faster/smaller);"
          " load: 1-minute load average while measuring")


if __name__ == "__main__":
    main()
