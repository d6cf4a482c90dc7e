"""Figures for ``crashlab ui``: the time to serve each page kind over an index of
100,000 crashes (bench_index.fill: 500 signatures, 64 hosts, 200 crashes a signature), on SQLite
and PostgreSQL, and the server process's memory.

    python benchmarks/bench_ui.py [--crashes 100000] [--runs 7]

A real ``crashlab ui`` process on 127.0.0.1 is asked each page --runs times with requests (after
one request that warms it); median and best wall time per page. Its resident memory (RSS,
psutil) is read after start-up and after every page was served. The crashes' run directories
do not exist, so their crash pages show no triage; the crash page of a real dump is timed apart:
the 5.1 MB H200 dump fixtures/gpu/h200/torch_flash_oob.sglang/core.1693.nvcudmp, recorded into
the same index by a real ``crashlab inspect --record`` before the server starts.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
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


#: the real dump whose crash page is timed: the largest of the H200 dumps
DUMP = ROOT / "fixtures" / "gpu" / "h200" / "torch_flash_oob.sglang" / "core.1693.nvcudmp"


def _record_dump(address: str) -> int:
    """Record DUMP as a user does (crashlab inspect --record); its crash id."""
    done = subprocess.run([sys.executable, "-m", "crashlab", "inspect", str(DUMP), "--record",
                           "--db", address], capture_output=True, text=True, cwd=ROOT)
    found = re.search(r"recorded as crash (\d+)", done.stderr)
    assert found, done.stderr
    return int(found[1])


def bench(address: str, crashes: int, runs: int) -> None:
    fill(address, crashes)
    with Index(address) as index, index.backend.transaction():  # as serve records them
        index.backend.execute("UPDATE crashes SET first_failure_at = crashed_at")
    pages = _pages(crashes)
    pages[f"crash of the {DUMP.stat().st_size / 1e6:.1f} MB H200 dump"] = \
        f"/crash/{_record_dump(address)}"
    server = UiServer(address)
    try:
        process = psutil.Process(server.process.pid)
        started = process.memory_info().rss
        for name, path in pages.items():
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
