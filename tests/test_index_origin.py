"""The index records the crash, not the machine that read it: a dump's time is the timestamp its
driver wrote in it (never the file's modification time, which a clone or a copy resets), its host
that of the serve run it lies in or the one the user names (inspect --record --host), else
unknown (never the reading machine's name), and a dump and its copies are one crash (their
contents' SHA-256), on the real H200 dumps (fixtures/gpu/PROVENANCE.md: recorded on 2026-11-27).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

import crashlab
from crashlab.errors import BadInput
from crashlab.index import Filters, Index
from crashlab.index.location import copies_folder
from crashlab.index.recording import record_core
from tests import scenarios
from tests.conftest import run_cli
from tests.elf_patch import header_timestamp
from tests.index_fixtures import crash, signature
from tests.test_index_cli import SEGFAULT
from tests.test_real_dumps import CUT, H200, WHOLE

#: The day the H200 dumps were recorded (fixtures/gpu/PROVENANCE.md, "Where, when, with what").
RECORDED_ON = "2026-11-27"
[NULL_ARGUMENT] = (H200 / "null_argument.explain").glob("core.*.nvcudmp")


def _written(dump: Path) -> str:
    """When the dump's driver wrote it, as the index lists times: its .cudbg.meta timestamp,
    read with struct from the file (tests/elf_patch.py), not with crashlab."""
    return datetime.fromtimestamp(header_timestamp(dump), timezone.utc).isoformat()


def _copied(dump: Path, to: Path) -> Path:
    """A copy of DUMP, as a user's cp (or a clone) makes it: a new file, a new modification time."""
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dump, to)
    assert abs(to.stat().st_mtime - header_timestamp(dump)) > 3600
    return to


def _listed(address: str) -> list[dict]:
    done = run_cli("list", "--json", "--db", address)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)["crashes"]


def test_the_real_dumps_recorded_here_keep_their_own_times_and_no_readers_host(tmp_path):
    """Every H200 dump, copied here as a clone copies it, recorded as inspect --record does: each
    crash at the time its driver wrote (the day of the recording), on an unknown host; list,
    list --json and show say so, and nowhere name this machine."""
    address = str(tmp_path / "index.sqlite")
    copies = {_copied(dump, tmp_path / "clone" / dump.parent.name / dump.name): dump
              for dump in WHOLE}
    said: list[str] = []
    for copy in copies:
        record_core(str(copy), crashlab.inspect(copy, sass=False, explain=False), address, False,
                    said.append)
    assert not [line for line in said if "warning" in line], said
    for dump in CUT:  # the driver stopped before their section table: nothing to record
        try:
            crashlab.inspect(dump, sass=False)
            raise AssertionError(f"{dump} was read")
        except BadInput:
            pass
    crashes = _listed(address)
    assert sorted(c["source"] for c in crashes) == sorted(map(str, copies))
    for listed in crashes:
        original = copies[Path(listed["source"])]
        assert listed["crashed_at"] == listed["first_failure_at"] == _written(original)
        assert listed["crashed_at"].startswith(RECORDED_ON)
        assert listed["host"] is None and listed["deployment"] is None
    terminal = run_cli("list", "--db", address).stdout.decode().splitlines()
    hosts = {row.split()[3] for row in terminal[2:]}  # ID, date, time, HOST
    assert hosts == {"unknown"}, terminal
    assert socket.gethostname() not in {row.split()[3] for row in terminal[2:]}
    # the two hang dumps share a signature: counted by host, as one unknown host
    hang = {c["signature"] for c in crashes if "hang." in c["source"] and "wait_for_flag" in c["title"]}
    [sig] = hang
    shown = json.loads(run_cli("show", sig, "--json", "--db", address).stdout)
    assert [(t["value"], t["count"]) for t in shown["by"]["host"]] == [(None, 2)]
    text = run_cli("show", sig, "--db", address).stdout.decode()
    assert "by host     unknown: 2 (first " + RECORDED_ON in text
    assert f"{socket.gethostname()}:" not in text


def test_a_copy_of_a_real_dump_and_the_dump_are_one_crash_at_its_drivers_time(
        index_address, tmp_path, xdg_data_home):
    """A copy of a real dump recorded with --copy, then the dump itself, then a second copy:
    one crash, at the time its driver wrote, on an unknown host, known by its contents. Two
    would read 'only on driver 580.159' beside a crash on another driver."""
    with Index(index_address) as index:  # the fleet has a crash on another driver
        index.record(crash("elsewhere", signature("0123456789ab"), 5.0, driver="570.86"))
    first = _copied(NULL_ARGUMENT, tmp_path / "laptop" / "core.nvcudmp")
    done = run_cli("inspect", first, "--no-sass", "--record", "--copy", "--db", index_address)
    assert done.returncode == 0, done.stderr.decode()
    shown_address = json.loads(run_cli("list", "--json", "--db", index_address).stdout)["index"]
    assert done.stderr.decode().splitlines() == [f"crashlab: recorded as crash 2 in {shown_address}"]
    second = _copied(NULL_ARGUMENT, tmp_path / "elsewhere" / "renamed.nvcudmp")
    for dump, copy in ((NULL_ARGUMENT, []), (second, ["--copy"]), (first, [])):
        again = run_cli("inspect", dump, "--no-sass", "--record", *copy, "--db", index_address)
        assert again.returncode == 0, again.stderr.decode()
        assert again.stderr.decode().splitlines()[0] == \
            f"crashlab: already recorded as crash 2 in {shown_address}"
    with Index(index_address) as index:
        assert [c.id for c in index.crashes(Filters())] == [2, 1]
        recorded = index.crash(2)
    assert recorded.crashed_at == _written(NULL_ARGUMENT) and recorded.crashed_at.startswith(RECORDED_ON)
    assert recorded.host is None
    assert recorded.dump_sha256 == hashlib.sha256(NULL_ARGUMENT.read_bytes()).hexdigest()
    [kept] = recorded.files
    assert kept.owned and os.listdir(copies_folder(index_address)) == [Path(kept.path).name]
    shown = json.loads(run_cli("show", recorded.signature, "--json", "--db", index_address).stdout)
    assert shown["signature"]["count"] == 1 and shown["facets"]["readings"] == []


def test_a_dump_copied_off_a_node_is_recorded_as_that_nodes(index_address, tmp_path):
    """--host and --deployment name where a dump came from; list --host finds it; show says it."""
    dump = _copied(NULL_ARGUMENT, tmp_path / "from-node7.nvcudmp")
    done = run_cli("inspect", dump, "--no-sass", "--record", "--host", "node7",
                   "--deployment", "pd-east", "--db", index_address)
    assert done.returncode == 0, done.stderr.decode()
    [listed] = json.loads(run_cli("list", "--host", "node7", "--json", "--db", index_address).stdout)["crashes"]
    assert (listed["host"], listed["deployment"], listed["crashed_at"]) == \
        ("node7", "pd-east", _written(NULL_ARGUMENT))
    shown = run_cli("show", str(listed["id"]), "--db", index_address).stdout.decode().splitlines()
    assert "host        node7" in shown and "deployment  pd-east" in shown


def test_a_second_host_for_a_recorded_crash_is_said_not_taken(tmp_path):
    """The real dump recorded as node7's, then again with --host node9 (inspect, then report):
    the crash stays node7's, and the line that finds it says so; the exit code stays 0 (the
    crash is recorded, the user's word is not lost unseen)."""
    address = str(tmp_path / "index.sqlite")
    dump = _copied(NULL_ARGUMENT, tmp_path / "from-node7.nvcudmp")
    first = run_cli("inspect", dump, "--no-sass", "--record", "--host", "node7", "--db", address)
    assert first.returncode == 0, first.stderr.decode()
    again = run_cli("inspect", dump, "--no-sass", "--record", "--host", "node9", "--db", address)
    assert again.returncode == 0, again.stderr.decode()
    [listed] = _listed(address)
    said = [line for line in again.stderr.decode().splitlines() if "recorded" in line]
    assert said == [f"crashlab: already recorded as crash {listed['id']} in {address}; it keeps "
                    "host node7 (recorded before), not node9"]
    reported = run_cli("report", dump, "--no-explain", "--host", "node9", "--deployment", "pd-west",
                       "--out", tmp_path / "issue", "--db", address)
    assert reported.returncode == 0, reported.stderr.decode()
    assert f"crashlab: already recorded as crash {listed['id']} in {address}; it keeps host node7 " \
        "and deployment unknown (recorded before), not node9 and pd-west" in \
        reported.stderr.decode().splitlines()
    [listed] = _listed(address)
    assert (listed["host"], listed["deployment"]) == ("node7", None)
    same = run_cli("inspect", dump, "--no-sass", "--record", "--host", "node7", "--db", address)
    assert [line for line in same.stderr.decode().splitlines() if "recorded" in line] == [
        f"crashlab: already recorded as crash {listed['id']} in {address}"]


def test_report_on_a_dump_copied_off_a_node_records_that_nodes_crash(tmp_path):
    """report CORE takes --host and --deployment as inspect --record does: the index holds the
    crash as node7's, at its driver's time; without them its host is unknown, not this machine."""
    address = str(tmp_path / "index.sqlite")
    dump = _copied(NULL_ARGUMENT, tmp_path / "from-node7.nvcudmp")
    done = run_cli("report", dump, "--no-explain", "--host", "node7", "--deployment", "pd-east",
                   "--out", tmp_path / "issue", "--db", address)
    assert done.returncode == 0, done.stderr.decode()
    [listed] = _listed(address)
    assert (listed["host"], listed["deployment"], listed["crashed_at"]) == \
        ("node7", "pd-east", _written(NULL_ARGUMENT))
    other = str(tmp_path / "other.sqlite")
    done = run_cli("report", dump, "--no-explain", "--out", tmp_path / "issue2", "--db", other)
    assert done.returncode == 0, done.stderr.decode()
    [listed] = _listed(other)
    assert listed["host"] is None and socket.gethostname() not in json.dumps(listed)


def test_a_host_or_label_that_is_no_name_is_refused(tmp_path):
    for option, value, why in (("--host", "", "cannot be empty"),
                               ("--host", "--copy", "'--copy' is not a name (is the name missing?)"),
                               ("--deployment", " ", "cannot be empty")):
        done = run_cli("inspect", NULL_ARGUMENT, "--record", option, value,
                       "--db", tmp_path / "index.sqlite")
        assert (done.returncode, done.stdout) == (2, b""), done.stderr.decode()
        assert done.stderr.decode().splitlines() == [
            f"crashlab: inspect: Invalid value for '{option}': {why}"]
    assert not (tmp_path / "index.sqlite").exists()


def test_a_dump_in_a_serve_run_takes_the_runs_host_and_label(tmp_path):
    """A real serve run, as if it had run on node7 (its environment.json and manifest say so),
    holds a copy of a real dump in its cores folder: inspect --record here records node7's crash
    with the run's --deployment; a --host the run contradicts is refused before anything."""
    done = run_cli("serve", "--quiet", "--runs-dir", tmp_path / "runs", "--deployment", "pd-east",
                   "--db", tmp_path / "serve.sqlite", "--", sys.executable, "-c", SEGFAULT)
    assert done.returncode == 0, done.stderr.decode()
    [run] = (tmp_path / "runs").iterdir()
    environment = json.loads((run / "environment.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    assert environment["host_name"] and manifest["crashlab"]["host"] == socket.gethostname()
    environment["host_name"] = manifest["crashlab"]["host"] = "node7"
    (run / "environment.json").write_text(json.dumps(environment))
    (run / "manifest.json").write_text(json.dumps(manifest))
    dump = _copied(NULL_ARGUMENT, run / "incarnation-1" / "cores" / NULL_ARGUMENT.name)
    address = str(tmp_path / "index.sqlite")
    refused = run_cli("inspect", dump, "--no-sass", "--record", "--host", "node9", "--db", address)
    assert (refused.returncode, refused.stdout) == (2, b"")
    assert refused.stderr.decode().splitlines() == [
        f"crashlab: --host node9: the dump lies in the serve run {run}, which recorded node7; "
        "leave --host out"]
    assert not Path(address).exists()
    refused = run_cli("report", dump, "--no-explain", "--host", "node9", "--db", address,
                      "--out", tmp_path / "issue")
    assert (refused.returncode, refused.stdout) == (2, b"")
    assert refused.stderr.decode().splitlines() == [
        f"crashlab: --host node9: the dump lies in the serve run {run}, which recorded node7; "
        "leave --host out"]
    assert not Path(address).exists() and not (tmp_path / "issue").exists()
    recorded = run_cli("inspect", dump, "--no-sass", "--record", "--db", address)
    assert recorded.returncode == 0, recorded.stderr.decode()
    [listed] = _listed(address)
    assert (listed["host"], listed["deployment"], listed["run_dir"]) == ("node7", "pd-east", None)


def test_a_dump_without_a_timestamp_keeps_its_file_time_and_says_so(build, tmp_path):
    """A driver before r565 writes no .cudbg.meta: the file's time is all there is, and the
    user is told that a copy does not keep it."""
    dump = build(scenarios.fault(metadata=False)).path
    os.utime(dump, (1_700_000_000, 1_700_000_000))
    address = tmp_path / "index.sqlite"
    done = run_cli("inspect", dump, "--no-sass", "--record", "--db", address)
    assert done.returncode == 0, done.stderr.decode()
    warnings = [line for line in done.stderr.decode().splitlines() if "timestamp" in line]
    assert warnings == ["crashlab: warning: --record: the dump holds no timestamp (no .cudbg.meta: "
                        "a driver before r565); its crash time is the file's modification time, "
                        "which a copy does not keep"]
    [listed] = _listed(str(address))
    assert listed["crashed_at"] == datetime.fromtimestamp(1_700_000_000, timezone.utc).isoformat()
