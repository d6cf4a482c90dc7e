"""Wall time of incident grouping and of reading Xid lines, on constructed record sets.

    python benchmarks/bench_incidents.py [--crashes 100000] [--xids 10000] [--repeat 5]

Records: a fleet of 64 hosts, each crash a TP-8 server (1 FAULT + 7 COLLATERAL records) with a
random deployment label among 16 (a quarter unlabelled), first failures spread over 30 days;
Xid lines on random hosts at random times. Xid text: 100,000 lines as dmesg -T prints them,
one in 100 (a bad day) and one in 2 (a storm) an Xid line. Each figure is the median (and
best) of --repeat runs.
"""

from __future__ import annotations

import argparse
import random
import sys
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_doctor import timed  # noqa: E402 (one timing loop for every benchmark)
from crashlab.incidents import Crash, XidLine, group  # noqa: E402
from crashlab.incidents.xid import from_dmesg  # noqa: E402

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
SPAN = 30 * 86400


def fleet(crashes: int, xids: int, seed: int = 1) -> tuple[list[Crash], list[XidLine]]:
    rng = random.Random(seed)
    records = []
    for server in range(crashes // 8):
        host = f"node{rng.randrange(64)}"
        label = None if rng.random() < 0.25 else f"pd-{rng.randrange(16)}"
        start = T0 + timedelta(seconds=rng.uniform(0, SPAN))
        for rank in range(8):
            records.append(Crash(time=start + timedelta(seconds=0.3 * rank), host=host,
                                 run_dir=f"runs/{server}", first_line="Warp Illegal Address",
                                 rank=f"TP{rank}", label="FAULT" if rank == 0 else "COLLATERAL",
                                 deployment=label, role=rng.choice(("prefill", "decode"))))
    lines = [XidLine(T0 + timedelta(seconds=rng.uniform(0, SPAN)), f"node{rng.randrange(64)}", 13,
                     "NVRM: Xid (PCI:0000:3b:00): 13, Graphics SM Warp Exception", "PCI:0000:3b:00")
             for _ in range(xids)]
    return records, lines


def dmesg_text(lines: int, every: int) -> str:
    """``lines`` lines as dmesg -T prints them, one in ``every`` an Xid line."""
    out = []
    for n in range(lines):
        stamp = (T0 + timedelta(seconds=n)).strftime("%a %b %d %H:%M:%S %Y")
        out.append(f"[{stamp}] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."
                   if n % every == 0 else f"[{stamp}] usb 1-1: new high-speed USB device number {n}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crashes", type=int, default=100_000)
    parser.add_argument("--xids", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    crashes, xids = fleet(args.crashes, args.xids)
    incidents = group(crashes, xids)
    median, best = timed(lambda: group(crashes, xids), args.repeat)
    print(f"group {len(crashes):,} crashes + {len(xids):,} Xid lines -> {len(incidents):,} incidents "
          f"({sum(len(i.xids) for i in incidents):,} Xid lines joined): "
          f"median {median * 1000:.0f} ms (best {best * 1000:.0f} ms)")
    small = crashes[:80]
    median, best = timed(lambda: group(small), args.repeat * 20)
    print(f"group {len(small)} crashes (one deployment's page): median {median * 1000:.2f} ms "
          f"(best {best * 1000:.2f} ms)")
    for every in (100, 2):
        text = dmesg_text(100_000, every)
        median, best = timed(partial(from_dmesg, text, "node1"), args.repeat)
        print(f"read Xid lines from {len(text) / 1e6:.1f} MB of dmesg -T text (100,000 lines, one "
              f"in {every} an Xid line): median {median * 1000:.0f} ms (best {best * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
