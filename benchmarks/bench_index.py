"""Figures for the crash index on both backends: recording a crash, ``crashlab list`` over
100,000 recorded crashes, and 16 writer processes recording 10,000 crashes into PostgreSQL.

    python benchmarks/bench_index.py [--records 300] [--listed 100000] [--runs 7]
                                     [--writers 16] [--crashes 10000]
                                     [--only record,list,show,writers]

PostgreSQL is a real local server (Debian's postgresql package, started as the tests start it,
tests/postgres_server.py) with its shipped durability settings (fsync and synchronous_commit
on); SQLite is a file on local disk in WAL mode, sqlite3's default synchronous=FULL.

- record: one crash with two files, as ``crashlab serve`` records it (open the index, record,
  close: crashlab.index.recording.record_all), and the record alone on an open index; median
  and 95th percentile over --records crashes.
- list: an index filled with --listed crashes over 500 signatures and 64 hosts (loaded in bulk,
  not through record); wall time of a fresh ``python -m crashlab list`` process (interpreter
  start-up included), for the terminal view (the newest 50, and every crash with --limit), with
  --signature, --host and --since filters, and --json of every crash; median and best of --runs
  (the machine may be shared: the load average is printed beside them); beside it the same query
  in process, as the command reads it (Index.listed: the terminal view's fields, or each crash's
  JSON text made by the database), and Index.crashes of every crash (the Python API: the rows
  made into pydantic Crash objects).
- show: an index of --listed crashes with every fact the facets read (migration 4's columns and
  two co-resident kernels each), over 500 signatures under one coarse key, a fifth of them in
  one signature; wall time of a fresh ``python -m crashlab show`` process for that signature
  (20,000 crashes), a signature of 160 crashes and the coarse key (every crash), and
  facets_of alone in process.
- writers: --writers processes start at once and record --crashes crashes between them (over
  20 signatures, every writer hitting each), plus 100 crashes every writer records (one row
  each must remain); then the rows and the tallies are counted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.index import Filters, Index  # noqa: E402
from crashlab.index.recording import record_all  # noqa: E402
from crashlab.index.views import LIST_FIELDS  # noqa: E402
from tests.index_fixtures import crash, signature  # noqa: E402
from tests.postgres_server import PostgresServer, binaries  # noqa: E402


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"


def bench_record(address: str, records: int, folder: Path) -> None:
    files = [(folder / "core.node1.4242.1.nvcudmp", 2 * 10**9), (folder / "dump.pkl", 10**6)]
    whole, alone = [], []
    for number in range(records):
        made = crash(f"open-{number}", signature(f"{number % 20:012x}"), time.time(), files=files)
        started = time.perf_counter()
        record_all([made], address, folder, print)
        whole.append(time.perf_counter() - started)
    with Index(address) as index:
        for number in range(records):
            made = crash(f"alone-{number}", signature(f"{number % 20:012x}"), time.time(), files=files)
            started = time.perf_counter()
            index.record(made)
            alone.append(time.perf_counter() - started)
    print(f"  record (open, record, close): {_percentiles(whole)}")
    print(f"  record on an open index:      {_percentiles(alone)}")


def fill(address: str, count: int) -> None:
    """COUNT crashes over 500 signatures and 64 hosts, inserted in bulk."""
    signatures = 500
    with Index(address) as index:
        db = index.backend
        with db.transaction():
            rows = [(f"{s:012x}", 1, "gpu-fault", f"Warp Illegal Address in kernel_{s}", "q", "{}",
                     0.0, float(count), count // signatures) for s in range(signatures)]
            _many(db, "INSERT INTO signatures (hash, version, kind, title, search, body, first_seen, "
                      "last_seen, crash_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            rows = [(f"bulk-{n}", f"{n % signatures:012x}", 1, 1.7e9 + n, 1.7e9 + n, "serve",
                     f"node{n % 64}", "NVIDIA H100 80GB HBM3", "580.95", "0.5.23", "2.9.1", "{}",
                     f"/runs/{n}", f"/runs/{n}", 1, f"server killed by SIGSEGV ({n})", 2 * 10**9)
                    for n in range(count)]
            _many(db, "INSERT INTO crashes (crash_key, signature_hash, signature_version, "
                      "crashed_at, recorded_at, recorded_by, host, gpus, driver, sglang, torch, "
                      "versions, run_dir, source, incarnation, summary, total_bytes) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        if index.address.startswith("postgres"):
            db.execute("ANALYZE")


def _many(db, sql: str, rows: list[tuple]) -> None:
    if hasattr(db.connection, "executemany"):  # sqlite3
        db.connection.executemany(sql, rows)
    else:
        with db.connection.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)


def _load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def _timed_cli(runs: int, *args: str) -> tuple[list[float], bytes]:
    """Wall times of RUNS fresh ``python -m crashlab ARGS`` processes, and the last one's output."""
    times, out = [], b""
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "crashlab", *args], capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
        assert done.returncode in (0, 1), done.stderr.decode()
        out = done.stdout
    return times, out


def _median_of_5(action) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bench_list(address: str, count: int, runs: int) -> None:
    started = time.perf_counter()
    fill(address, count)
    print(f"  filled with {count:,} crashes in {time.perf_counter() - started:.1f} s")
    cases = [("list (newest 50)", (), Filters(limit=51)),
             ("list --signature", ("--signature", "00000000002a"), Filters(signature="00000000002a",
                                                                           limit=51)),
             ("list --host", ("--host", "node7"), Filters(host="node7", limit=51)),
             ("list --since 1h", ("--since", "1h"), Filters(since=time.time() - 3600, limit=51)),
             ("list --limit N (every crash, terminal view)", ("--limit", str(count)), Filters()),
             ("list --json (every crash)", ("--json",), Filters()),
             ("list --json --host", ("--json", "--host", "node7"), Filters(host="node7"))]
    def read(index: Index, args: tuple[str, ...], filters: Filters) -> int:
        listed = index.listed(filters, as_json=True) if "--json" in args else \
            index.listed(filters, LIST_FIELDS)
        return sum(len(batch) for batch in listed)

    with Index(address) as index:
        queried = {label: _median_of_5(partial(read, index, args, filters))
                   for label, args, filters in cases}
        as_objects = _median_of_5(lambda: index.crashes(Filters()))
    for label, args, _ in cases:
        times, out = _timed_cli(runs, "list", "--db", address, *args)
        lines = len(json.loads(out)["crashes"]) if "--json" in args else max(0, len(out.splitlines()) - 1)
        print(f"  {label}: median {statistics.median(times):.3f} s, best {min(times):.3f} s "
              f"({lines:,} crashes printed; the query in process {queried[label] * 1000:.1f} ms; "
              f"{_load()})")
    print(f"  Index.crashes of every crash, as Crash objects (the Python API): {as_objects:.3f} s")
    times, _ = _timed_cli(runs, "--version")
    print(f"  (crashlab --version, the interpreter's start-up and click: median "
          f"{statistics.median(times):.3f} s, best {min(times):.3f} s)")


def fill_with_facts(address: str, count: int) -> tuple[str, str, str]:
    """COUNT crashes with every fact the facets read, over 500 signatures under one coarse key,
    a fifth of them in the first; (that signature, one of the others, the coarse key)."""
    from crashlab.index.records import FACT_COLUMNS

    signatures, coarse = 500, "c0a75ec0a75e"
    with Index(address) as index:
        db = index.backend
        with db.transaction():
            _many(db, "INSERT INTO signatures (hash, version, kind, title, search, body, first_seen, "
                      "last_seen, crash_count, coarse) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  [(f"a{s:011x}", 1, "gpu-fault", f"Warp Illegal Address in kernel_{s}", "q", "{}",
                    0.0, float(count), 0, coarse) for s in range(signatures)])
            rows = []
            for n in range(count):
                sig = 0 if n % 5 == 0 else n % signatures
                rows.append((f"bulk-{n}", f"a{sig:011x}", 1, 1.7e9 + n, 1.7e9 + n, "serve",
                             f"node{n % 64}", "NVIDIA H100 80GB HBM3", ("580.95", "570.1")[n % 2],
                             "0.5.23", "2.9.1", "{}", f"/runs/{n}", f"/runs/{n}", 1, f"TP{n % 8}",
                             f"crash {n}", 2 * 10**9,
                             f"0x{0x7f0000 + sig * 16:x}", 0x1a0, f"kernel_{sig}",
                             "Warp Illegal Address", f"moe.cu:{sig}", None, None, n % 8,
                             f"GPU-{n % 512:08x}", f"0000:{n % 8:02x}:00.0", "12.8", "0.6.12",
                             "0.3.9", "Qwen/Qwen3-30B-A3B", 8, 1, 8, 3600 + n % 50_000,
                             n % 64, "flashinfer 0.6.12"))
            columns = ("crash_key, signature_hash, signature_version, crashed_at, recorded_at, "
                       "recorded_by, host, gpus, driver, sglang, torch, versions, run_dir, "
                       f"source, incarnation, rank, summary, total_bytes, {', '.join(FACT_COLUMNS)}")
            _many(db, f"INSERT INTO crashes ({columns}) VALUES ({', '.join('?' * len(rows[0]))})",
                  rows)
            db.execute("INSERT INTO co_resident_kernels (crash_id, kernel) "
                       "SELECT id, 'nccl_ring' FROM crashes")
            db.execute("INSERT INTO co_resident_kernels (crash_id, kernel) "
                       "SELECT id, 'gemm_' || CAST(mod(id, 7) AS TEXT) FROM crashes")
        if index.address.startswith("postgres"):
            db.execute("ANALYZE")
    return f"a{0:011x}", f"a{7:011x}", coarse


def bench_show(address: str, count: int, runs: int) -> None:
    from crashlab.index.facets import facets_of

    started = time.perf_counter()
    hot, other, coarse = fill_with_facts(address, count)
    print(f"  filled with {count:,} crashes and their facts in {time.perf_counter() - started:.1f} s")
    with Index(address) as index:
        for label, key, is_coarse in [("the signature of a fifth of them", hot, False),
                                      ("a signature of few", other, False),
                                      ("the coarse key (every crash)", coarse, True)]:
            crashes = facets_of(index, key, is_coarse).crashes
            in_process = _median_of_5(lambda: facets_of(index, key, is_coarse))  # noqa: B023
            times, out = _timed_cli(runs, "show", key, "--db", address)
            assert b"what stays" in out
            print(f"  show {label} ({crashes:,} crashes): median {statistics.median(times):.3f} s, "
                  f"best {min(times):.3f} s (facets_of in process {in_process * 1000:.1f} ms; "
                  f"{_load()})")


def bench_writers(address: str, writers: int, crashes: int) -> None:
    Index(address).close()
    own, shared = crashes // writers, 100
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-m", "tests.index_writer", address, str(w), str(own),
                               str(shared), "20", str(start)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for w in range(writers)]
    results = [p.communicate() for p in procs]
    wall = time.time() - start
    failed = [err.decode()[-500:] for p, (_, err) in zip(procs, results, strict=True)
              if p.returncode]
    with Index(address) as index:
        db = index.backend
        rows = db.execute("SELECT count(*), count(DISTINCT crash_key) FROM crashes").fetchone()
        tally = db.execute("SELECT sum(crash_count) FROM signatures").fetchone()[0]
    expected = own * writers + shared
    attempts = own * writers + shared * writers
    print(f"  {writers} writers, {attempts:,} record calls ({own * writers:,} crashes of their own, "
          f"{shared} recorded by every writer): {wall:.1f} s, {attempts / wall:,.0f} records/s")
    print(f"  rows {rows[0]:,} (distinct {rows[1]:,}, expected {expected:,}); tallies sum to "
          f"{tally:,}; {'none lost, none duplicated' if rows[0] == rows[1] == tally == expected else 'MISMATCH'}"
          f"{'; failures: ' + str(failed) if failed else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--listed", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--crashes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per list figure")
    parser.add_argument("--only", default="record,list,show,writers",
                        help="which figures, comma-separated: record, list, show, writers")
    options = parser.parse_args()
    only = set(options.only.split(","))
    with postgres() as server, tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        for name, make in [("SQLite", lambda purpose: str(folder / f"{purpose}.sqlite")),
                           ("PostgreSQL", server.create_database)]:
            print(f"{name} ({_load()}):")
            if "record" in only:
                bench_record(make("record"), options.records, folder)
            if "list" in only:
                bench_list(make("listing"), options.listed, options.runs)
            if "show" in only:
                bench_show(make("show"), options.listed, options.runs)
        if "writers" in only:
            print(f"PostgreSQL, concurrent writers ({_load()}):")
            bench_writers(server.create_database("writers"), options.writers, options.crashes)


@contextmanager
def postgres():
    """A local PostgreSQL server with its shipped durability settings, for one benchmark run."""
    where = binaries()
    if where is None:
        sys.exit("no PostgreSQL binaries (apt-get install postgresql)")
    server = PostgresServer(where, durable=True).start()
    try:
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    main()
