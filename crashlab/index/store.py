"""The crash index: record a crash and its signature in one transaction, and read them back.

Recording is idempotent and safe under concurrent writers on many nodes: the crash row is
inserted with ``ON CONFLICT (crash_key) DO NOTHING`` (a crash recorded twice is found, not
doubled), and only a crash that was new bumps its signature's tally with ``INSERT ... ON
CONFLICT (hash) DO UPDATE`` (two nodes recording one signature at once both count: the second
waits on the first's row lock and adds to its count). Both happen in one transaction, so the
tally never disagrees with the crash rows.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Iterator

from ..errors import BadInput
from . import schema
from .backends import Backend, connect
from .location import first_line

if TYPE_CHECKING:  # the pydantic records cost crashlab list's start-up; read where they are made
    from .records import Crash, NewCrash, Signature, Tally

#: A crash as listed (records.Crash, ``crashlab schema crash-list``): each field in the order it
#: is printed, the SQL it is read from, and what that holds: "time" (seconds since the epoch,
#: listed as ISO 8601 text in UTC), "json" (JSON text) or "" (the value as it is). The one list
#: that Crash objects, ``crashlab list`` and its ``--json`` stream are all read through.
LISTED = (("id", "c.id", ""), ("signature", "c.signature_hash", ""), ("title", "s.title", ""),
          ("crashed_at", "c.crashed_at", "time"), ("recorded_by", "c.recorded_by", ""),
          ("host", "c.host", ""), ("gpus", "c.gpus", ""), ("driver", "c.driver", ""),
          ("sglang", "c.sglang", ""), ("torch", "c.torch", ""), ("versions", "c.versions", "json"),
          ("run_dir", "c.run_dir", ""), ("source", "c.source", ""),
          ("incarnation", "c.incarnation", ""), ("pid", "c.pid", ""), ("rank", "c.rank", ""),
          ("role", "c.role", ""), ("label", "c.label", ""), ("deployment", "c.deployment", ""),
          ("summary", "c.summary", ""), ("total_bytes", "c.total_bytes", ""))
_LISTED_BY_NAME = {field[0]: field for field in LISTED}
_FIELD_NAMES = tuple(_LISTED_BY_NAME)
_JSON_FIELDS = tuple(name for name, _, holds in LISTED if holds == "json")
#: Rows read per round trip while listing.
BATCH = 2000
#: What ``crashlab show SIGNATURE`` counts crashes by.
BREAKDOWN = ("host", "gpus", "driver", "sglang", "torch")


def iso(seconds: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC, cut (not rounded) to the second, as the
    backends' iso_time cuts them."""
    return datetime.fromtimestamp(int(seconds), timezone.utc).isoformat()


@dataclass
class Filters:
    since: float | None = None
    signature: str | None = None  # a hash or its prefix
    host: str | None = None
    limit: int | None = None


class Index:
    """An open index; opening it applies the migrations it lacks."""

    def __init__(self, address: str):
        self.backend: Backend = connect(address)
        self.address = self.backend.address
        try:
            self._migrate()
        except self.backend.errors as exc:
            self.backend.close()
            raise BadInput(f"index {self.address}: {first_line(exc, address)}") from None
        except BaseException:
            self.backend.close()
            raise

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- schema -----------------------------------------------------------------------------
    def _migrate(self) -> None:
        db = self.backend
        if self._current() == schema.LATEST:  # the common case: nothing to lock for
            return
        with db.transaction():
            db.lock_for_migrations()  # before any DDL: PostgreSQL's IF NOT EXISTS races too
            db.execute(schema.MIGRATIONS_TABLE)
            applied = {row[0] for row in db.execute("SELECT version FROM schema_migrations")}
            if applied and max(applied) > schema.LATEST:
                raise BadInput(f"index {self.address} has schema version {max(applied)}, newer "
                               f"than this crashlab's {schema.LATEST}: upgrade crashlab")
            for migration in schema.MIGRATIONS:
                if migration.number in applied:
                    continue
                for statement in migration.statements:
                    db.execute(statement.format(auto_id=db.auto_id))
                db.execute("INSERT INTO schema_migrations (version, name, applied_at) "
                           "VALUES (?, ?, ?)", (migration.number, migration.name, time.time()))

    def _current(self) -> int | None:
        """The index's schema version; None before the first migration."""
        try:
            return self.schema_version()
        except self.backend.errors:  # no schema_migrations table yet
            return None

    def schema_version(self) -> int:
        return self.backend.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]

    # -- writing ----------------------------------------------------------------------------
    def record(self, crash: NewCrash) -> tuple[int, bool]:
        """(the crash's id, whether it was new)."""
        db, sig = self.backend, crash.signature
        now = time.time()
        with db.transaction():
            row = db.execute(
                "INSERT INTO crashes (crash_key, signature_hash, signature_version, crashed_at, "
                "recorded_at, recorded_by, host, gpus, driver, sglang, torch, versions, run_dir, "
                "source, incarnation, pid, rank, role, label, deployment, summary, total_bytes) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (crash_key) DO NOTHING RETURNING id",
                (crash.key, sig.hash, sig.version, crash.crashed_at, now, crash.recorded_by,
                 crash.host, crash.gpus, crash.driver, crash.sglang, crash.torch,
                 json.dumps(crash.versions, sort_keys=True), crash.run_dir, crash.source,
                 crash.incarnation, crash.pid, crash.rank, crash.role, crash.label,
                 crash.deployment, crash.summary, sum(f.size_bytes for f in crash.files))
            ).fetchone()
            if row is None:
                found = db.execute("SELECT id FROM crashes WHERE crash_key = ?", (crash.key,))
                return found.fetchone()[0], False
            crash_id = row[0]
            for item in crash.files:
                db.execute("INSERT INTO crash_files (crash_id, path, kind, size_bytes) "
                           "VALUES (?, ?, ?, ?)", (crash_id, item.path, item.kind, item.size_bytes))
            db.execute(
                "INSERT INTO signatures (hash, version, kind, title, search, body, first_seen, "
                "last_seen, crash_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) "
                "ON CONFLICT (hash) DO UPDATE SET crash_count = signatures.crash_count + 1, "
                "first_seen = CASE WHEN excluded.first_seen < signatures.first_seen "
                "THEN excluded.first_seen ELSE signatures.first_seen END, "
                "last_seen = CASE WHEN excluded.last_seen > signatures.last_seen "
                "THEN excluded.last_seen ELSE signatures.last_seen END",
                (sig.hash, sig.version, sig.kind, sig.title, sig.search, sig.model_dump_json(),
                 crash.crashed_at, crash.crashed_at))
        return crash_id, True

    def mark_gone(self, crash_id: int, path: str) -> None:
        with self.backend.transaction():
            self.backend.execute("UPDATE crash_files SET gone_at = ? WHERE crash_id = ? AND path = ?",
                                 (time.time(), crash_id, path))

    # -- reading ----------------------------------------------------------------------------
    def crashes(self, filters: Filters) -> list[Crash]:
        """Newest first."""
        return [_crash(row) for batch in self.listed(filters) for row in batch]

    def listed(self, filters: Filters, fields: tuple[str, ...] = _FIELD_NAMES,
               as_json: bool = False) -> Iterator[list[tuple]]:
        """The crashes FILTERS select, newest first, a batch at a time, as the database reads them:
        tuples of FIELDS (names in LISTED; times as ISO text, JSON as its text), or with AS_JSON
        each crash's JSON object as one text, made by the database (``crashlab list --json``)."""
        where, params = self._where_and_order(filters)
        return self._rows(where, params, fields, as_json)

    def _where_and_order(self, filters: Filters) -> tuple[str, list]:
        where, params = ["1 = 1"], []
        if filters.since is not None:
            where.append("c.crashed_at >= ?")
            params.append(filters.since)
        if filters.signature:
            where.append("c.signature_hash = ?")
            params.append(self.signature_hash(filters.signature))
        if filters.host:
            where.append("c.host = ?")
            params.append(filters.host)
        limit = ""
        if filters.limit is not None:
            limit = " LIMIT ?"
            params.append(filters.limit)
        return f"{' AND '.join(where)} ORDER BY c.crashed_at DESC, c.id DESC{limit}", params

    def _rows(self, where: str, params: list, fields: tuple[str, ...],
              as_json: bool) -> Iterator[list[tuple]]:
        db = self.backend
        chosen = [_LISTED_BY_NAME[name] for name in fields]
        source = f"FROM crashes c JOIN signatures s ON s.hash = c.signature_hash WHERE {where}"
        if as_json:  # a listed crash's files are not read: empty, as in a listed Crash
            pairs = [(name, db.iso_time(sql) if holds == "time" else
                      db.json_text(sql) if holds == "json" else sql) for name, sql, holds in chosen]
            query = db.json_rows([*pairs, ("files", db.json_text("'[]'"))], source)
        else:
            query = "SELECT " + ", ".join(db.iso_time(sql) if holds == "time" else sql
                                          for _, sql, holds in chosen) + f" {source}"
        return db.batches(query, tuple(params), BATCH)

    def crash(self, crash_id: int) -> Crash | None:
        from .records import CrashFile

        found = [row for batch in self._rows("c.id = ?", [crash_id], _FIELD_NAMES, False)
                 for row in batch]
        if not found:
            return None
        files = self.backend.execute(
            "SELECT path, kind, size_bytes, gone_at FROM crash_files WHERE crash_id = ? "
            "ORDER BY path", (crash_id,)).fetchall()
        return _crash(found[0]).model_copy(update={"files": [
            CrashFile(path=p, kind=k, size_bytes=s, gone=g is not None) for p, k, s, g in files]})

    def signature_hash(self, prefix: str) -> str:
        """The one signature whose hash starts with PREFIX; BadInput when none or several do."""
        rows = self.backend.execute("SELECT hash FROM signatures WHERE hash LIKE ? ORDER BY hash "
                                    "LIMIT 2", (prefix.lower().replace("%", "") + "%",)).fetchall()
        if not rows:
            raise BadInput(f"no signature {prefix} in the index {self.address}")
        if len(rows) > 1:
            raise BadInput(f"signature {prefix} is ambiguous ({rows[0][0]}, {rows[1][0]}, ...): "
                           "give more of it")
        return rows[0][0]

    def signature(self, hash_: str) -> Signature:
        from .records import Signature

        row = self.backend.execute(
            "SELECT hash, version, kind, title, search, first_seen, last_seen, crash_count, body "
            "FROM signatures WHERE hash = ?", (hash_,)).fetchone()
        return Signature(hash=row[0], version=row[1], kind=row[2], title=row[3], search=row[4],
                         first_seen=iso(row[5]), last_seen=iso(row[6]), count=row[7],
                         body=json.loads(row[8]))

    def breakdown(self, hash_: str) -> dict[str, list[Tally]]:
        """Crashes of one signature per host, GPU, driver and version, most first, each value
        with its first and last crash."""
        from .records import Tally

        return {column: [Tally(value=value, count=count, first_seen=iso(first), last_seen=iso(last))
                         for value, count, first, last in self.backend.execute(
                    f"SELECT {column}, count(*), min(crashed_at), max(crashed_at) FROM crashes "
                    f"WHERE signature_hash = ? GROUP BY {column} "
                    f"ORDER BY count(*) DESC, {column}", (hash_,)).fetchall()]
                for column in BREAKDOWN}

    def dumps(self) -> list[tuple[int, str, str, int]]:
        """Every coredump the index knows and has not deleted: (crash id, signature, path, size),
        each signature's first crashes first."""
        return self.backend.execute(
            "SELECT c.id, c.signature_hash, f.path, f.size_bytes FROM crash_files f "
            "JOIN crashes c ON c.id = f.crash_id WHERE f.kind = 'coredump' AND f.gone_at IS NULL "
            "ORDER BY c.signature_hash, c.crashed_at, c.id, f.path").fetchall()


def _crash(row: tuple) -> Crash:
    """A row of every LISTED field as a Crash."""
    from .records import Crash

    values = dict(zip(_FIELD_NAMES, row))
    for name in _JSON_FIELDS:
        values[name] = json.loads(values[name])
    return Crash(**values)
