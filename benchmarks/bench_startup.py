"""Start-up cost of the command line: wall time of fresh ``crashlab --help`` and
``crashlab inspect --help`` processes (what a user waits for before any work is done).

    python benchmarks/bench_startup.py [--repeat 10] [--tree DIR]

Each figure is the median (and best) of --repeat fresh ``python -m crashlab ...`` processes run
one after the other, after one unmeasured run that warms the page cache and the bytecode cache.
``--tree`` runs the crashlab package of another checkout (e.g. ``git archive main`` unpacked
somewhere) for a before/after comparison; ``python -m`` imports the package from the current
folder, so the tree's own code is what runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (["--help"], ["inspect", "--help"])


def wall_times(args: list[str], tree: Path, repeat: int) -> list[float]:
    command = [sys.executable, "-m", "crashlab", *args]
    subprocess.run(command, cwd=tree, check=True, stdout=subprocess.DEVNULL)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, cwd=tree, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout whose crashlab runs")
    options = parser.parse_args()
    print(f"python {sys.version.split()[0]}, tree {options.tree}, {options.repeat} fresh processes")
    for args in COMMANDS:
        times = wall_times(args, options.tree, options.repeat)
        print(f"crashlab {' '.join(args):<16} median {statistics.median(times) * 1000:6.0f} ms  "
              f"best {min(times) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
