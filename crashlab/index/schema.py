"""The index's tables, one schema for SQLite and PostgreSQL, as numbered migrations.

Each migration is applied once, in order, when an index is opened, and recorded in
``schema_migrations``; a later crashlab appends migrations and never edits one that shipped.
The SQL is the common subset of both dialects; the one word they spell differently, an
auto-numbered key, is filled in by the backend (``{auto_id}``).

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
)

#: The newest schema this crashlab knows; an index migrated further is refused, not guessed at.
LATEST = MIGRATIONS[-1].number

MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at DOUBLE PRECISION NOT NULL)"""
