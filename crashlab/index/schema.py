"""The index's tables, one schema for SQLite and PostgreSQL, as numbered migrations.

Each migration is applied once, in order, when an index is opened, and recorded in
``schema_migrations``; a later crashlab appends migrations and never edits one that shipped.
The SQL is the common subset of both dialects; the two words they spell differently, an
auto-numbered key and a column of bytes, are filled in by the backend (``{auto_id}``,
``{bytes}``: Backend.dialect).

Times are seconds since the epoch (UTC), so that ordering and ``--since`` are plain comparisons
on both backends.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "signatures, crashes and their files", (
        """CREATE TABLE signatures (
            hash TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            kind TEXT NOT NULL,
            title TEXT NOT NULL,
            search TEXT NOT NULL,
            body TEXT NOT NULL,
            first_seen DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL,
            crash_count INTEGER NOT NULL)""",
        """CREATE TABLE crashes (
            id {auto_id},
            crash_key TEXT NOT NULL UNIQUE,
            signature_hash TEXT NOT NULL,
            signature_version INTEGER NOT NULL,
            crashed_at DOUBLE PRECISION NOT NULL,
            recorded_at DOUBLE PRECISION NOT NULL,
            recorded_by TEXT NOT NULL,
            host TEXT,
            gpus TEXT,
            driver TEXT,
            sglang TEXT,
            torch TEXT,
            versions TEXT NOT NULL,
            run_dir TEXT,
            source TEXT NOT NULL,
            incarnation INTEGER,
            pid INTEGER,
            rank TEXT,
            role TEXT,
            label TEXT,
            deployment TEXT,
            summary TEXT NOT NULL,
            total_bytes BIGINT NOT NULL)""",
        "CREATE INDEX crashes_by_time ON crashes (crashed_at, id)",
        "CREATE INDEX crashes_by_signature ON crashes (signature_hash, crashed_at)",
        "CREATE INDEX crashes_by_host ON crashes (host, crashed_at)",
        """CREATE TABLE crash_files (
            crash_id BIGINT NOT NULL REFERENCES crashes (id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            kind TEXT NOT NULL,
            size_bytes BIGINT NOT NULL,
            gone_at DOUBLE PRECISION,
            PRIMARY KEY (crash_id, path))""",
    )),
    Migration(2, "incidents: first failures, server roles, Xid lines; coarse signatures", (
        # the crash's first failure (a FAULT dump is finished long after its fault); a crash
        # recorded before it was kept is taken to have failed when it was recorded as crashing
        "ALTER TABLE crashes ADD COLUMN first_failure_at DOUBLE PRECISION",
        "UPDATE crashes SET first_failure_at = crashed_at",
        # the server's part in a PD-disaggregated deployment (prefill, decode, plain), beside
        # role, which is the crashed process's (scheduler, detokenizer)
        "ALTER TABLE crashes ADD COLUMN server_role TEXT",
        "CREATE INDEX crashes_by_first_failure ON crashes (first_failure_at)",
        "ALTER TABLE signatures ADD COLUMN coarse TEXT",
        "CREATE INDEX signatures_by_coarse ON signatures (coarse)",
        """CREATE TABLE xid_lines (
            id {auto_id},
            xid_key TEXT NOT NULL UNIQUE,
            host TEXT NOT NULL,
            seen_at DOUBLE PRECISION NOT NULL,
            xid INTEGER NOT NULL,
            device TEXT NOT NULL,
            text TEXT NOT NULL,
            run_dir TEXT)""",
        "CREATE INDEX xid_lines_by_host ON xid_lines (host, seen_at)",
    )),
    Migration(3, "which crash files crashlab owns (gc deletes only those)", (
        # 1: crashlab made the file (a run directory's, a copy it took); 0: recorded by
        # reference (inspect --record, report on a user's file), which gc only forgets
        "ALTER TABLE crash_files ADD COLUMN owned INTEGER NOT NULL DEFAULT 0",
        # before it was kept, only serve's run directories held files crashlab made
        """UPDATE crash_files SET owned = 1 WHERE EXISTS (
            SELECT 1 FROM crashes c WHERE c.id = crash_files.crash_id AND c.run_dir IS NOT NULL
            AND substr(crash_files.path, 1, length(c.run_dir) + 1) = c.run_dir || '/')""",
    )),
    Migration(4, "what stays and what varies across a signature's crashes (facets)", (
        # the fault (from the dump's triage), the device it ran on (the environment's GPU list),
        # the stack's versions, the launch line's model and parallel sizes, the server's uptime
        # and load; a crash recorded before has NULLs
        *(f"ALTER TABLE crashes ADD COLUMN {column}" for column in (
            "pc TEXT", "function_offset BIGINT", "kernel TEXT", "exception TEXT",
            "source_line TEXT", "xid TEXT", "esr TEXT", "gpu_index INTEGER", "gpu_uuid TEXT",
            "pci_address TEXT", "cuda TEXT", "flashinfer TEXT", "sgl_kernel TEXT", "model TEXT",
            "tp_size INTEGER", "pp_size INTEGER", "ep_size INTEGER", "uptime_s BIGINT",
            "requests_in_flight INTEGER", "owner TEXT")),
        # the other kernels resident on the faulting device: many per crash, counted per kernel
        """CREATE TABLE co_resident_kernels (
            crash_id BIGINT NOT NULL REFERENCES crashes (id) ON DELETE CASCADE,
            kernel TEXT NOT NULL,
            PRIMARY KEY (crash_id, kernel))""",
    )),
    Migration(5, "the coredump's contents (a dump and its copies are one crash)", (
        # SHA-256 of the crash's coredump file: a dump recorded by hand (inspect --record,
        # report CORE) is found by it, under any name, on any machine; a crash recorded before
        # has NULL, and so does one without a dump
        "ALTER TABLE crashes ADD COLUMN dump_sha256 TEXT",
        "CREATE INDEX crashes_by_dump ON crashes (dump_sha256)",
    )),
    Migration(6, "requests_in_flight named for what it counts: requests_in_dumps", (
        # the number of requests the crash's request dumps hold (finished and unfinished), which
        # migration 4 called requests_in_flight while reports say "in flight" of the requests
        # running at the crash: one name per meaning
        "ALTER TABLE crashes RENAME COLUMN requests_in_flight TO requests_in_dumps",
    )),
    Migration(7, "each crash's triage, kept with the crashlab version that made it", (
        # the triage of the crash's coredump (its TriageReport as JSON, zlib-compressed: see
        # crashlab.index.triage), so that show, report and the ui never inspect the dump again;
        # a crash recorded before has NULL, and is inspected once when first shown
        "ALTER TABLE crashes ADD COLUMN triage {bytes}",
        "ALTER TABLE crashes ADD COLUMN triage_version TEXT",
    )),
    Migration(8, "hangs: a crash's kind, and the hang reading kept with a hang", (
        # crash: a process's fault or a run's failure (every crash recorded before); hang: a
        # hang across ranks read from a capture (crashlab inspect RUN_DIR --record, serve)
        "ALTER TABLE crashes ADD COLUMN kind TEXT NOT NULL DEFAULT 'crash'",
        # the HangReading of a hang (JSON, zlib-compressed, as the triage is): show and the ui
        # give its ranks and their timelines without the capture
        "ALTER TABLE crashes ADD COLUMN hang {bytes}",
    )),
    Migration(9, "kernel-log crashes: the Xid triage kept with the crash", (
        # the XidTriage of a crash triaged from the driver's Xid lines alone (JSON,
        # zlib-compressed, as a hang's reading is): show and the ui give its line, its Xids and
        # their GPUs without the log; a kernel-log crash recorded before has NULL, and show
        # reads its log again while the file is there
        "ALTER TABLE crashes ADD COLUMN xid_triage {bytes}",
    )),
)

#: The newest schema this crashlab knows; an index migrated further is refused, not guessed at.
LATEST = MIGRATIONS[-1].number

MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at DOUBLE PRECISION NOT NULL)"""
