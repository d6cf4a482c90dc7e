"""Figures for ``crashlab report --anonymize``'s scan of a coredump it cannot rewrite: how fast
the byte patterns (home folders, private host names, IP addresses) read a core.

    python benchmarks/bench_core_scan.py [--mib 512]

The core is MADE UP here: half random bytes (what GPU memory and cubins look like to a pattern)
and half zeros (what most of a lightweight dump is), with nothing to find, so every byte is read.
The figure is the median of three full reads through crashlab.issue.members' chunked reader,
from the page cache (the file is read once before).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.issue.members import _first_found  # noqa: E402
from crashlab.privacy.anonymize import BYTES_REACH, place_or_person_in  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=512)
    mib = parser.parse_args().mib
    with tempfile.TemporaryDirectory() as folder:
        core = Path(folder) / "core.nvcudmp"
        with open(core, "wb") as out:
            for index in range(mib):
                out.write(os.urandom(1 << 20) if index % 2 == 0 else bytes(1 << 20))
        core.read_bytes()
        seconds = []
        for _ in range(3):
            started = time.perf_counter()
            found = _first_found(core, place_or_person_in, BYTES_REACH)
            seconds.append(time.perf_counter() - started)
        median = statistics.median(seconds)
        print(f"{mib} MiB made-up core, found: {found}; median {median:.2f} s, "
              f"{mib / median:.0f} MiB/s ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
