"""Figures for ``crashlab ui``: the time to serve each page kind over an index of
100,000 crashes (bench_index.fill: 500 signatures, 64 hosts, 200 crashes a signature), on SQLite
and PostgreSQL, and the server process's memory.

    python benchmarks/bench_ui.py [--crashes 100000] [--runs 7]

A real ``crashlab ui`` process on 127.0.0.1 is asked each page --runs times with requests (after
one request that warms it); median and best wall time per page. Its resident memory (RSS,
psutil) is read after start-up and after every page was served. The crashes' run directories
do not exist, so a crash page shows no triage: the triage's own cost is inspect's
(bench_inspect.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_index import _load, fill, postgres  # noqa: E402
from crashlab.index import Index  # noqa: E402
from tests.ui_fleet import UiServer  # noqa: E402


def _pages(crashes: int) -> dict[str, str]:
    last_day = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1.7e9 + crashes - 86400))
    return {"home, every crash (?since=all)": "/?since=all",
            "home, the last day's crashes": f"/?since={last_day}",
            "signature (200 crashes)": f"/signature/{7:012x}",
            "crash": f"/crash/{crashes // 2}",
            "incident of a crash": f"/crash/{crashes // 2}/incident"}


def bench(address: str, crashes: int, runs: int) -> None:
    fill(address, crashes)
    with Index(address) as index, index.backend.transaction():  # as serve records them
        index.backend.execute("UPDATE crashes SET first_failure_at = crashed_at")
    server = UiServer(address)
    try:
        process = psutil.Process(server.process.pid)
        started = process.memory_info().rss
        for name, path in _pages(crashes).items():
            assert requests.get(server.url + path, timeout=300).status_code == 200, path
            times = []
            for _ in range(runs):
                begun = time.perf_counter()
                requests.get(server.url + path, timeout=300).raise_for_status()
                times.append(time.perf_counter() - begun)
            print(f"  {name}: median {statistics.median(times) * 1000:.0f} ms, "
                  f"best {min(times) * 1000:.0f} ms")
        print(f"  server RSS: {started / 2**20:.0f} MiB after start-up, "
              f"{process.memory_info().rss / 2**20:.0f} MiB after every page")
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crashes", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    with postgres() as server, tempfile.TemporaryDirectory() as folder:
        for name, address in [("SQLite", str(Path(folder) / "ui.sqlite")),
                              ("PostgreSQL", server.create_database("ui"))]:
            print(f"{name} ({_load()}):")
            bench(address, options.crashes, options.runs)


if __name__ == "__main__":
    main()
