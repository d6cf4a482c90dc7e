"""The crash index: record a crash and its signature in one transaction, and read them back.

Recording is idempotent and safe under concurrent writers on many nodes: the crash row is
inserted with ``ON CONFLICT (crash_key) DO NOTHING`` (a crash recorded twice is found, not
doubled), and only a crash that was new bumps its signature's tally with ``INSERT ... ON
CONFLICT (hash) DO UPDATE`` (two nodes recording one signature at once both count: the second
waits on the first's row lock and adds to its count). Both happen in one transaction, so the
tally never disagrees with the crash rows.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EXIT_NOTHING, BadInput, CrashlabError
from . import kept, schema, triage
from .backends import Backend, connect
from .location import first_line, is_postgres

if TYPE_CHECKING:  # the pydantic records cost crashlab list's start-up; read where they are made
    from ..incidents import Crash as GroupedCrash
    from ..incidents import XidLine
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
          ("summary", "c.summary", ""), ("total_bytes", "c.total_bytes", ""),
          ("first_failure_at", "c.first_failure_at", "time"), ("server_role", "c.server_role", ""),
          ("dump_sha256", "c.dump_sha256", ""), ("kind", "c.kind", ""))
_LISTED_BY_NAME = {field[0]: field for field in LISTED}
_FIELD_NAMES = tuple(_LISTED_BY_NAME)
_JSON_FIELDS = tuple(name for name, _, holds in LISTED if holds == "json")
#: Rows read per round trip while listing.
BATCH = 2000
#: The largest crash id: both backends keep ids as 64-bit signed integers, so a larger number
#: (typed in a URL or on the command line) names no crash.
MAX_CRASH_ID = 2**63 - 1
#: How many ids one ``IN (...)`` names (SQLite allows 32,766 parameters).
_IDS_AT_ONCE = 500
#: What ``crashlab show SIGNATURE`` counts crashes by.
BREAKDOWN = ("host", "gpus", "driver", "sglang", "torch")


def iso(seconds: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC, cut (not rounded) to the second, as the
    backends' iso_time cuts them."""
    return datetime.fromtimestamp(int(seconds), timezone.utc).isoformat()


@dataclass
class Filters:
    since: float | None = None
    signature: str | None = None  # a hash or a coarse key, or a prefix of one
    host: str | None = None
    limit: int | None = None


class NoIndex(CrashlabError):
    """A verb that only reads the index found none (exit 1: nothing found)."""

    exit_code = EXIT_NOTHING

    def __init__(self, address: str):
        super().__init__(f"no crash index at {address} (serve, inspect --record and report "
                         "create it)")


class UnknownSignature(BadInput):
    """No signature or coarse key starts so: bad input for show; nothing found for list."""


class Index:
    """An open index; opening it applies the migrations it lacks. Only a verb that records
    CREATEs one: list, show and gc on a missing index leave no file behind. A READ_ONLY one
    (crashlab ui) is opened so that the database refuses writes, and is never migrated."""

    def __init__(self, address: str, create: bool = True, read_only: bool = False):
        if not create and not is_postgres(address) and not Path(address).is_file():
            raise NoIndex(address)
        self.backend: Backend = connect(address, read_only)
        self.read_only = read_only
        self.address = self.backend.address
        try:
            if not create and self._current() is None:
                raise NoIndex(self.address)
            if read_only and self._current() != schema.LATEST:
                raise BadInput(f"index {self.address} has schema version {self._current()}, "
                               f"not this crashlab's {schema.LATEST}: crashlab list upgrades it")
            self._migrate()
        except self.backend.errors as exc:
            self.backend.close()
            raise BadInput(f"index {self.address}: {first_line(exc, address)}") from None
        except BaseException:
            self.backend.close()
            raise

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Index:
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
                    db.execute(db.dialect(statement))
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
        from .records import FACT_COLUMNS

        db, sig = self.backend, crash.signature
        now = time.time()
        with db.transaction():
            same = self.same_dump(crash)
            if same is not None:
                # a crash recorded before contents were hashed gets its hash now, so copies of
                # its dump are known from here on
                db.execute("UPDATE crashes SET dump_sha256 = ? WHERE id = ? AND dump_sha256 IS NULL",
                           (crash.dump_sha256, same))
                return self._retriaged(same, crash), False
            row = db.execute(
                "INSERT INTO crashes (crash_key, signature_hash, signature_version, crashed_at, "
                "recorded_at, recorded_by, host, gpus, driver, sglang, torch, versions, run_dir, "
                "source, incarnation, pid, rank, role, label, deployment, summary, total_bytes, "
                "first_failure_at, server_role, dump_sha256, triage, triage_version, kind, hang, "
                f"xid_triage, {', '.join(FACT_COLUMNS)}) "
                f"VALUES ({', '.join('?' * (30 + len(FACT_COLUMNS)))}) "
                "ON CONFLICT (crash_key) DO NOTHING RETURNING id",
                (crash.key, sig.hash, sig.version, crash.crashed_at, now, crash.recorded_by,
                 crash.host, crash.gpus, crash.driver, crash.sglang, crash.torch,
                 json.dumps(crash.versions, sort_keys=True), crash.run_dir, crash.source,
                 crash.incarnation, crash.pid, crash.rank, crash.role, crash.label,
                 crash.deployment, crash.summary, sum(f.size_bytes for f in crash.files),
                 crash.crashed_at if crash.first_failure_at is None else crash.first_failure_at,
                 crash.server_role, crash.dump_sha256,
                 None if crash.triage is None else triage.pack(crash.triage),
                 None if crash.triage is None else crash.triage.tool.version,
                 crash.kind, None if crash.hang is None else kept.pack(crash.hang),
                 None if crash.xid_triage is None else kept.pack(crash.xid_triage),
                 *(getattr(crash.facts, column) for column in FACT_COLUMNS))
            ).fetchone()
            if row is None:
                found = db.execute("SELECT id FROM crashes WHERE crash_key = ?", (crash.key,))
                return self._retriaged(found.fetchone()[0], crash), False
            crash_id = row[0]
            for kernel in sorted(set(crash.facts.co_resident)):
                db.execute("INSERT INTO co_resident_kernels (crash_id, kernel) VALUES (?, ?)",
                           (crash_id, kernel))
            for item in crash.files:
                db.execute("INSERT INTO crash_files (crash_id, path, kind, size_bytes, owned) "
                           "VALUES (?, ?, ?, ?, ?)",
                           (crash_id, item.path, item.kind, item.size_bytes, int(item.owned)))
            db.execute(
                "INSERT INTO signatures (hash, version, kind, title, search, body, first_seen, "
                "last_seen, crash_count, coarse) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?) "
                "ON CONFLICT (hash) DO UPDATE SET crash_count = signatures.crash_count + 1, "
                "coarse = COALESCE(signatures.coarse, excluded.coarse), "
                "first_seen = CASE WHEN excluded.first_seen < signatures.first_seen "
                "THEN excluded.first_seen ELSE signatures.first_seen END, "
                "last_seen = CASE WHEN excluded.last_seen > signatures.last_seen "
                "THEN excluded.last_seen ELSE signatures.last_seen END",
                (sig.hash, sig.version, sig.kind, sig.title, sig.search, sig.model_dump_json(),
                 crash.crashed_at, crash.crashed_at, sig.coarse))
        return crash_id, True

    def _retriaged(self, crash_id: int, crash: NewCrash) -> int:
        """CRASH_ID, recorded before, keeps the triage CRASH was recorded with now, the newest
        one made of its dump (crashlab inspect DUMP --record is how a dump is triaged again),
        and a hang the reading of its capture as it stands now."""
        if crash.triage is not None:
            triage.replace(self, crash_id, crash.triage)
        kept.replace_hang(self, crash_id, crash)
        return crash_id

    def same_dump(self, crash: NewCrash) -> int | None:
        """The crash recorded before whose coredump has CRASH's contents, where one counts as
        the same crash: a dump recorded on its own (no run) is one crash with any recording of
        its bytes, under any name, from any machine; a run's crash is one with a dump recorded
        on its own. Two runs' crashes are told apart by their keys (a driver stamps each dump
        with the time it wrote it, so their bytes never match)."""
        if crash.dump_sha256 is None:
            return None
        alone = "" if crash.run_dir is None else " AND run_dir IS NULL"
        row = self.backend.execute(f"SELECT id FROM crashes WHERE dump_sha256 = ?{alone} "
                                   "ORDER BY id LIMIT 1", (crash.dump_sha256,)).fetchone()
        return row[0] if row is not None else self._same_dump_recorded_unhashed(crash)

    def _same_dump_recorded_unhashed(self, crash: NewCrash) -> int | None:
        """A dump recorded on its own by a crashlab before contents were hashed (the index then
        knew it by path, size and time): the same file, of the same size, is that crash."""
        if crash.run_dir is not None:
            return None
        size = sum(f.size_bytes for f in crash.files)
        row = self.backend.execute(
            "SELECT id FROM crashes WHERE dump_sha256 IS NULL AND run_dir IS NULL AND source = ? "
            "AND total_bytes = ? ORDER BY id LIMIT 1", (crash.source, size)).fetchone()
        return None if row is None else row[0]

    def recorded_id(self, crash: NewCrash) -> int | None:
        """The id of CRASH where the index holds it (by its key, or as the same dump)."""
        row = self.backend.execute("SELECT id FROM crashes WHERE crash_key = ?",
                                   (crash.key,)).fetchone()
        return row[0] if row is not None else self.same_dump(crash)

    def record_xid(self, line: XidLine) -> bool:
        """Whether it was new. The key is the host, the run that read it, its time and text:
        recorded again (crashlab report after serve), it is found, not doubled."""
        key = hashlib.sha256("\0".join((line.host, line.run_dir or "", line.time.isoformat(),
                                          line.text)).encode()).hexdigest()
        with self.backend.transaction():
            return self.backend.execute(
                "INSERT INTO xid_lines (xid_key, host, seen_at, xid, device, text, run_dir) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (xid_key) DO NOTHING RETURNING id",
                (key, line.host, line.time.timestamp(), line.xid, line.device, line.text,
                 line.run_dir)).fetchone() is not None

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

    def where(self, filters: Filters) -> tuple[list[str], list]:
        """The SQL conditions on crashes c that FILTERS (less its limit) make, and their values."""
        where, params = ["1 = 1"], list[object]()
        if filters.since is not None:
            where.append("c.crashed_at >= ?")
            params.append(filters.since)
        if filters.signature:
            column, value = self.signature_key(filters.signature)
            where.append("c.signature_hash = ?" if column == "hash" else
                         "c.signature_hash IN (SELECT hash FROM signatures WHERE coarse = ?)")
            params.append(value)
        if filters.host:
            where.append("c.host = ?")
            params.append(filters.host)
        return where, params

    def _where_and_order(self, filters: Filters) -> tuple[str, list]:
        where, params = self.where(filters)
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

        if not 0 <= crash_id <= MAX_CRASH_ID:  # the database could not even compare it
            return None
        found = [row for batch in self._rows("c.id = ?", [crash_id], _FIELD_NAMES, False)
                 for row in batch]
        if not found:
            return None
        files = self.backend.execute(
            "SELECT path, kind, size_bytes, gone_at, owned FROM crash_files WHERE crash_id = ? "
            "ORDER BY path", (crash_id,)).fetchall()
        return _crash(found[0]).model_copy(update={"files": [
            CrashFile(path=p, kind=k, size_bytes=s, gone=g is not None, owned=bool(o))
            for p, k, s, g, o in files]})

    def signature_key(self, prefix: str) -> tuple[str, str]:
        """("hash", the one signature whose hash starts with PREFIX) or ("coarse", the one coarse
        key that does); BadInput when none or several do."""
        pattern = (prefix.lower().replace("%", "").replace("_", "") + "%",)
        found = [("hash", row[0]) for row in self.backend.execute(
            "SELECT hash FROM signatures WHERE hash LIKE ? ORDER BY hash LIMIT 2", pattern)]
        found += [("coarse", row[0]) for row in self.backend.execute(
            "SELECT DISTINCT coarse FROM signatures WHERE coarse LIKE ? ORDER BY coarse LIMIT 2",
            pattern)]
        if not found:
            raise UnknownSignature(f"no signature {prefix} in the index {self.address}")
        if len(found) > 1:
            raise BadInput(f"signature {prefix} is ambiguous ({found[0][1]}, {found[1][1]}, ...): "
                           "give more of it")
        return found[0]

    def signature_hash(self, prefix: str) -> str:
        """The one signature whose hash starts with PREFIX; BadInput when none or several do."""
        column, value = self.signature_key(prefix)
        if column != "hash":
            raise BadInput(f"{prefix} is a coarse key, not a signature: crashlab show {value} "
                           "lists the signatures under it")
        return value

    def signature(self, hash_: str) -> Signature:
        row = self.backend.execute(
            f"SELECT {_SIGNATURE_COLUMNS} FROM signatures WHERE hash = ?", (hash_,)).fetchone()
        return _signature(row)

    def signatures_under(self, coarse: str) -> list[Signature]:
        """The signatures of one coarse key, most crashes first."""
        return [_signature(row) for row in self.backend.execute(
            f"SELECT {_SIGNATURE_COLUMNS} FROM signatures WHERE coarse = ? "
            "ORDER BY crash_count DESC, hash", (coarse,))]

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

    def grouping_records(self, where: list[str], params: list) -> list[GroupedCrash]:
        """What crashlab.incidents groups, of the crashes (c) that WHERE's conditions (joined by
        AND) select, in no order. A crash read from a coredump alone (no run) was recorded by
        hand, and is named by its file."""
        from ..incidents import Crash as GroupedCrash

        return [GroupedCrash(time=_aware(at), host=host or "unknown host", run_dir=run_dir or source,
                             first_line=summary, incarnation=incarnation or 1,
                             deployment=deployment, role=server_role, rank=rank, label=label,
                             signature=signature, crash_id=crash_id,
                             by_hand=recorded_by if run_dir is None and recorded_by != "serve"
                             else None)
                for at, host, run_dir, source, summary, incarnation, deployment, server_role, rank,
                label, signature, crash_id, recorded_by in self.backend.execute(
                    "SELECT c.first_failure_at, c.host, c.run_dir, c.source, c.summary, "
                    "c.incarnation, c.deployment, c.server_role, c.rank, c.label, "
                    f"c.signature_hash, c.id, c.recorded_by FROM crashes c WHERE {' AND '.join(where)}",
                    tuple(params))]

    def crashes_by_id(self, ids: list[int]) -> dict[int, Crash]:
        found: dict[int, Crash] = {}
        for start in range(0, len(ids), _IDS_AT_ONCE):
            chunk = ids[start:start + _IDS_AT_ONCE]
            found.update((row[0], _crash(row)) for batch in self._rows(
                f"c.id IN ({', '.join('?' * len(chunk))})", chunk, _FIELD_NAMES, False)
                for row in batch)
        return found

    def xid_lines(self, start: float, end: float) -> list[XidLine]:
        """The Xid lines read from START to END (seconds since the epoch), in time order; one
        kernel line read by several serve runs of one host is one line (the first reader's)."""
        from ..incidents import XidLine

        lines: list[XidLine] = []
        last_read: dict[tuple[str, str], float] = {}
        for host, at, xid, device, text, run_dir in self.backend.execute(
                "SELECT host, seen_at, xid, device, text, run_dir FROM xid_lines "
                "WHERE seen_at >= ? AND seen_at <= ? ORDER BY seen_at, id", (start, end)):
            earlier = last_read.get((host, text))
            last_read[host, text] = at
            if earlier is None or at - earlier > SAME_XID_LINE_S:
                lines.append(XidLine(time=_aware(at), host=host, xid=xid, text=text,
                                     device=device, run_dir=run_dir))
        return lines

    def dumps(self) -> list[tuple[int, str, str, int, int]]:
        """Every coredump the index knows and has not deleted or forgotten: (crash id,
        signature, path, size, owned: 1 where crashlab made the file), each signature's first
        crashes first."""
        return self.backend.execute(
            "SELECT c.id, c.signature_hash, f.path, f.size_bytes, f.owned FROM crash_files f "
            "JOIN crashes c ON c.id = f.crash_id WHERE f.kind = 'coredump' AND f.gone_at IS NULL "
            "ORDER BY c.signature_hash, c.crashed_at, c.id, f.path").fetchall()


#: Two runs on one host read each kernel line as it comes, each stamping it with the time it
#: read it; the same text within this many seconds is one line of the kernel log. (A driver
#: repeating an Xid, as for an Xid storm, prints it again at another time, kept.)
SAME_XID_LINE_S = 5.0

_SIGNATURE_COLUMNS = "hash, version, kind, title, search, first_seen, last_seen, crash_count, " \
                     "body, coarse"


def _signature(row) -> Signature:
    from .records import Signature

    return Signature(hash=row[0], version=row[1], kind=row[2], title=row[3], search=row[4],
                     first_seen=iso(row[5]), last_seen=iso(row[6]), count=row[7],
                     body=json.loads(row[8]), coarse=row[9])


def _crash(row: tuple) -> Crash:
    """A row of every LISTED field as a Crash."""
    from .records import Crash

    values = dict(zip(_FIELD_NAMES, row, strict=True))
    for name in _JSON_FIELDS:
        values[name] = json.loads(values[name])
    return Crash(**values)


def _aware(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)
