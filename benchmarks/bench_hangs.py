"""What reading a hang across ranks costs: crashlab.read_hang on a capture of real gloo ranks.

    python benchmarks/bench_hangs.py [--ranks 8] [--samples 3] [--repeat 5] [--keep DIR]

Needs the SGLang environment (tests/real_sglang/env.py: its torch 2.14.1 and py-spy). Starts
RANKS ranks of tests/gloo_hang/workload.py on this CPU (rank 2 skips an all_reduce, the others
wait in it), takes SAMPLES host samples of each (py-spy dump --native, the Flight Recorder pickle
through the rank's WorkerServer), writes each rank's GPU dump (SYNTHETIC, tests/coredump_builder.py),
stops the ranks, then times the reading in-process: with the GPU dumps (each triaged by inspect,
SASS included) and without, best and median of REPEAT runs. Also printed: the capture's size and
how long taking it took here (the capture itself is serve's and dump-now's, not this script's).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import crashlab  # noqa: E402
from tests.gloo_hang.capture import (  # noqa: E402
    capture,
    gpu_dumps,
    py_spy_of,
    python_of,
    start,
    wait_ready,
)
from tests.real_sglang import env  # noqa: E402


def timed(action, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        begun = time.perf_counter()
        action()
        times.append(time.perf_counter() - begun)
    return min(times), statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="write the capture here and keep it")
    options = parser.parse_args()
    where = env.ready()
    if where is None:
        print(f"no SGLang environment at {env.folder()} (build it with .ci/get-sglang)", file=sys.stderr)
        return 3
    root = options.keep or Path(tempfile.mkdtemp(prefix="crashlab-bench-hangs-"))
    run_dir = root / f"{options.ranks}-ranks"
    begun = time.perf_counter()
    hung = start(python_of(where), "skip", run_dir / "processes", world=options.ranks)
    try:
        wait_ready(hung, timeout=600)
        started = time.perf_counter() - begun
        begun = time.perf_counter()
        folder = capture(hung, run_dir, tool=py_spy_of(where), samples=options.samples,
                         gpu_dumps=gpu_dumps(run_dir, list(hung.processes)))
        took = time.perf_counter() - begun
    finally:
        hung.stop()
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    reading = crashlab.read_hang(run_dir)
    print(f"{options.ranks} ranks x {options.samples} host samples: capture {size / 1e6:.2f} MB "
          f"(+ {options.ranks} GPU dumps), taken in {took:.1f} s here after {started:.1f} s of start")
    print(f"verdict: {reading.verdicts[0].line if reading.verdicts else 'none'}")
    best, median = timed(lambda: crashlab.read_hang(run_dir), options.repeat)
    print(f"read_hang with the GPU dumps: {best:.3f} s best, {median:.3f} s median of {options.repeat}")
    best, median = timed(lambda: crashlab.read_hang(run_dir, gpu_dumps=False), options.repeat)
    print(f"read_hang without them:       {best:.3f} s best, {median:.3f} s median of {options.repeat}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
