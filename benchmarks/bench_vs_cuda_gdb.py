"""``crashlab inspect`` against NVIDIA's cuda-gdb on every real dump: wall time and peak RSS.

    python benchmarks/bench_vs_cuda_gdb.py [--repeat 5] [--only NAME ...] [--before DIR]
                                           [--tree DIR] [--keep DIR] [--timeout 120] [--synthetic]

Every dump of fixtures/gpu/h200 (written by a real driver on an H200), in one run, each command
a fresh process, the median of --repeat runs (the runs of one dump alternate between the
commands, so that each sees the same load):

- crashlab: ``python -m crashlab inspect DUMP``, the terminal view into a pipe, SASS included,
  with a warm SASS cache (the listing a warm-up run stored: a user's second inspect of a kernel)
  and with an empty one (a fresh XDG_CACHE_HOME each run: nvdisasm runs); and ``inspect --json``
  with the warm cache;
- cuda-gdb 12.4 doing the same job, ``cuda-gdb -nx -batch -ex 'target cudacore DUMP' -ex bt
  -ex 'x/20i $pc'`` (it disassembles through the same nvdisasm), and its bare ``bt``;
- ``crashlab --help`` and ``python -c pass`` (the interpreter's own start).

cuda-gdb is $CRASHLAB_TEST_CUDA_GDB, ./.cuda-gdb/bin/cuda-gdb (.ci/get-cuda-gdb) or on PATH.
Peak RSS is os.wait4's for the measured process and the children it waited for (nvdisasm),
spawned by a small trampoline interpreter (see TRAMPOLINE). crashlab runs from bytecode cached
under --keep, as an installed package does, even where PYTHONDONTWRITEBYTECODE is set; --tree
runs the crashlab package of another checkout (``git archive`` of a commit, unpacked), and
--before runs another checkout's warm inspect alongside this one's, in the same rounds, for a
before/after figure under the same load. Before each command the dump is read once (warm_page_cache). A cuda-gdb
run that exits non-zero, times out, reports an internal error or prints no frame is a failure,
its first error line shown; crashlab's exit code is shown where it is not 0 or 1 (a cut dump is
refused with exit 2, in one line). ``--synthetic`` adds the builder's large SYNTHETIC dumps
(benchmarks/bench_inspect.py's shapes, cached in --keep), run once each. The goals of the speed
issue are checked at the end, each said met or missed by how much.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "fixtures" / "gpu" / "h200"
#: Builder dumps, by bench_inspect.grid_spec's shape arguments (--synthetic).
BUILT = ("2xh100", "8xh100+4GiB")
GDB_BT = ["bt"]
GDB_DISASSEMBLY = ["bt", "x/20i $pc"]
#: What marks a cuda-gdb run that did not read the dump (its messages, as 12.4 prints them).
GDB_FAILURE = re.compile(r"internal-error|internal to GDB|error=CUDBG_|failed to|No CUDA focus|"
                         r"^Error|is not a CUDA coredump|No stack", re.I | re.M)
#: The speed goals: seconds and MB on the 350-450 KB dumps, seconds on the 5 MB PyTorch dump.
SMALL_KB = (350, 450)
SMALL_SECONDS, SMALL_MB, TORCH_SECONDS = 0.12, 50, 0.25
EMPTY_OVER_WARM, JSON_OVER_TERMINAL, HELP_SECONDS = 2.0, 1.2, 0.05
MB = 1_000_000


@dataclass
class Run:
    wall_s: float
    #: user + system time of the process and the children it waited for (nvdisasm)
    cpu_s: float
    peak_mb: float
    exit_code: int | None  # None: killed at the timeout
    output: str
    load: float


#: Runs one command and writes "wall_s cpu_s peak_kib exit_code" (exit code "timeout" when killed) to
#: argv[1]. The measured process is spawned by this small interpreter, not by the benchmark: a
#: child's peak RSS starts at the RSS of the process it was forked from. No core file is written
#: (cuda-gdb 12.4 aborts on the cut dumps; writing its 20 MB core would be timed).
TRAMPOLINE = """
import os, resource, sys, time
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
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
    time.sleep(0.002)
with open(result, "w") as out:
    out.write(f"{time.perf_counter() - start} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss} {code}")
"""


def measure(command: list[str], timeout: float, env: dict[str, str], cwd: Path) -> Run:
    """One fresh process: wall time, its peak RSS (os.wait4), exit code and output."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        result, log = Path(scratch, "result"), Path(scratch, "output")
        with log.open("wb") as sink:
            subprocess.run([sys.executable, "-I", "-S", "-c", TRAMPOLINE, str(result),
                            str(timeout), *command], stdout=sink, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env=env, cwd=cwd, check=True)
        wall, cpu, peak_kib, code = result.read_text().split()
        output = log.read_text(errors="replace")
    return Run(float(wall), float(cpu), int(peak_kib) * 1024 / MB,
               None if code == "timeout" else int(code), output, load)


def warm_page_cache(path: Path) -> None:
    """Read the dump's data (not its holes) so that each tool starts from the same page cache."""
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
        return line.strip()[:100]
    if run.exit_code != 0:
        return f"exit {run.exit_code}"
    if not re.search(r"^#0 ", run.output, re.M):
        return "no backtrace"
    return "ok"


def median_run(runs: list[Run]) -> Run:
    """The median run by wall time, with the medians of CPU time and peak RSS."""
    middle = sorted(runs, key=lambda run: run.wall_s)[len(runs) // 2]
    return replace(middle, cpu_s=statistics.median(run.cpu_s for run in runs),
                   peak_mb=statistics.median(run.peak_mb for run in runs))


@dataclass
class Row:
    """One dump's medians."""

    name: str
    size: int
    warm: Run
    empty: Run
    json: Run
    gdb_bt: Run
    gdb_disassembly: Run
    #: the warm inspect of the --before checkout's crashlab, measured alongside
    before: Run | None = None


class Bench:
    def __init__(self, options: argparse.Namespace):
        self.options = options
        self.gdb = find_cuda_gdb(options.cuda_gdb)
        keep = options.keep
        keep.mkdir(parents=True, exist_ok=True)
        # crashlab as an installed package runs: from bytecode, kept out of the source tree, and
        # with a SASS cache of its own (the warm-up run of each dump fills it)
        self.env = {name: value for name, value in os.environ.items()
                    if name != "PYTHONDONTWRITEBYTECODE"}
        self.env.update(PYTHONPYCACHEPREFIX=str(keep / "pycache"), XDG_CACHE_HOME=str(keep / "cache"))
        # the --before checkout keeps a SASS cache of its own: where its cache format differs,
        # one shared folder would have each checkout rewrite the other's entries, both cold
        self.before_env = {**self.env, "XDG_CACHE_HOME": str(keep / "cache-before")}
        self.crashlab = [sys.executable, "-m", "crashlab"]

    def ours(self, args: list[str], env: dict[str, str] | None = None,
             tree: Path | None = None) -> Run:
        # the tree is the current folder: python -m imports its crashlab package
        env = env or (self.before_env if tree is not None else self.env)
        return measure([*self.crashlab, *args], 600, env, tree or self.options.tree)

    def theirs(self, dump: Path, commands: list[str]) -> Run:
        command = [self.gdb, "-nx", "-batch", "-ex", f"target cudacore {dump}"]
        for line in commands:
            command += ["-ex", line]
        return measure(command, self.options.timeout, os.environ.copy(), ROOT)

    def startup(self) -> tuple[Run, Run, Run | None]:
        """(``python -c pass``, ``crashlab --help``, the --before checkout's), medians."""
        before = self.options.before
        self.ours(["--help"])
        bare = [measure([sys.executable, "-c", "pass"], 60, self.env, self.options.tree)
                for _ in range(self.options.repeat)]
        helped, earlier = [], []
        for _ in range(self.options.repeat):
            helped.append(self.ours(["--help"]))
            if before:
                earlier.append(self.ours(["--help"], tree=before))
        return median_run(bare), median_run(helped), median_run(earlier) if before else None

    def dump(self, path: Path) -> Row:
        before = self.options.before
        self.ours(["inspect", str(path)])  # the warm-up run: fills the SASS cache and bytecode
        keys = ("warm", "empty", "json", "gdb_bt", "gdb_disassembly") + (("before",) if before else ())
        runs: dict[str, list[Run]] = {key: [] for key in keys}
        if before:
            self.ours(["inspect", str(path)], tree=before)
        for _ in range(self.options.repeat):
            warm_page_cache(path)
            runs["warm"].append(self.ours(["inspect", str(path)]))
            if before:
                runs["before"].append(self.ours(["inspect", str(path)], tree=before))
            runs["json"].append(self.ours(["inspect", "--json", str(path)]))
            with tempfile.TemporaryDirectory() as cache:
                runs["empty"].append(self.ours(["inspect", str(path)],
                                               {**self.env, "XDG_CACHE_HOME": cache}))
            warm_page_cache(path)
            runs["gdb_bt"].append(self.theirs(path, GDB_BT))
            runs["gdb_disassembly"].append(self.theirs(path, GDB_DISASSEMBLY))
        name = path.stem
        if path.is_relative_to(H200):  # the folder names the case; the file too where it has two
            twins = len(list(path.parent.glob("core.*.nvcudmp"))) > 1
            name = f"{path.parent.name} {path.stem}" if twins else path.parent.name
        return Row(name, path.stat().st_size, **{key: median_run(found) for key, found in runs.items()})


def dumps(only: list[str] | None) -> list[Path]:
    found = sorted(H200.glob("*/core.*.nvcudmp"), key=lambda path: (path.parent.name, path.name))
    named = [path for path in found if not only or path.parent.name in only]
    if only and not named:
        sys.exit(f"bench_vs_cuda_gdb: no dump of {H200.relative_to(ROOT)} is named {only}")
    return named


def synthetic(keep: Path) -> list[Path]:
    """The builder's large dumps, built once into --keep by a child process (a parent holding
    the description would inflate every later child's RSS)."""
    paths = []
    for name in BUILT:
        path = keep / f"{name}.nvcudmp"
        if not path.exists():
            subprocess.run([sys.executable, __file__, "--build", name, str(path)], check=True)
        paths.append(path)
    return paths


def build(name: str, path: str) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_inspect import SIZES, grid_spec
    from tests.coredump_builder import write

    write(grid_spec(**SIZES[name]), path)


def seconds(run: Run) -> str:
    return f"{run.wall_s:.3f} s (cpu {run.cpu_s:.3f})"


def ours_cell(run: Run) -> str:
    refused = "" if run.exit_code in (0, 1) else f" (exit {run.exit_code})"
    return f"{seconds(run)}, {run.peak_mb:.0f} MB{refused}"


def theirs_cell(run: Run) -> str:
    verdict = gdb_verdict(run)
    said = "" if verdict == "ok" else f" ({verdict.replace('|', '/')})"
    return f"{seconds(run)}, {run.peak_mb:.0f} MB{said}"


def table(rows: list[Row]) -> list[str]:
    before = any(row.before for row in rows)
    lines = ["| dump | size | crashlab inspect, warm SASS cache "
             + ("| before (--before), warm " if before else "")
             + "| empty cache | `--json` (warm) | cuda-gdb `bt` | cuda-gdb `bt` + `x/20i $pc` |",
             "|---|--:|--:|--:|--:|--:|--:|" + ("--:|" if before else "")]
    for row in rows:
        earlier = f"| {ours_cell(row.before)} " if row.before else ""
        lines.append(
            f"| {row.name} | {row.size / 1000:,.0f} KB | {ours_cell(row.warm)} {earlier}"
            f"| {seconds(row.empty)}, {row.empty.wall_s / row.warm.wall_s:.1f}x, "
            f"{row.empty.peak_mb:.0f} MB | {seconds(row.json)}, "
            f"{row.json.wall_s / row.warm.wall_s - 1:+.0%} | {theirs_cell(row.gdb_bt)} "
            f"| {theirs_cell(row.gdb_disassembly)} |")
    return lines


def goals(rows: list[Row], helped: Run, clock: str) -> list[str]:
    """Each goal, met or missed by how much, over the dumps crashlab reads (exit 0 or 1), its
    times read on ``clock``: "wall_s" (the goals' own terms) or "cpu_s" (what a loaded machine
    leaves of them)."""
    read = [row for row in rows if row.warm.exit_code in (0, 1)]
    small = [row for row in read if SMALL_KB[0] <= round(row.size / 1000) <= SMALL_KB[1]]
    torch = [row for row in read if row.name.startswith("torch_flash_oob.")]
    said = []

    def time(run: Run) -> float:
        return getattr(run, clock)

    def check(what: str, worst: float, bound: float, unit: str, where: str) -> None:
        if worst <= bound:
            said.append(f"- {what}: met (worst {worst:.3g}{unit}, {where})")
        else:
            said.append(f"- {what}: **missed** by {worst - bound:.3g}{unit} "
                        f"(worst {worst:.3g}{unit}, {where}; {worst / bound:.1f}x the goal)")

    if small:
        slow = max(small, key=lambda row: time(row.warm))
        check(f"warm cache at most {SMALL_SECONDS} s on the {len(small)} dumps of 350-450 KB",
              time(slow.warm), SMALL_SECONDS, " s", slow.name)
        big = max(small, key=lambda row: row.warm.peak_mb)
        check(f"at most {SMALL_MB} MB on them", big.warm.peak_mb, SMALL_MB, " MB", big.name)
    for row in torch:
        check(f"warm cache at most {TORCH_SECONDS} s on the 5 MB PyTorch dump", time(row.warm),
              TORCH_SECONDS, " s", row.name)
    if read:
        ratio = max(read, key=lambda row: time(row.empty) / time(row.warm))
        check(f"empty cache at most {EMPTY_OVER_WARM:g}x the warm time",
              time(ratio.empty) / time(ratio.warm), EMPTY_OVER_WARM, "x", ratio.name)
        fat = max(read, key=lambda row: row.warm.peak_mb / min(row.gdb_bt.peak_mb,
                                                               row.gdb_disassembly.peak_mb))
        check("memory at most cuda-gdb's (the smaller of its two runs) on every dump",
              fat.warm.peak_mb / min(fat.gdb_bt.peak_mb, fat.gdb_disassembly.peak_mb), 1.0, "x",
              fat.name)
        slow_json = max(read, key=lambda row: time(row.json) / time(row.warm))
        check(f"--json within {JSON_OVER_TERMINAL - 1:.0%} of the terminal view",
              time(slow_json.json) / time(slow_json.warm), JSON_OVER_TERMINAL, "x",
              slow_json.name)
    check(f"crashlab --help under {HELP_SECONDS * 1000:.0f} ms", time(helped), HELP_SECONDS, " s",
          "median")
    return said


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
                 platform.processor())
    memory = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))
    return (f"{os.cpu_count()} cores ({model}), {memory / 2**20:.0f} GiB, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}")


def main() -> None:
    if sys.argv[1:2] == ["--build"]:
        build(*sys.argv[2:4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="dumps by folder name under fixtures/gpu/h200 (null_argument.explain)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout whose crashlab runs")
    parser.add_argument("--before", type=Path,
                        help="another checkout whose warm inspect runs alongside, for before/after")
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "crashlab-bench")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds cuda-gdb may take")
    parser.add_argument("--cuda-gdb")
    parser.add_argument("--synthetic", action="store_true",
                        help="also the builder's 562k- and 2.25M-section dumps, once each")
    options = parser.parse_args()
    bench = Bench(options)
    version = subprocess.run([bench.gdb, "--version"], capture_output=True, text=True,
                             check=False).stdout.splitlines()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the start")
    print(f"cuda-gdb: {version[0] if version else bench.gdb}; crashlab from {options.tree}; "
          f"median of {options.repeat} fresh processes per figure")
    bare, helped, earlier = bench.startup()
    print(f"python -c pass {bare.wall_s * 1000:.0f} ms (cpu {bare.cpu_s * 1000:.0f}); crashlab "
          f"--help {helped.wall_s * 1000:.0f} ms (cpu {helped.cpu_s * 1000:.0f}), "
          f"{helped.peak_mb:.0f} MB" + (f"; before: {earlier.wall_s * 1000:.0f} ms (cpu "
                                        f"{earlier.cpu_s * 1000:.0f})" if earlier else ""),
          flush=True)
    rows = []
    for path in dumps(options.only):
        rows.append(bench.dump(path))
        print(table(rows[-1:])[-1], f"load {os.getloadavg()[0]:.1f}", flush=True)
    if options.synthetic:
        repeat, options.repeat = options.repeat, 1
        for path in synthetic(options.keep):
            print(table([bench.dump(path)])[-1] + " (SYNTHETIC, once)", flush=True)
        options.repeat = repeat
    print()
    print("\n".join(table(rows)))
    for clock, said in (("wall_s", "wall time"), ("cpu_s", "CPU time (user + system)")):
        print(f"\ngoals, on {said}:")
        print("\n".join(goals(rows, helped, clock)))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
