"""The index keeps each crash's triage: recorded with it (inspect --record, report, serve), read
by show, report and the web view, which never inspect a recorded dump again; a crash recorded
before (schema migration 7) inspected once and stored, or on a read-only index inspected and
not stored, the view saying so. On a SQLite file and a real PostgreSQL server alike.

That no dump is inspected again is proved by taking the dump away after it was recorded: the
views still show its triage, which only the index can have kept."""

from __future__ import annotations

import json
import shutil
import uuid
import zlib
from pathlib import Path

import pytest
import requests

import crashlab
from crashlab.index import Index
from crashlab.index import triage as kept_triage
from crashlab.index.backends import connect
from crashlab.index.commands import show
from crashlab.index.records import CrashFile, NewCrash
from crashlab.index.schema import MIGRATIONS, MIGRATIONS_TABLE
from crashlab.issue import inputs
from crashlab.issue.command import ReportOptions, make
from crashlab.report.model import Source, Tool
from crashlab.report.run import DumpTriage, ExitStatus, Incident, RunReport
from crashlab.version import __version__
from tests.conftest import ROOT, run_cli
from tests.index_fixtures import signature
from tests.ui_fleet import UiServer

CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
KERNEL = "moe_align_block_size"


def _shown(address: str, crash_id: int, read_only: bool = False):
    with Index(address, create=False, read_only=read_only) as index:
        return show(index, str(crash_id))


def _stored_version(address: str, crash_id: int) -> str | None:
    with Index(address, create=False) as index:
        return index.backend.execute("SELECT triage_version FROM crashes WHERE id = ?",
                                     (crash_id,)).fetchone()[0]


def _recorded_alone(address: str, core: Path, triaged: bool) -> int:
    """CORE recorded on its own as inspect --record does; without its triage where TRIAGED is
    false, as a crashlab before migration 7 recorded it."""
    from crashlab.index.capture import from_coredump

    new = from_coredump(core, crashlab.inspect(core, sass=True), "inspect")
    if not triaged:
        new.triage = None
    with Index(address) as index:
        return index.record(new)[0]


def test_inspect_record_keeps_the_triage_and_show_reads_it_with_the_dump_gone(index_address,
                                                                              tmp_path):
    core = tmp_path / "core.nvcudmp"
    shutil.copyfile(CORE, core)
    done = run_cli("inspect", core, "--record", "--db", index_address)
    assert done.returncode == 0, done.stderr
    made = json.loads(run_cli("inspect", core, "--json").stdout)
    core.unlink()  # nothing left to inspect: what show prints, the index kept
    shown = json.loads(run_cli("show", "1", "--json", "--db", index_address).stdout)
    assert shown["triage"] == {"made_by": __version__, "stored": True, "inspected": False}
    assert shown["report"]["faults"] == made["faults"] and shown["report"]["summary"] == made["summary"]
    assert _stored_version(index_address, 1) == __version__
    terminal = run_cli("show", "1", "--db", index_address)
    assert terminal.returncode == 0
    text = terminal.stdout.decode()
    assert f"kept in the index, made by crashlab {__version__}" in text
    assert KERNEL in text and "Warp Out-of-range Address" in text  # the fault, rendered


def _migrated_to_6(address: str) -> None:
    """An index of the schema before the triage was kept (migrations 1 to 6)."""
    db = connect(address)
    with db.transaction():
        db.execute(MIGRATIONS_TABLE)
        for migration in [m for m in MIGRATIONS if m.number <= 6]:
            for statement in migration.statements:
                db.execute(db.dialect(statement))
            db.execute("INSERT INTO schema_migrations (version, name, applied_at) "
                       "VALUES (?, ?, 0)", (migration.number, migration.name))
    db.close()


def test_a_crash_recorded_before_migration_7_is_inspected_once_and_stored(index_address,
                                                                          tmp_path):
    """Its crash row is from the schema before; opening the index adds the triage's columns,
    the first show inspects the dump and stores it, and a second show reads it with the dump
    gone."""
    _migrated_to_6(index_address)
    core = tmp_path / "old.nvcudmp"
    shutil.copyfile(CORE, core)
    db = connect(index_address)
    with db.transaction():
        db.execute("INSERT INTO signatures (hash, version, kind, title, search, body, first_seen, "
                   "last_seen, crash_count) VALUES ('a1a1a1a1a1a1', 1, 'gpu-fault', 't', 's', "
                   "'{}', 1, 1, 1)")
        db.execute("INSERT INTO crashes (crash_key, signature_hash, signature_version, crashed_at, "
                   "recorded_at, recorded_by, versions, source, summary, total_bytes, "
                   "first_failure_at) VALUES ('old', 'a1a1a1a1a1a1', 1, 1, 1, 'inspect', '{}', ?, "
                   "'s', 1, 1)", (str(core),))
        crash_id = db.execute("SELECT id FROM crashes").fetchone()[0]
        db.execute("INSERT INTO crash_files (crash_id, path, kind, size_bytes) "
                   "VALUES (?, ?, 'coredump', 1)", (crash_id, str(core)))
    db.close()
    first = _shown(index_address, crash_id)
    assert first.triage is not None and first.triage.inspected and first.triage.stored
    assert _stored_version(index_address, crash_id) == __version__
    core.unlink()
    again = _shown(index_address, crash_id)
    assert again.triage is not None and not again.triage.inspected and again.triage.stored
    assert again.report is not None and again.report == first.report


def test_a_read_only_index_inspects_an_old_crash_stores_nothing_and_says_so(index_address,
                                                                            tmp_path):
    core = tmp_path / "old.nvcudmp"
    shutil.copyfile(CORE, core)
    crash_id = _recorded_alone(index_address, core, triaged=False)
    for _ in range(2):  # each view inspects it again: nothing was stored
        found = _shown(index_address, crash_id, read_only=True)
        assert found.triage is not None and found.triage.inspected and not found.triage.stored
        assert found.report is not None and KERNEL in found.report.summary
        assert _stored_version(index_address, crash_id) is None
    said = kept_triage.said(found.triage, crash_id)
    assert "inspected now" in said and "not kept: the index is read-only here" in said
    assert f"crashlab show {crash_id}" in said


def test_a_role_that_may_only_read_gets_the_triage_without_storing_it(postgres, tmp_path):
    """A PostgreSQL role granted SELECT alone: show opens the index as every verb does (not
    read-only), the UPDATE is refused, and the view goes on with the dump inspected."""
    import psycopg

    address = postgres.create_database(f"triage_role_{uuid.uuid4().hex[:8]}")
    core = tmp_path / "old.nvcudmp"
    shutil.copyfile(CORE, core)
    crash_id = _recorded_alone(address, core, triaged=False)
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(address, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'reads'")
        admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    database = address.rsplit("/", 1)[1]
    reader = f"postgresql://{role}:reads@{address.split('@', 1)[1].split('/', 1)[0]}/{database}"
    found = _shown(reader, crash_id)
    assert found.triage is not None and found.triage.inspected and not found.triage.stored
    assert found.report is not None and KERNEL in found.report.summary
    assert _stored_version(address, crash_id) is None


def _run_with_relative_dump(folder: Path) -> tuple[Path, RunReport]:
    """A serve run directory whose report names its dump as serve does: relative to the run."""
    run = folder / "run-1"
    (run / "incarnation-1" / "cores").mkdir(parents=True)
    core = run / "incarnation-1" / "cores" / "core_1_TP0.nvcudmp"
    shutil.copyfile(CORE, core)
    triage = crashlab.inspect(core, sass=True)
    dump = DumpTriage(path="incarnation-1/cores/core_1_TP0.nvcudmp", label="FAULT",
                      written_at="2026-11-26T10:00:00+00:00", size_bytes=core.stat().st_size,
                      sha256="0" * 64, summary=triage.summary, report=triage)
    incident = Incident(incarnation=1, directory="incarnation-1", kind="crash",
                        started_at="2026-11-26T09:00:00+00:00", ended_at="2026-11-26T10:00:01+00:00",
                        exit=ExitStatus(code=1), stopped_by_crashlab=False, summary=triage.summary,
                        dumps=[dump], replay_commands=["crashlab replay the-dump.pkl"])
    report = RunReport(tool=Tool(version="t"), status="crash", summary=triage.summary,
                       source=Source(path=str(run), size_bytes=1, kind="run"),
                       command=["python", "-m", "sglang.launch_server"], incidents=[incident])
    (run / "report.json").write_text(report.model_dump_json(), encoding="utf-8")
    return run, report


def test_a_runs_crash_keeps_its_dumps_triage_for_when_the_run_is_gone(index_address, tmp_path):
    from crashlab.index.capture import from_run

    run, report = _run_with_relative_dump(tmp_path)
    [recorded] = [c for c in from_run(run, report, "serve") if isinstance(c, NewCrash)]
    assert recorded.triage == report.incidents[0].dumps[0].report
    with Index(index_address) as index:
        crash_id = index.record(recorded)[0]
    found = _shown(index_address, crash_id)
    assert isinstance(found.report, RunReport)  # the run's own report while it is there
    assert found.triage is not None and found.triage.stored and not found.triage.inspected
    shutil.rmtree(run)
    gone = _shown(index_address, crash_id)
    assert gone.report == report.incidents[0].dumps[0].report  # the index's copy stands in
    assert gone.triage is not None and gone.triage.stored


def test_a_triage_of_another_version_is_shown_named_and_made_again_by_recording(index_address,
                                                                               tmp_path):
    core = tmp_path / "core.nvcudmp"
    shutil.copyfile(CORE, core)
    crash_id = _recorded_alone(index_address, core, triaged=True)
    with Index(index_address) as index:
        older = kept_triage.stored(index, crash_id)
        assert older is not None
        older.report.tool = Tool(version="0.0.9")
        assert kept_triage.store(index, crash_id, older.report)
    found = _shown(index_address, crash_id)
    assert found.triage is not None and found.triage.made_by == "0.0.9"
    said = kept_triage.said(found.triage, crash_id)
    assert "made by crashlab 0.0.9" in said and f"this is {__version__}" in said
    assert "crashlab inspect DUMP --record makes it again" in said
    done = run_cli("inspect", core, "--record", "--db", index_address)
    assert f"already recorded as crash {crash_id}" in done.stderr.decode()
    assert _stored_version(index_address, crash_id) == __version__


def test_a_damaged_or_inflating_stored_triage_is_none_and_is_made_again(index_address, tmp_path,
                                                                       monkeypatch):
    report = crashlab.inspect(CORE, sass=False)
    assert kept_triage.unpack(kept_triage.pack(report)) == report
    assert kept_triage.unpack(b"not zlib") is None
    assert kept_triage.unpack(zlib.compress(b'{"schema_version": 1}')) is None  # no triage
    assert kept_triage.unpack(kept_triage.pack(report)[:-10]) is None  # cut short
    monkeypatch.setattr(kept_triage, "MAX_TRIAGE_BYTES", 1000)
    assert kept_triage.unpack(kept_triage.pack(report)) is None  # inflates past the bound
    monkeypatch.undo()
    core = tmp_path / "core.nvcudmp"
    shutil.copyfile(CORE, core)
    crash_id = _recorded_alone(index_address, core, triaged=True)
    with Index(index_address) as index, index.backend.transaction():
        index.backend.execute("UPDATE crashes SET triage = ? WHERE id = ?", (b"damaged", crash_id))
    found = _shown(index_address, crash_id)
    assert found.triage is not None and found.triage.inspected and found.triage.stored


def test_the_crash_page_of_an_old_crash_says_it_was_not_kept_then_reads_the_kept_one(
        index_address, tmp_path):
    """The web view opens the index read-only: an old crash's dump is inspected for the page,
    which says it was not kept; once crashlab show kept it, the page reads it, the dump gone."""
    core = tmp_path / "old.nvcudmp"
    shutil.copyfile(CORE, core)
    crash_id = _recorded_alone(index_address, core, triaged=False)
    server = UiServer(index_address)
    try:
        page = requests.get(f"{server.url}/crash/{crash_id}", timeout=120).text
        assert KERNEL in page and 'id="sass"' in page
        assert "not kept: the index is read-only here" in page
        assert run_cli("show", str(crash_id), "--db", index_address).returncode == 0
        core.unlink()
        page = requests.get(f"{server.url}/crash/{crash_id}", timeout=120).text
    finally:
        server.stop()
    assert KERNEL in page and 'id="sass"' in page
    assert f"Triage: kept in the index, made by crashlab {__version__}." in page


class _Inspected(Exception):
    """crashlab report inspected a dump."""


def test_report_reads_the_triage_the_index_keeps_instead_of_inspecting(index_address, tmp_path,
                                                                       monkeypatch):
    """A dump report recorded (its triage has cuda-gdb's view, as report makes one) is not
    inspected when it is reported again; with --no-explain, which asks for another triage, it is."""
    core = tmp_path / "core.nvcudmp"
    shutil.copyfile(CORE, core)
    first = run_cli("report", core, "--out", tmp_path / "one", "--db", index_address)
    assert first.returncode == 0, first.stderr
    again = run_cli("report", core, "--out", tmp_path / "two", "--db", index_address)
    assert again.returncode == 0, again.stderr
    assert "its triage is the one the index keeps (crash 1 of" in again.stderr.decode()
    inspected: list[Path] = []

    def inspect_counted(path: Path, explain: bool):
        inspected.append(path)
        raise _Inspected

    monkeypatch.setattr(inputs, "_triage", inspect_counted)
    made = make(ReportOptions(inputs=[str(core)], out=tmp_path / "three", db=index_address))
    assert inspected == [] and made.inputs is not None
    [read] = made.inputs.cores
    assert read.kept is not None and read.kept.startswith("crash 1 of ")
    assert read.report is not None and read.report.source.path == str(core)
    assert KERNEL in made.body
    with pytest.raises(_Inspected):
        make(ReportOptions(inputs=[str(core)], out=tmp_path / "four", db=index_address,
                           explain=False))
    assert inspected == [core]


def test_a_triage_without_cuda_gdbs_view_or_explanation_is_made_again_by_report(tmp_path):
    report = crashlab.inspect(CORE, sass=True)
    assert not inputs.made_as_report_makes(report)  # no debugger section: inspect's default
    with_debugger = crashlab.inspect(CORE, sass=True, debugger=True, debugger_program="/nonexistent")
    assert with_debugger.debugger is not None
    assert inputs.made_as_report_makes(with_debugger)
    unexplained = crashlab.inspect(CORE, sass=True, explain=False, debugger=True,
                                   debugger_program="/nonexistent")
    assert not inputs.made_as_report_makes(unexplained)


def test_recording_a_crash_with_no_triage_stores_none(index_address):
    with Index(index_address) as index:
        crash_id = index.record(NewCrash(
            key="x", signature=signature("c3" * 6), crashed_at=1.0, recorded_by="serve",
            source="/runs/x", summary="no dump", files=[CrashFile(path="/runs/x/log", kind="log",
                                                                  size_bytes=1)]))[0]
        assert not kept_triage.holds(index, crash_id)
        assert kept_triage.stored(index, crash_id) is None
