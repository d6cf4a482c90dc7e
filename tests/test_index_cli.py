"""The crash index through the real ``crashlab`` command: serve, inspect --record and report
record; list, show and gc read it; on a SQLite file and on a real PostgreSQL server alike."""

from __future__ import annotations

import json
import os
import sys

import pytest

from crashlab.index import Filters, Index
from crashlab.index.location import copies_folder
from crashlab.textsize import with_bytes
from tests.conftest import ROOT, run_cli
from tests.elf_patch import restamped
from tests.index_fixtures import DAMAGED_RUN_REPORTS, crash, signature
from tests.postgres_server import PASSWORD

CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
SEGFAULT = "import os, signal; print('serving'); os.kill(os.getpid(), signal.SIGSEGV)"


def _serve(runs, *options, env=None):
    return run_cli("serve", "--quiet", "--runs-dir", runs, *options, "--", sys.executable, "-c",
                   SEGFAULT, env=env)


def _crashes(address: str):
    with Index(address) as index:
        return index.crashes(Filters())


#: no CRASHLAB_DB (the tests' session sets one): the default place
DEFAULT_PLACE = {"CRASHLAB_DB": ""}


def test_serve_records_its_crash_in_the_data_folder_and_report_finds_it_there(tmp_path,
                                                                              xdg_data_home):
    runs = tmp_path / "runs"
    done = _serve(runs, "--deployment", "pd-east", env=DEFAULT_PLACE)
    assert done.returncode == 0, done.stderr.decode()
    default = xdg_data_home / "crashlab" / "index.sqlite"
    assert not (tmp_path / "crashlab-index.sqlite").exists()  # not beside the runs directory
    [recorded] = _crashes(str(default))
    [run_dir] = runs.iterdir()
    assert (recorded.recorded_by, recorded.run_dir, recorded.deployment, recorded.incarnation) == \
        ("serve", str(run_dir), "pd-east", 1)
    assert recorded.title == "SIGSEGV in server" and recorded.role == "server" and recorded.pid
    listed = run_cli("list", env=DEFAULT_PLACE)  # from any folder, with any --runs-dir
    assert listed.returncode == 0
    assert listed.stdout.decode().splitlines()[0] == f"index: {default}"
    assert recorded.signature in listed.stdout.decode().splitlines()[2]
    # the same crash, met again by crashlab report: found, not doubled
    reported = run_cli("report", run_dir, "--out", tmp_path / "issue", env=DEFAULT_PLACE)
    assert reported.returncode == 0, reported.stderr.decode()
    assert "warning" not in reported.stderr.decode()
    assert [c.id for c in _crashes(str(default))] == [recorded.id]
    shown = json.loads(run_cli("show", recorded.signature[:6], "--json", env=DEFAULT_PLACE).stdout)
    assert shown["signature"]["count"] == 1 and shown["by"]["host"][0]["count"] == 1
    assert shown["index"] == str(default)


def test_an_index_an_older_crashlab_made_beside_the_runs_directory_stays_in_use(tmp_path,
                                                                                xdg_data_home):
    old = tmp_path / "crashlab-index.sqlite"
    with Index(str(old)) as index:
        index.record(crash("r1", signature("0123456789ab"), 5.0))
    listed = run_cli("list", "--runs-dir", tmp_path / "runs", env=DEFAULT_PLACE)
    assert listed.returncode == 0
    assert listed.stdout.decode().splitlines()[0] == f"index: {old}"
    [notice] = listed.stderr.decode().splitlines()
    assert str(old) in notice and str(xdg_data_home / "crashlab" / "index.sqlite") in notice
    done = _serve(tmp_path / "runs", env=DEFAULT_PLACE)  # records there too, saying so
    assert done.returncode == 0 and "old default place" in done.stderr.decode()
    assert len(_crashes(str(old))) == 2
    assert not (xdg_data_home / "crashlab").exists()


@pytest.mark.parametrize("args", [["list"], ["list", "--incidents"], ["list", "--json"],
                                  ["show", "1"], ["gc", "--keep", "0"]])
def test_read_only_verbs_never_create_an_index(tmp_path, xdg_data_home, args):
    for where, env in [(["--db", tmp_path / "typo.sqlite"], {}), ([], DEFAULT_PLACE)]:
        done = run_cli(*args, *where, env=env)
        missing = tmp_path / "typo.sqlite" if where else xdg_data_home / "crashlab" / "index.sqlite"
        assert (done.returncode, done.stdout) == (1, b""), done.stderr.decode()
        assert done.stderr.decode().splitlines() == [
            f"crashlab: no crash index at {missing} (serve, inspect --record and report create it)"]
    assert list(tmp_path.iterdir()) == [] and list(xdg_data_home.iterdir()) == []


@pytest.mark.parametrize("verb", ["list", "show", "gc", "inspect"])
def test_the_index_options_help_breaks_no_word_at_80_columns(verb):
    """Where the index is, what gc may delete, which schema: a path or a name cut in two
    could not be copied."""
    import click

    from crashlab.cli import main

    helped = run_cli(verb, "--help", env={"COLUMNS": "80"}).stdout.decode().split()
    options = [o for o in main.commands[verb].params if isinstance(o, click.Option)
               and (verb != "inspect" or o.name in ("db", "record", "copy", "host", "deployment"))]
    assert options and all(word in helped for o in options for word in o.help.split()), helped


def test_read_only_verbs_leave_an_empty_postgresql_database_empty(postgres):
    address = postgres.create_database("index_not_made")
    done = run_cli("list", "--db", address)
    assert done.returncode == 1 and "no crash index at postgresql://" in done.stderr.decode()
    import psycopg

    with psycopg.connect(address) as connection:
        assert connection.execute("SELECT count(*) FROM information_schema.tables "
                                  "WHERE table_schema = 'public'").fetchone()[0] == 0


def test_serve_records_in_the_index_crashlab_db_names(index_address, tmp_path):
    done = _serve(tmp_path / "elsewhere" / "runs", env={"CRASHLAB_DB": index_address})
    assert done.returncode == 0, done.stderr.decode()
    [recorded] = _crashes(index_address)
    assert recorded.title == "SIGSEGV in server"
    assert not (tmp_path / "elsewhere" / "crashlab-index.sqlite").exists()
    # serve says where it recorded the crash, by the id show takes
    with Index(index_address) as index:
        where = index.address
    said = [line for line in done.stderr.decode().splitlines() if "recorded as crash" in line]
    assert said == [f"crashlab: the crash is recorded as crash {recorded.id} in {where}"], \
        done.stderr.decode()


def test_an_index_that_cannot_be_written_costs_one_warning_not_the_run(tmp_path):
    done = _serve(tmp_path / "runs", "--db", tmp_path / "no-such-folder" / "index.sqlite")
    assert done.returncode == 0
    warnings = [line for line in done.stderr.decode().splitlines() if "warning" in line]
    assert len(warnings) == 1 and "not recorded in the index" in warnings[0], warnings
    [run_dir] = (tmp_path / "runs").iterdir()
    assert (run_dir / "report.json").is_file()


def test_inspect_records_only_when_asked_and_once(index_address):
    Index(index_address).close()
    for option in ("--db", "--copy", "--host", "--deployment"):
        alone = run_cli("inspect", CORE, "--no-sass", option, *(
            [] if option == "--copy" else [index_address if option == "--db" else "node7"]))
        assert alone.returncode == 2 and alone.stdout == b""
        assert alone.stderr.decode().splitlines() == [
            f"crashlab: {option} is for --record: add --record to record the crash"]
    assert _crashes(index_address) == []
    said = []
    for _ in range(2):
        done = run_cli("inspect", CORE, "--no-sass", "--record", "--db", index_address)
        assert done.returncode == 0
        said += done.stderr.decode().splitlines()
    [recorded] = _crashes(index_address)
    shown_address = json.loads(run_cli("list", "--json", "--db", index_address).stdout)["index"]
    assert said == [f"crashlab: recorded as crash {recorded.id} in {shown_address}",
                    f"crashlab: already recorded as crash {recorded.id} in {shown_address}"]
    again = run_cli("inspect", CORE, "--no-sass", "--record", "--copy", "--db", index_address)
    assert "--copy: no copy kept" in again.stderr.decode()
    assert not copies_folder(index_address).exists()  # nothing of the copy left behind
    assert recorded.recorded_by == "inspect" and recorded.source == str(CORE)
    assert "moe_align_block_size" in recorded.title
    shown = run_cli("show", str(recorded.id), "--db", index_address)
    assert shown.returncode == 0
    assert "moe_align_block_size" in shown.stdout.decode()  # the triage the index kept


def test_list_json_lists_every_crash_and_the_terminal_the_newest(index_address):
    with Index(index_address) as index:
        for number in range(60):
            index.record(crash(f"r{number}", signature("0123456789ab"), 1000.0 + number,
                               host="node2" if number % 2 else "node1"))
    everything = json.loads(run_cli("list", "--json", "--db", index_address).stdout)
    assert len(everything["crashes"]) == 60 and everything["crashes"][0]["source"] == "/runs/r59"
    limited = json.loads(run_cli("list", "--json", "--limit", "5", "--host", "node1",
                                 "--db", index_address).stdout)
    assert [c["source"] for c in limited["crashes"]] == [f"/runs/r{n}" for n in (58, 56, 54, 52, 50)]
    terminal = run_cli("list", "--db", index_address)
    assert len(terminal.stdout.decode().splitlines()) == 2 + 50
    assert "newest 50 shown" in terminal.stderr.decode()
    since = json.loads(run_cli("list", "--json", "--since", "1970-01-01T00:17:30",
                               "--db", index_address).stdout)
    assert len(since["crashes"]) == 60 - 50
    assert run_cli("list", "--since", "1h", "--db", index_address).returncode == 1  # none that new
    for extra in ([], ["--incidents"]):
        unknown = run_cli("list", *extra, "--signature", "abcabc", "--db", index_address)
        assert (unknown.returncode, unknown.stdout) == (1, b"")
        assert len(unknown.stderr.decode().splitlines()) == 1
        assert "no signature abcabc in the index" in unknown.stderr.decode()


def test_outside_text_is_printed_as_itself(index_address):
    title = "[/bold] \x1b[31m:smile: [INST]"
    with Index(index_address) as index:
        index.record(crash("r1", signature("fedcba987654", title), 5.0, host="[red]node[/red]"))
    out = run_cli("list", "--db", index_address).stdout.decode()
    assert "[/bold] \\x1b[31m:smile: [INST]" in out and "[red]node[/red]" in out
    shown = run_cli("show", "fedcba", "--db", index_address).stdout.decode()
    assert "[/bold] \\x1b[31m:smile: [INST]" in shown


def test_the_password_of_the_index_never_shows(postgres, tmp_path):
    address = postgres.create_database("index_password")
    Index(address).close()
    listed = run_cli("list", "--json", "--db", address)
    assert json.loads(listed.stdout)["index"].startswith("postgresql://crashlab:***@")
    wrong = address.replace(PASSWORD, "not-the-" + PASSWORD)
    refused = run_cli("list", "--db", wrong)
    assert refused.returncode == 3
    assert "password authentication failed" in refused.stderr.decode()
    served = _serve(tmp_path / "runs", "--db", wrong)
    assert served.returncode == 0 and "not recorded in the index" in served.stderr.decode()
    [run_dir] = (tmp_path / "runs").iterdir()
    for text in (listed.stdout, listed.stderr, refused.stderr, served.stderr,
                 (run_dir / "manifest.json").read_bytes()):
        assert PASSWORD.encode() not in text


@pytest.mark.parametrize("args, fragment", [
    (["list", "--since", "yesterday"], "--since yesterday: neither an age"),
    (["show", "12"], "no crash 12 in the index"),
    (["show", "abc"], "no signature abc"),
    (["gc", "--max-size", "lots"], "--max-size 'lots': not a size"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    Index(str(tmp_path / "index.sqlite")).close()
    done = run_cli(*args, "--db", tmp_path / "index.sqlite")
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and fragment in lines[0], lines


def test_gc_deletes_beyond_the_retention_and_says_what(tmp_path):
    address = str(tmp_path / "index.sqlite")
    dumps = [tmp_path / f"core.node1.{pid}.1.nvcudmp" for pid in (11, 12)]
    with Index(address) as index:
        for number, dump in enumerate(dumps):
            dump.write_bytes(b"\0" * 1000)
            index.record(crash(f"r{number}", signature("0123456789ab"), 10.0 + number,
                               files=[(dump, 1000)]))
    planned = run_cli("gc", "--keep", "1", "--dry-run", "--db", address)
    assert planned.returncode == 0 and all(d.exists() for d in dumps)
    assert _unwrapped(planned.stdout.decode()) == _unwrapped(
        f"index: {address}\n"
        f"would delete {dumps[1]}: 1000 bytes, crash 2, dump 2 of its signature (keeping 1)\n"
        "would delete 1 file, 1000 bytes; would forget 0 (left on disk); would keep 1 dump, "
        "1000 bytes")
    done = json.loads(run_cli("gc", "--keep", "1", "--json", "--db", address).stdout)
    assert done["freed_bytes"] == 1000 and [d.exists() for d in dumps] == [True, False]
    shown = json.loads(run_cli("show", "2", "--json", "--db", address).stdout)
    assert shown["crash"]["files"][0]["gone"] is True


def test_a_gpu_fault_on_two_ranks_is_recorded_per_dump_with_rank_and_label(tmp_path,
                                                                         xdg_data_home):
    """The stand-in SGLang server (tests/standin) faults on one of two tensor-parallel ranks and
    both write a (synthetic) coredump: one FAULT and one COLLATERAL crash, each with its rank."""
    import requests

    from tests.serve_harness import FAST, Serve, environment, free_port, sglang

    port = free_port()
    serve = Serve(tmp_path, sglang(port, "--tp-size", "2"), *FAST, "--quiet",
                  env={**environment(crash="gpu-fault"), **DEFAULT_PLACE})
    serve.wait_healthy()
    requests.post(f"http://127.0.0.1:{port}/generate", timeout=10,
                  json={"text": "Hello", "sampling_params": {"max_new_tokens": 3}})
    assert serve.finish() == 0, serve.stderr
    default = xdg_data_home / "crashlab" / "index.sqlite"
    crashes = _crashes(str(default))
    labels = sorted((c.label, c.role, c.rank) for c in crashes)
    assert [label for label, _, _ in labels] == ["COLLATERAL", "FAULT"], labels
    assert all(role == "scheduler" and rank for _, role, rank in labels), labels
    fault = next(c for c in crashes if c.label == "FAULT")
    assert "moe_align_block_size" in fault.title
    shown = json.loads(run_cli("show", str(fault.id), "--json", "--db", default).stdout)
    assert [f["kind"] for f in shown["crash"]["files"]].count("coredump") == 1
    assert shown["report"]["source"]["kind"] == "run"


def test_gc_never_deletes_a_dump_recorded_by_reference_only_the_copy_it_took(index_address,
                                                                              tmp_path, xdg_data_home):
    """The user's dumps, recorded by inspect --record (or report) outside any runs directory,
    survive every mode of gc; past the retention they are forgotten. A dump handed over with --copy: its copy
    (in the index's folder) is crashlab's to delete, the original stays."""
    mine = tmp_path / "mine"
    mine.mkdir()
    # four crashes of one signature, their drivers' times a second apart
    dumps = [restamped(CORE, mine / f"crash{n}.nvcudmp", 1000 + n) for n in range(4)]
    for dump in dumps[:2]:
        assert run_cli("inspect", dump, "--no-sass", "--record", "--db", index_address).returncode == 0
    copied = run_cli("inspect", dumps[2], "--no-sass", "--record", "--copy", "--db", index_address)
    reported = run_cli("report", dumps[3], "--out", tmp_path / "issue", env={"CRASHLAB_DB": index_address})
    assert reported.returncode == 0, reported.stderr.decode()
    assert copied.returncode == 0, copied.stderr.decode()
    with Index(index_address) as index:
        [copy] = [f.path for c in index.crashes(Filters()) for f in index.crash(c.id).files
                  if f.owned]
    assert copy.startswith(str(xdg_data_home if index_address.startswith("postgresql")
                               else tmp_path)) and "crashlab-copies" in copy
    again = run_cli("inspect", dumps[0], "--no-sass", "--record", "--copy", "--db", index_address)
    assert "already recorded as crash 1" in again.stderr.decode()
    assert os.listdir(os.path.dirname(copy)) == [os.path.basename(copy)]  # no stray copy
    for mode in (["--keep", "0", "--dry-run"], ["--keep", "0", "--dry-run", "--json"]):
        assert run_cli("gc", *mode, "--db", index_address).returncode == 0
        assert all(dump.exists() for dump in dumps) and os.path.exists(copy), mode
    planned = run_cli("gc", "--keep", "0", "--dry-run", "--db", index_address)
    size = with_bytes(CORE.stat().st_size)
    assert planned.stdout.decode().splitlines()[-1] == (  # a forgotten file is never counted freed
        f"would delete 1 file, {size}; would forget 3 (left on disk); would keep 0 dumps, 0 bytes")
    first = json.loads(run_cli("gc", "--keep", "1", "--max-size", "1", "--json",
                               "--db", index_address).stdout)
    assert {item["path"]: item["action"] for item in first["files"]} == {
        str(dumps[0]): "forgotten", str(dumps[1]): "forgotten", copy: "deleted",
        str(dumps[3]): "forgotten"}
    assert all(dump.exists() for dump in dumps) and not os.path.exists(copy)
    for mode in (["--keep", "1"], ["--keep", "0"], ["--keep", "0", "--json"]):
        assert run_cli("gc", *mode, "--db", index_address).returncode == 0
        assert all(dump.exists() for dump in dumps), mode
    shown = _unwrapped(run_cli("show", "1", "--db", index_address).stdout.decode())
    assert _unwrapped("forgotten by crashlab gc (recorded by reference, left on disk)") in shown


def _unwrapped(text: str) -> str:
    """TEXT without its white space: a view wraps its lines to the terminal (160 columns in a
    pipe), and where it breaks them depends on the length of the test's temporary paths."""
    return "".join(text.split())


@pytest.mark.parametrize("damaged", DAMAGED_RUN_REPORTS)
def test_show_reads_a_damaged_run_report_as_no_report(index_address, tmp_path, damaged):
    (tmp_path / "report.json").write_text(damaged, encoding="utf-8")
    with Index(index_address) as index:
        crash_id, _ = index.record(crash("r1", signature("0a0b0c0d0e0f"), 5.0,
                                         run_dir=str(tmp_path), incarnation=1))
    shown = run_cli("show", str(crash_id), "--db", index_address)
    assert shown.returncode == 0, shown.stderr.decode()
    assert "report: no longer readable" in shown.stdout.decode()
    as_json = run_cli("show", str(crash_id), "--json", "--db", index_address)
    assert json.loads(as_json.stdout)["report"] is None


@pytest.mark.parametrize("crash_id", [2**63, 99999999999999999999999])
def test_show_of_a_crash_id_past_64_bits_is_bad_input_in_one_line(index_address, crash_id):
    with Index(index_address) as index:
        index.record(crash("r1", signature("0a0b0c0d0e0f"), 5.0))
    done = run_cli("show", str(crash_id), "--db", index_address)
    assert done.returncode == 2
    assert len(done.stderr.decode().splitlines()) == 1
    assert f"no crash {crash_id}" in done.stderr.decode()
