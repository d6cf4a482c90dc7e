"""Figures for ``crashlab list --incidents`` over 100,000 recorded crashes, on both backends.

    python benchmarks/bench_index_incidents.py [--listed 100000] [--xids 10000] [--spread 1]

The index is filled as benchmarks/bench_index.py fills it for plain ``list`` (--listed crashes
over 500 signatures and 64 hosts, one a second, loaded in bulk), each crash's first failure
its crash time, plus --xids Xid lines spread over the hosts and the same span. Wall time of a
fresh ``python -m crashlab list --incidents`` process (interpreter start-up included), median
of 5, for the terminal view (the newest 50 incidents), --host, and --json of every incident;
beside it the parts in process: reading what grouping needs, grouping it
(crashlab.incidents.group), and the whole listing of the newest 50 (with the printed objects).

With --spread 1 each host crashes every 64 s for 28 hours, never quiet for a 120 s window, so
the newest incidents settle only when every crash is grouped; --spread 4 puts 256 s between a
host's crashes (the times stretched fourfold), and the newest 50 settle from a recent span.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_index import _load, _many, _median_of_5, _timed_cli, fill, postgres  # noqa: E402
from crashlab.incidents import DEFAULT_WINDOW, group  # noqa: E402
from crashlab.index import Filters, Index  # noqa: E402
from crashlab.index.incidents import listing  # noqa: E402


def fill_incidents(address: str, count: int, xids: int, spread: float) -> None:
    fill(address, count)
    with Index(address) as index:
        db = index.backend
        with db.transaction():
            db.execute("UPDATE crashes SET crashed_at = 1.7e9 + (crashed_at - 1.7e9) * ?",
                       (spread,))
            db.execute("UPDATE crashes SET first_failure_at = crashed_at")
            rows = [(f"xid-{n}", f"node{n % 64}", 1.7e9 + (n * count / xids - 5) * spread, 79,
                     "PCI:0000:3b:00",
                     f"NVRM: Xid (PCI:0000:3b:00): 79, pid={n}, GPU has fallen off the bus.",
                     f"/runs/{n}") for n in range(xids)]
            _many(db, "INSERT INTO xid_lines (xid_key, host, seen_at, xid, device, text, run_dir) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        if index.address.startswith("postgres"):
            db.execute("ANALYZE")


def bench(address: str, count: int, xids: int, spread: float) -> None:
    started = time.perf_counter()
    fill_incidents(address, count, xids, spread)
    print(f"  filled with {count:,} crashes and {xids:,} Xid lines in "
          f"{time.perf_counter() - started:.1f} s")
    with Index(address) as index:
        where, params = index.where(Filters())
        records = index.grouping_records(where, params)
        lines = index.xid_lines(0, 1e12)
        parts = {"read the grouping records": lambda: index.grouping_records(where, params),
                 "read the Xid lines": lambda: index.xid_lines(0, 1e12),
                 "group": lambda: group(records, lines, DEFAULT_WINDOW),
                 "the whole listing, newest 50": lambda: listing(index, Filters(limit=51),
                                                                  DEFAULT_WINDOW)}
        for label, action in parts.items():
            print(f"  in process, {label}: {_median_of_5(action) * 1000:.0f} ms")
        incidents = len(listing(index, Filters(limit=None), DEFAULT_WINDOW).incidents)
    print(f"  {incidents:,} incidents")
    for label, args in [("list --incidents (newest 50)", ()), ("list --incidents --host node7",
                                                                ("--host", "node7")),
                        ("list --incidents --json (every incident)", ("--json",)),
                        ("list (newest 50), for comparison", None)]:
        command = ("list", "--db", address) + (("--incidents", *args) if args is not None else ())
        times, _ = _timed_cli(5, *command)
        print(f"  {label}: {statistics.median(times):.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listed", type=int, default=100_000)
    parser.add_argument("--xids", type=int, default=10_000)
    parser.add_argument("--spread", type=float, default=1.0,
                        help="stretch the times: a host's crashes 64 x SPREAD seconds apart")
    options = parser.parse_args()
    with postgres() as server, tempfile.TemporaryDirectory() as folder:
        for name, address in [("SQLite", str(Path(folder) / "listing.sqlite")),
                              ("PostgreSQL", server.create_database("listing"))]:
            print(f"{name} ({_load()}):")
            bench(address, options.listed, options.xids, options.spread)


if __name__ == "__main__":
    main()
