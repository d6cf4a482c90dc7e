"""Figures for ``crashlab serve``: crash-to-report latency, supervisor CPU (idle and under a log
flood, with no line lost), supervisor memory over a long run.

    python benchmarks/bench_serve.py latency [--repeat 5]
    python benchmarks/bench_serve.py idle    [--seconds 60]
    python benchmarks/bench_serve.py flood   [--rate 50000] [--seconds 20]
    python benchmarks/bench_serve.py memory  [--minutes 3]
    python benchmarks/bench_serve.py all

The servers are the STAND-INS of tests/standin (an SGLang-like server, a CUDA driver writing a
SYNTHETIC coredump) or small Python scripts; crashlab is the real command in a process of its
own. CPU and memory are crashlab's own process (psutil), never the server's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.serve_harness import environment, free_port, sglang  # noqa: E402


def crashlab_serve(runs: Path, command: list[str], *options: str, env: dict | None = None,
                   output=subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "crashlab", "serve", "--runs-dir", str(runs),
                             *options, "--", *command], cwd=ROOT, env=env or environment(),
                            stdout=output, stderr=subprocess.DEVNULL)


def run_dir(runs: Path, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(runs.glob("*/manifest.json"))
        if found:
            return found[0].parent
        time.sleep(0.05)
    raise RuntimeError("no run directory appeared")


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def wait_healthy(run: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        incarnations = manifest(run)["incarnations"]
        if incarnations and incarnations[-1]["health"]["state"] == "healthy":
            return
        time.sleep(0.1)
    raise RuntimeError("the server never became healthy")


def stamp(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


# -- crash-to-report latency ----------------------------------------------------------------

ABORT = "import os, sys, time; print('CRASH_AT %.6f' % time.time(), file=sys.stderr, flush=True); os.abort()"


def _latency_once(scenario: str, work: Path) -> tuple[float, float]:
    """(crash -> report.json, server gone -> report.json) in seconds."""
    runs = work / "runs"
    if scenario == "abort":
        proc = crashlab_serve(runs, [sys.executable, "-c", ABORT], "--quiet")
    else:
        ranks = "1" if scenario == "gpu-1" else "2"
        env = environment(crash="gpu-fault", crash_on="start", dump_seconds="0.05")
        env["SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS"] = "0.5"  # room for the collateral dump
        proc = crashlab_serve(runs, sglang(free_port(), "--tp-size", ranks), "--quiet",
                              "--health-interval", "1", env=env)
    proc.wait(timeout=300)
    run = run_dir(runs)
    data = manifest(run)
    incarnation = data["incarnations"][0]
    report_at = (run / "report.json").stat().st_mtime
    root = incarnation["processes"][0]
    gone = stamp(root["ended_at"])
    if scenario == "abort":
        log = (run / "incarnation-1" / "stderr.log").read_text()
        crash = float(log.split("CRASH_AT ", 1)[1].split()[0])
    else:  # the faulting rank's dump is finished right before the driver aborts it
        fault = next(f for f in data["files"] if f["kind"] == "coredump")
        crash = (run / fault["path"]).stat().st_mtime
    return report_at - crash, report_at - gone


def latency(repeat: int) -> None:
    print(f"crash-to-report latency, {repeat} runs each (median, min-max):")
    labels = {"abort": "process aborts, no coredump",
              "gpu-1": "1 rank faults, 1 lightweight dump (stand-in driver), SGLang crash path",
              "gpu-2": "2 ranks: FAULT dump + COLLATERAL dump, SGLang crash path"}
    for scenario, label in labels.items():
        totals, own = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as work:
                total, part = _latency_once(scenario, Path(work))
                totals.append(total)
                own.append(part)
        print(f"  {label}")
        print(f"    crash -> report.json:           {statistics.median(totals):6.2f} s "
              f"({min(totals):.2f}-{max(totals):.2f})")
        print(f"    server gone -> report.json:     {statistics.median(own):6.2f} s "
              f"({min(own):.2f}-{max(own):.2f})  (crashlab's own part)")


# -- idle CPU -----------------------------------------------------------------------------------

def idle(seconds: float) -> None:
    with tempfile.TemporaryDirectory() as work:
        runs = Path(work) / "runs"
        proc = crashlab_serve(runs, sglang(free_port(), "--tp-size", "2"), "--quiet")
        try:
            run = run_dir(runs)
            wait_healthy(run)
            me = psutil.Process(proc.pid)
            before, start = cpu_seconds(me), time.monotonic()
            time.sleep(seconds)
            used, elapsed = cpu_seconds(me) - before, time.monotonic() - start
            rss = me.memory_info().rss
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
    print(f"supervisor at idle (stand-in SGLang, TP 2, default options: health every 10 s), "
          f"{elapsed:.0f} s: CPU {100 * used / elapsed:.2f}% of one core, RSS {rss / 2**20:.0f} MiB")


# -- log flood ----------------------------------------------------------------------------------

FLOOD = textwrap.dedent("""
    import sys, time
    rate, seconds = int(sys.argv[1]), float(sys.argv[2])
    out = sys.stdout
    batch = max(1, rate // 100)
    total, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        lines = []
        for _ in range(batch):
            total += 1
            if total % 10000 == 0:
                lines.append("RuntimeError: CUDA error: an illegal memory access was encountered\\n")
            else:
                lines.append("[2026-01-01 00:00:00 TP0] Decode batch. #running-req: 32, #token: %09d, gen throughput (token/s): 1234.56\\n" % total)
        out.write("".join(lines))
        out.flush()
        ahead = total / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    print("FLOOD_DONE %d %.3f" % (total, time.monotonic() - start), file=sys.stderr, flush=True)
""")


def flood(rate: int, seconds: float, echo: bool) -> None:
    with tempfile.TemporaryDirectory() as work:
        runs = Path(work) / "runs"
        options = () if echo else ("--quiet",)
        with open(os.devnull, "wb") as sink:
            proc = crashlab_serve(runs, [sys.executable, "-c", FLOOD, str(rate), str(seconds)], *options,
                                  output=sink)
            me = psutil.Process(proc.pid)
            run = run_dir(runs)
            stdout_log = run / "incarnation-1" / "stdout.log"
            stderr_log = run / "incarnation-1" / "stderr.log"
            start = end = None
            peak = 0
            while proc.poll() is None and end is None:  # CPU from the first line to the last
                try:
                    sample = (time.monotonic(), cpu_seconds(me))
                    peak = max(peak, me.memory_info().rss)
                except psutil.Error:
                    break
                if start is None and stdout_log.exists() and stdout_log.stat().st_size:
                    start = sample
                if start is not None and "FLOOD_DONE" in stderr_log.read_text():
                    end = sample
                time.sleep(0.2)
            proc.wait(timeout=120)
        incarnation = manifest(run)["incarnations"][0]
        written, took = stderr_log.read_text().split("FLOOD_DONE ", 1)[1].split()[:2]
        written, took = int(written), float(took)
        numbers = []
        faults = 0
        with open(stdout_log) as log:
            for line in log:
                if line.startswith("RuntimeError"):
                    faults += 1
                    numbers.append(None)
                else:
                    numbers.append(int(line.split("#token: ", 1)[1].split(",", 1)[0]))
        in_order = all(n == i + 1 for i, n in enumerate(numbers) if n is not None)
        found = len(incarnation["findings"]) + incarnation["omitted_findings"]
    cpu = 100 * (end[1] - start[1]) / (end[0] - start[0])
    print(f"log flood ({'echo to /dev/null' if echo else '--quiet'}): {written:,} lines in {took:.1f} s "
          f"= {written / took:,.0f} lines/s (asked {rate:,}/s); logged {len(numbers):,}, lost "
          f"{written - len(numbers)}, in order: {in_order}; fault lines {faults}, findings {found}; "
          f"crashlab CPU during the flood {cpu:.0f}% of one core, peak RSS {peak / 2**20:.0f} MiB")


# -- memory over a long run ---------------------------------------------------------------------

CHATTY = textwrap.dedent("""
    import subprocess, sys, time
    seconds = float(sys.argv[1])
    start, n, helpers = time.monotonic(), 0, []
    while time.monotonic() - start < seconds:
        for _ in range(200):
            n += 1
            print("[2026-01-01 00:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: %d" % n)
        if n % 2000 == 0:
            print("CUDA error: an illegal memory access was encountered")
            print("Traceback (most recent call last):\\n  File \\"x.py\\", line 1, in f\\n    f()\\nRuntimeError: boom")
        sys.stdout.flush()
        helpers = [h for h in helpers if h.poll() is None]  # reap the finished ones
        helpers.append(subprocess.Popen(["sleep", "0.5"]))  # the tree keeps changing
        time.sleep(0.1)
""")


def memory(minutes: float) -> None:
    seconds = minutes * 60
    with tempfile.TemporaryDirectory() as work:
        runs = Path(work) / "runs"
        proc = crashlab_serve(runs, [sys.executable, "-c", CHATTY, str(seconds)], "--quiet",
                              "--health-url", f"http://127.0.0.1:{free_port()}/health",
                              "--health-interval", "1", "--health-timeout", "1")
        me = psutil.Process(proc.pid)
        samples = []
        start = time.monotonic()
        cpu = 0.0
        while proc.poll() is None:
            try:
                samples.append((time.monotonic() - start, me.memory_info().rss))
                cpu = cpu_seconds(me)
            except psutil.Error:
                break
            time.sleep(5)
        run = run_dir(runs)
        incarnation = manifest(run)["incarnations"][0]
    marks = [10.0] + [60.0 * m for m in range(1, int(minutes) + 1)]
    at = [next((rss for t, rss in samples if t >= mark), samples[-1][1]) for mark in marks]
    rss_line = ", ".join(f"{rss / 2**20:.1f} MiB at {mark:g} s"
                         for mark, rss in zip(marks, at, strict=True))
    peak = max(rss for _, rss in samples)
    print(f"memory over {minutes:g} min (2,000 log lines/s with faults and tracebacks, a helper "
          f"process (0.5 s) started every 0.1 s, health every 1 s against a closed port): RSS "
          f"{rss_line}, {samples[-1][1] / 2**20:.1f} MiB at the end, peak {peak / 2**20:.1f} MiB; "
          f"{len(incarnation['processes'])} process records kept, {incarnation['forgotten_processes']} "
          f"forgotten; findings {len(incarnation['findings'])} kept, {incarnation['omitted_findings']} "
          f"counted; crashlab CPU {100 * cpu / samples[-1][0]:.0f}% of one core on average")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["latency", "idle", "flood", "memory", "all"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--rate", type=int, default=50_000)
    parser.add_argument("--minutes", type=float, default=3.0)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, crashlab from {ROOT}")
    if shutil.which("nvdisasm") is None:
        print("(nvdisasm not on PATH: crashlab finds the pip wheel's copy itself)")
    if args.what in ("latency", "all"):
        latency(args.repeat)
    if args.what in ("idle", "all"):
        idle(args.seconds or 60)
    if args.what in ("flood", "all"):
        flood(args.rate, args.seconds or 20, echo=False)
        flood(args.rate, args.seconds or 20, echo=True)
    if args.what in ("memory", "all"):
        memory(args.minutes)


if __name__ == "__main__":
    main()
