"""The two places an index can live, behind one small interface: a SQLite file on this machine
(stdlib sqlite3) and a PostgreSQL server shared by a fleet (psycopg 3, the ``[postgres]`` extra).

Both run the same SQL (schema.py, store.py), written with ``?`` placeholders; the PostgreSQL
backend turns them into psycopg's ``%s``. The few expressions the dialects spell differently (a
time as ISO 8601 text, a JSON object made of columns) are methods here. A write is one
transaction that takes the writer's lock first: SQLite's ``BEGIN IMMEDIATE`` (one writer at a
time, others wait up to the busy timeout), PostgreSQL's row locks under ``INSERT ... ON
CONFLICT``, which make two nodes that record the same signature at once both count.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import BadInput, EnvironmentProblem
from .location import first_line, is_postgres, shown

#: How long a SQLite writer waits for another one before giving up (busy timeout), in seconds.
SQLITE_BUSY_SECONDS = 30.0
#: The key of the PostgreSQL advisory lock that serialises migrations between nodes opening one
#: index at once ("crsh" in ASCII).
MIGRATION_LOCK = 0x63727368


class Backend:
    """One connection to an index, and its dialect's few differences."""

    #: the auto-numbered primary key, in this dialect
    auto_id: str
    #: a column of bytes, in this dialect
    bytes_type: str
    #: exceptions that mean "the index could not be read or written"
    errors: tuple[type[BaseException], ...]
    #: the driver's connection (sqlite3's or psycopg's, whose classes share no base)
    connection: Any

    def __init__(self, address: str):
        self.address = shown(address)

    def execute(self, sql: str, params: tuple = ()):
        raise NotImplementedError

    def dialect(self, statement: str) -> str:
        """A migration's STATEMENT with this dialect's words for what the two spell differently."""
        return statement.format(auto_id=self.auto_id, bytes=self.bytes_type)

    def batches(self, sql: str, params: tuple, size: int) -> Iterator[list[tuple]]:
        """A query's rows, SIZE at a time, read as they are consumed (never all held at once)."""
        raise NotImplementedError

    @contextmanager
    def transaction(self) -> Iterator[None]:
        raise NotImplementedError

    def iso_time(self, column: str) -> str:
        """SQL for COLUMN (seconds since the epoch) as ISO 8601 text in UTC, cut to the second as
        store.iso cuts it: 2026-11-23T20:15:07+00:00."""
        raise NotImplementedError

    def json_text(self, column: str) -> str:
        """SQL for COLUMN (JSON text) as JSON, to be a value in json_rows' objects."""
        raise NotImplementedError

    def json_rows(self, pairs: list[tuple[str, str]], source: str) -> str:
        """A query of one column: each row of SOURCE (``FROM ... ORDER BY ...``, its order kept)
        as the text of a JSON object made of (key, SQL expression) PAIRS, keys in their order."""
        raise NotImplementedError

    def lock_for_migrations(self) -> None:
        """Inside the migration transaction: keep other openers out until it ends."""

    def close(self) -> None:
        self.connection.close()


def _into_wal(connection: sqlite3.Connection) -> None:
    """Switch a new index to WAL. The switch needs the database to itself, and SQLite answers
    "database is locked" at once, without its busy handler, while another process is opening the
    same new file: so it is retried for as long as a writer would wait."""
    deadline = time.monotonic() + SQLITE_BUSY_SECONDS
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class SqliteBackend(Backend):
    auto_id = "INTEGER PRIMARY KEY"
    bytes_type = "BLOB"
    errors = (sqlite3.Error,)

    def __init__(self, path: str, read_only: bool = False):
        super().__init__(path)
        folder = Path(path).parent
        if not folder.is_dir():
            raise BadInput(f"index {path}: no such folder {folder}")
        try:
            # autocommit at the driver level: transactions are begun here, explicitly; READ_ONLY
            # opens the file as mode=ro, where SQLite refuses every write
            target = f"{Path(path).resolve().as_uri()}?mode=ro" if read_only else path
            self.connection = sqlite3.connect(target, timeout=SQLITE_BUSY_SECONDS,
                                              isolation_level=None, check_same_thread=False,
                                              uri=read_only)
            if not read_only:
                _into_wal(self.connection)
            self.connection.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise BadInput(f"index {path}: cannot be opened ({exc})") from None

    def execute(self, sql: str, params: tuple = ()):
        return self.connection.execute(sql, params)

    def batches(self, sql: str, params: tuple, size: int) -> Iterator[list[tuple]]:
        cursor = self.connection.execute(sql, params)  # SQLite steps through rows as they are fetched
        while batch := cursor.fetchmany(size):
            yield batch

    def iso_time(self, column: str) -> str:
        return f"strftime('%Y-%m-%dT%H:%M:%S+00:00', CAST({column} AS INTEGER), 'unixepoch')"

    def json_text(self, column: str) -> str:
        return f"json({column})"

    def json_rows(self, pairs: list[tuple[str, str]], source: str) -> str:
        arguments = ", ".join(f"'{key}', {value}" for key, value in pairs)
        return f"SELECT json_object({arguments}) {source}"

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")


class PostgresBackend(Backend):
    auto_id = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
    bytes_type = "BYTEA"

    def __init__(self, url: str, read_only: bool = False):
        super().__init__(url)
        try:
            import psycopg
        except ImportError:
            raise EnvironmentProblem("a postgresql:// index needs psycopg: "
                                     "pip install 'crashlab[postgres]'") from None
        self.errors = (psycopg.Error,)
        try:
            self.connection = psycopg.connect(url, autocommit=True, connect_timeout=10)
            if read_only:
                # every later transaction of the session is read-only, the server refuses writes;
                # set after connecting, as the URL's own options (a search_path) stay as given
                self.connection.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        except psycopg.Error as exc:
            raise EnvironmentProblem(f"index {self.address}: cannot connect "
                                     f"({first_line(exc, url)})") from None

    def execute(self, sql: str, params: tuple = ()):
        return self.connection.execute(sql.replace("?", "%s"), params)

    def batches(self, sql: str, params: tuple, size: int) -> Iterator[list[tuple]]:
        # a server-side cursor: a client-side one would hold the whole result in libpq's memory
        with self.connection.transaction(), self.connection.cursor(name="crashlab_rows") as cursor:
            cursor.execute(sql.replace("?", "%s"), params)
            while batch := cursor.fetchmany(size):
                yield batch

    def iso_time(self, column: str) -> str:
        return (f"to_char(to_timestamp(trunc({column})) AT TIME ZONE 'UTC', "
                "'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"')")

    def json_text(self, column: str) -> str:
        return f"{column}::json"

    def json_rows(self, pairs: list[tuple[str, str]], source: str) -> str:
        # row_to_json of a subquery, a third faster than json_build_object, which looks up
        # every argument's type on every row; json, not jsonb, which would reorder the keys.
        # The outer query only projects, so the rows come in the subquery's order.
        columns = ", ".join(f'{value} AS "{key}"' for key, value in pairs)
        return f"SELECT row_to_json(r)::text FROM (SELECT {columns} {source}) r"

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.connection.transaction():
            yield

    def lock_for_migrations(self) -> None:
        self.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))


def connect(address: str, read_only: bool = False) -> Backend:
    """The index at ADDRESS; READ_ONLY: a connection the database itself keeps from writing."""
    return (PostgresBackend(address, read_only) if is_postgres(address)
            else SqliteBackend(address, read_only))
