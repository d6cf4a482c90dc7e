"""The crash index on both backends (a SQLite file, a real PostgreSQL server): recording, the
signature tally, filters, migrations, retention, and many writer processes at once."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import pytest

from crashlab.errors import BadInput
from crashlab.index import Filters, Index, retention
from crashlab.index.backends import connect
from crashlab.index.commands import collect, show
from crashlab.index.schema import LATEST
from tests.conftest import ROOT
from tests.index_fixtures import crash, signature
from tests.index_writer import signature_number

A, B = signature("a1b2c3d4e5f6"), signature("a1ffffffffff")


def test_crashes_are_listed_newest_first_and_filtered(index_address):
    with Index(index_address) as index:
        for key, sig, at, host in [("r1", A, 100.0, "node1"), ("r2", B, 300.0, "node2"),
                                   ("r3", A, 200.0, "node2")]:
            assert index.record(crash(key, sig, at, host=host))[1]
        assert [c.source for c in index.crashes(Filters())] == ["/runs/r2", "/runs/r3", "/runs/r1"]
        assert [c.source for c in index.crashes(Filters(since=150.0))] == ["/runs/r2", "/runs/r3"]
        assert [c.source for c in index.crashes(Filters(signature="a1b2"))] == ["/runs/r3", "/runs/r1"]
        assert [c.source for c in index.crashes(Filters(host="node2", limit=1))] == ["/runs/r2"]
        assert index.crashes(Filters(host="node9")) == []
        first = index.crashes(Filters(limit=1))[0]
        assert (first.title, first.crashed_at) == (B.title, "1970-01-01T00:05:00+00:00")


def test_a_crash_recorded_twice_is_one_crash_and_counts_once(index_address):
    with Index(index_address) as index:
        first = index.record(crash("r1", A, 100.0))
        again = index.record(crash("r1", A, 100.0))
        assert first == (again[0], True) and again[1] is False
        assert len(index.crashes(Filters())) == 1
        assert index.signature(A.hash).count == 1


def test_the_signature_tally_counts_and_spans_crashes_recorded_out_of_order(index_address):
    with Index(index_address) as index:
        for key, at, host in [("r1", 500.0, "node1"), ("r2", 100.0, "node2"), ("r3", 900.0, "node2")]:
            index.record(crash(key, A, at, host=host, gpus="NVIDIA H100 80GB HBM3", driver="580.95",
                               sglang="0.5.23"))
        tally = index.signature(A.hash)
        assert (tally.count, tally.first_seen[11:19], tally.last_seen[11:19]) == (3, "00:01:40", "00:15:00")
        assert tally.body["notes"] == ["a note"] and tally.search == A.search
        by = show(index, "a1b2").by
        assert [(t.value, t.count) for t in by["host"]] == [("node2", 2), ("node1", 1)]
        assert [(t.first_seen[11:19], t.last_seen[11:19]) for t in by["host"]] == [
            ("00:01:40", "00:15:00"), ("00:08:20", "00:08:20")]
        assert [(t.value, t.count) for t in by["driver"]] == [("580.95", 3)]


def test_a_signature_is_found_by_a_prefix_that_names_one(index_address):
    with Index(index_address) as index:
        index.record(crash("r1", A, 1.0))
        index.record(crash("r2", B, 2.0))
        assert index.signature_hash("A1B2") == A.hash
        with pytest.raises(BadInput, match="ambiguous"):
            index.signature_hash("a1")
        with pytest.raises(BadInput, match="no signature 99"):
            index.signature_hash("99")
        with pytest.raises(BadInput, match="no crash 7"):
            show(index, "7")


def test_migrations_are_applied_once_and_a_newer_index_is_refused(index_address):
    with Index(index_address) as index:
        assert index.schema_version() == LATEST
    with Index(index_address) as index:  # opened again: nothing applied twice
        rows = index.backend.execute("SELECT version FROM schema_migrations").fetchall()
        assert [r[0] for r in rows] == list(range(1, LATEST + 1))
        with index.backend.transaction():
            index.backend.execute("INSERT INTO schema_migrations (version, name, applied_at) "
                                  "VALUES (?, ?, ?)", (LATEST + 1, "from the future", 0.0))
    with pytest.raises(BadInput, match=f"schema version {LATEST + 1}, newer"):
        Index(index_address)


def test_gc_keeps_the_first_dumps_of_each_signature_within_the_budget(index_address, tmp_path):
    dumps = {}
    for name, size in [("a1", 100), ("a2", 100), ("a3", 100), ("b1", 300)]:
        dumps[name] = tmp_path / f"{name}.nvcudmp"
        dumps[name].write_bytes(b"x" * size)
    gone = tmp_path / "gone.nvcudmp"
    with Index(index_address) as index:
        for number, (name, sig) in enumerate([("a1", A), ("a2", A), ("a3", A), ("b1", B)]):
            index.record(crash(name, sig, 10.0 + number, files=[(dumps[name], dumps[name].stat().st_size)]))
        index.record(crash("old", B, 1.0, files=[(gone, 50)]))
        policy = retention.Retention(keep_per_signature=2, max_bytes=450)
        planned = collect(index, policy, dry_run=True)
        assert all(path.exists() for path in dumps.values())
        decided = {item.path: item.action for item in planned.files}
        # a1 and b1 are their signatures' first dumps (b's "old" is gone); a2 is past the budget,
        # a3 past --keep
        assert decided == {str(dumps["a1"]): "kept", str(dumps["b1"]): "kept",
                           str(dumps["a2"]): "deleted", str(dumps["a3"]): "deleted",
                           str(gone): "missing"}
        assert (planned.kept_bytes, planned.freed_bytes) == (400, 200)
        collect(index, policy, dry_run=False)
        assert sorted(p.name for p in tmp_path.glob("*.nvcudmp")) == ["a1.nvcudmp", "b1.nvcudmp"]
        assert [f.gone for f in index.crash(2).files] == [True]
        assert len(index.crashes(Filters())) == 5  # the records stay
        assert {i.action for i in collect(index, policy, dry_run=False).files} == {"kept"}


def test_many_writer_processes_lose_nothing_and_double_nothing(index_address):
    writers, count, signatures = 6, 40, 3
    Index(index_address).close()  # migrated once, so the writers race on records, not on the schema
    procs = [subprocess.Popen([sys.executable, "-m", "tests.index_writer", index_address, str(w),
                               str(count), str(count), str(signatures)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for w in range(writers)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
    with Index(index_address) as index:
        crashes = index.crashes(Filters())
        keys = index.backend.execute("SELECT crash_key FROM crashes").fetchall()
        assert len(crashes) == len(keys) == writers * count + count
        assert len({k[0] for k in keys}) == len(keys)
        for number in range(signatures):
            expected = sum(1 for i in range(count) if signature_number(i, signatures) ==
                           f"{number:012x}") * (writers + 1)
            assert index.signature(f"{number:012x}").count == expected


def test_writers_opening_a_new_index_at_once_migrate_it_once(index_address, tmp_path):
    go = tmp_path / "go"  # made once every writer has started up: they open the index at once
    procs = [subprocess.Popen([sys.executable, "-m", "tests.index_writer", index_address, str(w),
                               "2", "2", "1"], cwd=ROOT, stderr=subprocess.PIPE,
                              env={**os.environ, "INDEX_WRITER_GO": str(go)})
             for w in range(6)]
    for proc in procs:
        _wait_said(proc, "ready")
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * 6, [p.stderr.read() for p in procs]
    with Index(index_address) as index:
        assert index.backend.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == LATEST
        assert index.signature(f"{0:012x}").count == 6 * 2 + 2


def test_an_opener_of_a_new_index_waits_while_another_migrates_it(index_address):
    migrating = connect(index_address)
    with migrating.transaction():
        migrating.lock_for_migrations()  # as a node in the middle of the first migration holds it
        writer = subprocess.Popen([sys.executable, "-m", "tests.index_writer", index_address, "0",
                                   "1", "1", "1"], cwd=ROOT, stderr=subprocess.PIPE)
        _wait_said(writer, "opening the index")  # its start-up, seconds on a loaded machine, is done
        time.sleep(2.0)  # a crash is recorded in milliseconds
        assert writer.poll() is None  # waiting, not racing ahead of the migration
    migrating.close()
    assert writer.wait(timeout=60) == 0, writer.stderr.read()


def _wait_said(proc: subprocess.Popen, line: str, timeout: float = 120) -> None:
    """Wait until PROC has written LINE on its stderr (a pipe)."""
    deadline = time.monotonic() + timeout
    said: list[str] = []
    while line not in said:
        left = deadline - time.monotonic()
        assert left > 0 and select.select([proc.stderr], [], [], left)[0], (line, said)
        read = proc.stderr.readline()
        assert read, (line, said, proc.wait())
        said.append(read.decode().strip())


def test_an_index_made_before_migration_3_owns_only_its_run_directories_files(index_address,
                                                                               monkeypatch, tmp_path):
    """Files recorded before ownership was kept: those inside the crash's run directory (serve
    made it) are crashlab's; a dump recorded by reference is not, and gc leaves it on disk."""
    from crashlab.index import schema

    run_dir, mine = tmp_path / "runs" / "run-1", tmp_path / "mine"
    run_dir.mkdir(parents=True)
    mine.mkdir()
    served, by_hand = run_dir / "core.1.nvcudmp", mine / "core.2.nvcudmp"
    twin = tmp_path / "runs" / "run-10" / "core.nvcudmp"  # a prefix of the run's path, not inside
    for path in (served, by_hand):
        path.write_bytes(b"x" * 10)
    with monkeypatch.context() as old:  # the crashlab that knew migrations 1 and 2
        old.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:2])
        old.setattr(schema, "LATEST", 2)
        with Index(index_address) as index, index.backend.transaction():  # its INSERTs
            db = index.backend
            db.execute("INSERT INTO signatures (hash, version, kind, title, search, body, "
                       "first_seen, last_seen, crash_count) VALUES (?, 1, 'gpu-fault', 't', 's', "
                       "'{}', 10, 11, 2)", (A.hash,))
            for number, (key, where, files) in enumerate(
                    [("served", str(run_dir), [served, twin]), ("by-hand", None, [by_hand])], 1):
                db.execute("INSERT INTO crashes (id, crash_key, signature_hash, signature_version, "
                           "crashed_at, recorded_at, recorded_by, versions, run_dir, source, "
                           "summary, total_bytes, first_failure_at) VALUES (?, ?, ?, 1, ?, ?, "
                           "'serve', '{}', ?, ?, 's', 10, ?)",
                           (number, key, A.hash, 9.0 + number, 9.0 + number, where,
                            where or str(by_hand), 9.0 + number))
                for path in files:
                    db.execute("INSERT INTO crash_files (crash_id, path, kind, size_bytes) "
                               "VALUES (?, ?, 'coredump', 10)", (number, str(path)))
    with Index(index_address) as index:
        assert index.schema_version() == LATEST
        assert [(f.path, f.owned) for f in index.crash(1).files] == \
            [(str(served), True), (str(twin), False)]
        assert [f.owned for f in index.crash(2).files] == [False]
        done = collect(index, retention.Retention(keep_per_signature=0), dry_run=False)
    assert {i.path: i.action for i in done.files} == {
        str(served): "deleted", str(by_hand): "forgotten", str(twin): "missing"}
    assert not served.exists() and by_hand.exists()


def test_a_read_only_postgresql_index_keeps_the_urls_own_options_and_refuses_writes(postgres):
    """The URL's options (here the search_path of the schema the index lives in) are the user's:
    read-only is set on the session after connecting, not by replacing them."""
    import psycopg

    database = postgres.create_database("index_in_a_schema")
    with psycopg.connect(database, autocommit=True) as admin:
        admin.execute("CREATE SCHEMA crashlab_here")
    address = f"{database}?options=-c%20search_path%3Dcrashlab_here"
    with Index(address) as index:
        index.record(crash("r1", A, 100.0))
    with Index(address, read_only=True) as index:
        assert [c.source for c in index.crashes(Filters())] == ["/runs/r1"]
        assert index.backend.execute("SHOW search_path").fetchone()[0] == "crashlab_here"
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            index.backend.execute("DELETE FROM crashes")
    with Index(address) as index:  # nothing was deleted
        assert len(index.crashes(Filters())) == 1
