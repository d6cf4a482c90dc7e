"""Figures for ``crashlab report``: bundle size and wall time on stand-in runs.

    python benchmarks/bench_report.py [--repeat 3]

Each run is a real ``crashlab serve`` of the STAND-IN SGLang server of tests/standin (its
coredumps are the SYNTHETIC ones of fixtures/synthetic): a GPU fault on one of two ranks (a FAULT
and a COLLATERAL coredump, a request dump), a child's SIGSEGV (no coredump, a request dump), and
a crash after a flood of 200,000 log lines. ``crashlab report`` runs on each in a process of its
own, with the default budget, with --anonymize, and with a 40 kB budget that leaves the
coredumps out. Times are the median wall time of ``python -m crashlab report`` (start-up
included); sizes are the bundle's and the body's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.serve_harness import FAST, Serve, environment, free_port, sglang  # noqa: E402

RUNS = {
    "GPU fault, 2 ranks": (("--tp-size", "2"), dict(crash="gpu-fault")),
    "child SIGSEGV": ((), dict(crash="child-segv")),
    "SIGSEGV after 200,000 log lines": ((), dict(crash="segv", log_lines="200000")),
}
VARIANTS = {"default": (), "--anonymize": ("--anonymize",), "--max-size 40k": ("--max-size", "40k")}


def crashed_run(folder: Path, extra: tuple, standin: dict) -> Path:
    port = free_port()
    folder.mkdir(parents=True)
    serve = Serve(folder, sglang(port, *extra), *FAST, "--quiet", env=environment(**standin))
    serve.wait_healthy()
    requests.post(f"http://127.0.0.1:{port}/generate", timeout=10,
                  json={"text": "Hello", "sampling_params": {"max_new_tokens": 3}})
    serve.finish()
    return serve.run_dir


def measure(run: Path, options: tuple, out: Path, repeat: int) -> tuple[float, dict]:
    times, issue = [], {}
    for attempt in range(repeat):
        target = out / str(attempt)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "crashlab", "report", str(run), "--out",
                               str(target), "--json", *options], capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr.decode())
        issue = json.loads(done.stdout)
    return statistics.median(times), issue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for number, (name, (extra, standin)) in enumerate(RUNS.items()):
            run = crashed_run(Path(scratch) / f"serve-{number}", extra, standin)
            evidence = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
            for variant, options in VARIANTS.items():
                seconds, issue = measure(run, options, Path(scratch) / f"out-{number}-{variant}",
                                         args.repeat)
                rows.append((name, evidence, variant, issue["bundle_bytes"], len(issue["members"]) + 2,
                             len(issue["left_out"]), issue["body_chars"], seconds))
    print("| run | run directory | report | bundle | members | left out | body chars | wall time |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, evidence, variant, size, members, left, body, seconds in rows:
        print(f"| {name} | {evidence:,} B | `{variant}` | {size:,} B | {members} | {left} | "
              f"{body:,} | {seconds:.2f} s |")


if __name__ == "__main__":
    main()
