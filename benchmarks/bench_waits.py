"""What reading a hang costs: crashlab.waits on a SYNTHETIC full-H100 dump with no exception.

    python benchmarks/bench_waits.py [--repeat N] [--keep DIR]

The dump (tests/coredump_builder.py) holds hang.cu's wait_for_flag on 132 SMs x 64 warps x 32
lanes, every warp inside its polling loop with the registers the SASS gives (tests/scenarios.py
barrier_after_exit's spinning kernel, spread over the whole GPU). Printed: inspect with and
without the explanation (``explain=False``), and explain_waits alone (nvdisasm included, since
each run opens the dump afresh), best and median of N in-process runs.
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
from crashlab.coredump.core import CoreDump  # noqa: E402
from crashlab.sass.finder import CodeFinder  # noqa: E402
from crashlab.waits import explain_waits  # noqa: E402
from tests import scenarios  # noqa: E402
from tests.coredump_builder import CTA, SM, Lane, Warp, write  # noqa: E402

SMS, WARPS = 132, 64


def build(path: Path) -> None:
    scenario = scenarios.barrier_after_exit()
    device = scenario.spec.devices[0]
    spin = device.grids[1]
    model = device.sms[1].ctas[0].warps[0].lanes[0]
    blocks = WARPS // 2  # 64-thread blocks: two warps each
    device.sms = [SM(sm, [CTA(spin.grid_id, (sm * blocks + b, 0, 0),
                              [Warp(w, [Lane(ln, (32 * w + ln, 0, 0), pc=model.pc,
                                             registers=model.registers) for ln in range(32)])
                               for w in range(2)]) for b in range(blocks)])
                  for sm in range(SMS)]
    spin.grid_dim = (SMS * blocks, 1, 1)
    device.grids = [spin]
    write(scenario.spec, path)


def timed(action, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def waits_alone(path: Path) -> None:
    with CoreDump(path) as core:
        explain_waits(core, CodeFinder(core))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "crashlab-bench")
    args = parser.parse_args()
    args.keep.mkdir(parents=True, exist_ok=True)
    path = args.keep / "hang-h100-full.nvcudmp"
    if not path.exists():
        build(path)
    report = crashlab.inspect(path)
    kernel = report.kernels[0]
    print(f"{path.name}: {kernel.resident_warps} warps; " + "; ".join(w.summary for w in kernel.waits))
    for label, action in [("inspect, explain=False", lambda: crashlab.inspect(path, explain=False)),
                          ("inspect", lambda: crashlab.inspect(path)),
                          ("explain_waits alone", lambda: waits_alone(path))]:
        best, median = timed(action, args.repeat)
        print(f"{label:24} best {best:.2f} s, median {median:.2f} s")


if __name__ == "__main__":
    main()
