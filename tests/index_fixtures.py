"""Fixtures of the crash-index tests: the same tests run on a SQLite file and on a real
PostgreSQL server (tests/postgres_server.py), and CrashSignature-shaped values to record.

Without PostgreSQL's binaries the PostgreSQL half skips, saying how to get them; under CI (``CI``
set, as .ci/run is run) it fails instead, since .ci/run installs them.
"""

from __future__ import annotations

import itertools
import os

import pytest
from pydantic import BaseModel

from crashlab.index.records import CrashFile, NewCrash
from tests.postgres_server import PostgresServer, binaries

_databases = itertools.count(1)

#: A run's report.json as a crash, a hand edit or a full disk may leave it: JSON, not a RunReport.
DAMAGED_RUN_REPORTS = ['{"incidents": 5}', "[1, 2]", '{"incidents": [{"replay_commands": 7}]}']


class Signature(BaseModel):
    """The shape of crashlab.report.signature.CrashSignature, for recording without computing one."""

    version: int = 1
    kind: str = "gpu-fault"
    text: str = ""
    hash: str
    title: str
    search: str = ""
    parts: list[str] = []
    notes: list[str] = []
    coarse: str | None = None


def signature(hash_: str, title: str | None = None, coarse: str | None = None) -> Signature:
    return Signature(hash=hash_, title=title or f"Warp Illegal Address in kernel_{hash_[:4]}",
                     text=f"text {hash_}", search=f"search {hash_}", notes=["a note"],
                     coarse=coarse)


def crash(key: str, sig: Signature, at: float, host: str = "node1", files=(),
          summary: str | None = None, owned: bool = True, **more) -> NewCrash:
    """A crash serve recorded; its FILES (path, size) crashlab's own unless OWNED is false."""
    return NewCrash(key=key, signature=sig, crashed_at=at, recorded_by="serve", source=f"/runs/{key}",
                    summary=summary or f"crash {key}", host=host,
                    files=[CrashFile(path=str(p), kind="coredump", size_bytes=s, owned=owned)
                           for p, s in files], **more)


@pytest.fixture(scope="session")
def postgres():
    where = binaries()
    if where is None:
        why = "no PostgreSQL server binaries (apt-get install postgresql; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    server = PostgresServer(where).start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def index_address(request, tmp_path) -> str:
    """A new, empty index on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "crashlab-index.sqlite")
    server = request.getfixturevalue("postgres")
    return server.create_database(f"index_{os.getpid()}_{next(_databases)}")


@pytest.fixture(scope="session", autouse=True)
def session_index(tmp_path_factory):
    """Every crashlab the tests run records into an index of the session's own (CRASHLAB_DB):
    a verb run from the checkout (crashlab report CORE, inspect --record) would otherwise make
    crashlab-index.sqlite in it. Tests of the default place pass CRASHLAB_DB empty."""
    os.environ["CRASHLAB_DB"] = str(tmp_path_factory.mktemp("session-index") / "crashlab-index.sqlite")
    yield
    os.environ.pop("CRASHLAB_DB", None)


@pytest.fixture(autouse=True)
def own_index(tmp_path_factory, monkeypatch):
    """Within a test, an index of its own: no test reads what another recorded (crashlab report
    takes the triage an index keeps of a dump it is given, whichever test recorded it); the
    session's stays for the fixtures shared by several tests."""
    monkeypatch.setenv("CRASHLAB_DB", str(tmp_path_factory.mktemp("index") / "crashlab-index.sqlite"))
