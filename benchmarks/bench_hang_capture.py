"""Figures for a hang capture: how long it takes and how much it writes, by ranks and with py-spy on
or off, and what it costs the server meanwhile (p50/p99 of its /health answers during the capture
against the same requests without one).

    python benchmarks/bench_hang_capture.py [--ranks 2 4 8] [--samples 3] [--interval 1]

The server is tests/hang_job.py run by the SGLang environment's Python (a REAL torch.distributed
job of N CPU ranks over gloo; its Flight Recorder pipe, /health and RAS listener are the stand-ins
labelled there) under the real ``crashlab serve``, left running (not hung, so that /health
answers); the capture is the real ``crashlab dump-now --no-gpu-dump`` (no GPU here: the GPU dumps
are not measured). py-spy is the environment's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port  # noqa: E402
from tests.real_sglang import env as sglang_env  # noqa: E402


def wait_for(predicate, what: str, timeout: float = 600.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


class Prober:
    """GET /health in a loop from a thread, each answer's latency kept (a timeout counts as its
    timeout)."""

    def __init__(self, url: str, timeout: float = 5.0):
        self.url, self.timeout = url, timeout
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with requests.Session() as session:
            while not self._stop.is_set():
                started = time.monotonic()
                with contextlib.suppress(requests.RequestException):
                    session.get(self.url, timeout=self.timeout)
                self.latencies.append(time.monotonic() - started)
                self._stop.wait(0.05)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _linked(run: Path, number: int) -> dict:
    """The manifest's link to the run's NUMBER-th capture, once serve has written it whole."""
    def linked():
        captures = manifest(run)["captures"]
        return captures[-1] if len(captures) == number and captures[-1]["ended_at"] else None
    return wait_for(linked, "the capture's link")


def one_server(python: Path, ranks: int, samples: int, interval: float, runs: Path,
               environ: dict) -> list[dict]:
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "crashlab", "serve", "--runs-dir", str(runs), "--health-url",
         f"http://127.0.0.1:{port}/health", "--health-interval", "1", "--quiet", "--",
         str(python), str(ROOT / "tests" / "hang_job.py"), "--world", str(ranks), "--port",
         str(port), "--master-port", str(free_port()), "--hang-step", "1000000000", "--ras"],
        cwd=ROOT, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []
    try:
        run = wait_for(lambda: next(iter(runs.glob("*/manifest.json")), None), "the run").parent
        wait_for(lambda: manifest(run)["incarnations"] and
                 manifest(run)["incarnations"][0]["health"]["state"] == "healthy", "healthy")
        time.sleep(3.0)
        url = f"http://127.0.0.1:{port}/health"
        with Prober(url) as quiet:
            time.sleep(10.0)
        for number, py_spy in enumerate((True, False), start=1):
            with Prober(url) as busy:
                started = time.monotonic()
                done = subprocess.run(
                    [sys.executable, "-m", "crashlab", "dump-now", str(run), "--no-gpu-dump",
                     "--samples", str(samples), "--interval", str(interval),
                     *([] if py_spy else ["--no-py-spy"])],
                    cwd=ROOT, env=environ, capture_output=True, text=True, timeout=600)
                seconds = time.monotonic() - started
            if done.returncode != 0:
                raise RuntimeError(done.stderr)
            link = _linked(run, number)
            rows.append({"ranks": ranks, "py_spy": py_spy, "seconds": seconds,
                         "size_bytes": link["size_bytes"], "rows": link["rows"],
                         "quiet_p50": percentile(quiet.latencies, 0.5),
                         "quiet_p99": percentile(quiet.latencies, 0.99),
                         "busy_p50": percentile(busy.latencies, 0.5),
                         "busy_p99": percentile(busy.latencies, 0.99),
                         "busy_max": max(busy.latencies), "requests": len(busy.latencies)})
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(120)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    where = sglang_env.ready()
    if where is None:
        print(f"no SGLang environment at {sglang_env.folder()} (.ci/get-sglang builds it)")
        return 2
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "TORCH_", "NCCL_"))}
    environ["PATH"] = os.pathsep.join([str(where / "bin"), environ.get("PATH", "")])
    print(f"{args.samples} host samples {args.interval:g} s apart, --no-gpu-dump; "
          f"{os.cpu_count()} CPUs")
    print("ranks py-spy  capture s   size kB  rows                      /health p50/p99 ms quiet -> during capture (max)")
    for ranks in args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            for row in one_server(where / "bin" / "python", ranks, args.samples, args.interval,
                                  Path(tmp) / "runs", environ):
                print(f"{row['ranks']:5d} {'on ' if row['py_spy'] else 'off':6s} "
                      f"{row['seconds']:9.1f} {row['size_bytes'] / 1000:9.1f}  "
                      f"{json.dumps(row['rows']):24s}  "
                      f"{row['quiet_p50'] * 1000:5.1f}/{row['quiet_p99'] * 1000:6.1f} -> "
                      f"{row['busy_p50'] * 1000:6.1f}/{row['busy_p99'] * 1000:7.1f} "
                      f"({row['busy_max'] * 1000:.0f}; {row['requests']} requests)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
