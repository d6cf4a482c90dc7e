"""Figures for crashlab around a REAL SGLang 0.5.23 server on CPU (the `sglang` test tier):
environment build time and size, server start time, serve's time from crash to report for each
crash kind, and the wall time of replay --repeat 2 and --minimize against fresh real servers.

    bash .ci/get-sglang                                  # the environment, once
    python benchmarks/bench_real_sglang.py [--starts 3] [--rebuild]

--rebuild builds the environment again in a temporary cache (about 3 minutes and 6.5 GB of
downloads) to time a fresh machine's cost; without it, the figure the last build wrote is shown.
The server, the crashes and the commands are those of tests/real_sglang (same launch line, same
traffic of 30 finished requests, same crashes); crashlab is the real command in its own process.
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

from tests.conftest import free_port  # noqa: E402
from tests.real_sglang import env, server  # noqa: E402
from tests.real_sglang.fixtures import KINDS, crash, server_environment  # noqa: E402


def environment_figure(rebuild: bool) -> str:
    if rebuild:
        with tempfile.TemporaryDirectory() as cache:
            os.environ["CRASHLAB_SGLANG_CACHE"] = cache
            where = env.build()
            said = (where / env.COMPLETE).read_text().strip()
            os.environ.pop("CRASHLAB_SGLANG_CACHE")
        return f"fresh build: {said}"
    where = env.ready()
    if where is None:
        raise SystemExit("no environment: run bash .ci/get-sglang first")
    return f"last build: {(where / env.COMPLETE).read_text().strip()}"


def start_times(sglang: Path, count: int) -> list[float]:
    """Launch to the first 200 from /health_generate, then a plain stop."""
    seconds = []
    for _ in range(count):
        port = free_port()
        with open(os.devnull, "wb") as quiet:
            process = subprocess.Popen(server.launch_args(sglang, port), stdout=quiet, stderr=quiet,
                                       env=server_environment(), start_new_session=True)
        try:
            seconds.append(server.wait_healthy(port, process))
        finally:
            os.killpg(process.pid, 9)
            process.wait()
    return seconds


def replay_wall(dump: Path, sglang: Path, *options: str) -> tuple[float, dict]:
    port = free_port()
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "crashlab", "replay", str(dump), "--url", server.url(port),
                           "--json", "--restart-cmd", server.shell_command(sglang, port), *options],
                          capture_output=True, cwd=ROOT)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr.decode(errors="replace"))
    return wall, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--rebuild", action="store_true")
    options = parser.parse_args()
    print(f"environment: {environment_figure(options.rebuild)}")
    sglang = env.ready()
    if options.starts:
        starts = start_times(sglang, options.starts)
        print(f"server start (launch to /health_generate 200), {len(starts)} starts: median "
              f"{statistics.median(starts):.1f} s ({min(starts):.1f}-{max(starts):.1f})")
    work = Path(tempfile.mkdtemp(prefix="bench-real-sglang-"))
    try:
        for kind in KINDS:
            (work / kind).mkdir()
        runs = {kind: crash(kind, sglang, work / kind) for kind in KINDS}
        for kind, run in runs.items():
            print(f"serve, {kind}: start {run.start_s:.1f} s; crash to report.json "
                  f"{run.crash_to_report_s:.1f} s; exit {run.exit_code}; headline: "
                  f"{run.report['summary'][:100]}")
        dump = runs["exception"].request_dump
        wall, result = replay_wall(dump, sglang, "--repeat", "2")
        divergences = sum(a["divergences"] for a in result["attempts"])
        print(f"replay --repeat 2 ({len(result['attempts'][0]['requests'])} requests): {wall:.1f} s, "
              f"reproduced {result['reproductions']}/{result['repeat']}, {divergences} divergent outputs")
        wall, result = replay_wall(dump, sglang, "--minimize", "--budget", "12", "-o", str(work / "min.pkl"))
        found = result["minimization"]
        print(f"replay --minimize: {wall:.1f} s, {found['original']} -> {len(found['minimal'])} "
              f"request(s) in {found['trials']} trials")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
