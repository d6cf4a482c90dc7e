"""A GPU fault triaged from a kernel log with no GPU dump is recorded in the crash index
(inspect --kernel-log --record, report --kernel-log) as a crash of kind kernel-log, and the same
Xid fault on another run and host groups under its signature; list and show say it came from the
driver's log. On a SQLite file and a real PostgreSQL server alike (constructed lines:
fixtures/logs/xid/PROVENANCE.md)."""

from __future__ import annotations

import json

import requests

from tests.conftest import ROOT, run_cli
from tests.ui_fleet import UiServer

LOGS = ROOT / "fixtures" / "logs" / "xid"
REQUEST_DUMP = ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.23.pkl"


def _other_node(tmp_path):
    """The same fault on another node (node9), a day later."""
    text = (LOGS / "syslog.log").read_text().replace("node7", "node9").replace("Nov 23", "Nov 24")
    (tmp_path / "node9.log").write_text(text)
    return tmp_path / "node9.log"


def test_the_same_xid_fault_on_two_hosts_is_recorded_twice_under_one_signature(index_address,
                                                                                tmp_path):
    first = run_cli("inspect", "--kernel-log", LOGS / "syslog.log", "--record", "--db",
                    index_address, "--json")
    assert first.returncode == 0, first.stderr
    assert b"recorded as crash 1" in first.stderr
    triaged = json.loads(first.stdout)
    signed = triaged["signature"]["hash"]
    again = run_cli("inspect", "--kernel-log", LOGS / "syslog.log", "--record", "--db",
                    index_address)
    assert b"already recorded as crash 1" in again.stderr
    other = run_cli("inspect", "--kernel-log", _other_node(tmp_path), "--record", "--db",
                    index_address)
    assert b"recorded as crash" in other.stderr and b"already" not in other.stderr, other.stderr
    crashes = json.loads(run_cli("list", "--json", "--db", index_address).stdout)["crashes"]
    assert sorted(c["host"] for c in crashes) == ["node7", "node9"]  # from the syslog prefixes
    assert {c["signature"] for c in crashes} == {signed[:12]}
    assert {c["kind"] for c in crashes} == {"kernel-log"}
    listed = run_cli("list", "--db", index_address).stdout.decode()
    assert listed.count("kernel-log") == 2
    shown = run_cli("show", "1", "--db", index_address)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.decode()
    assert "label       kernel-log" in text and "no GPU dump" in text
    assert "no longer readable" not in text
    shown_json = json.loads(run_cli("show", "1", "--json", "--db", index_address).stdout)
    [kept] = shown_json["crash"]["files"]
    assert kept["kind"] == "kernel-log" and kept["path"] == str(LOGS / "syslog.log")
    # the log's hardware Xid drains the GPU in show as in inspect (the log read again)
    assert shown_json["advice"] == triaged["advice"] and triaged["advice"]["action"] == "drain"
    grouped = json.loads(run_cli("show", signed[:12], "--json", "--db", index_address).stdout)
    assert grouped["signature"]["count"] == 2 and grouped["signature"]["kind"] == "gpu-xid"


def test_report_records_the_log_alone_with_the_users_host(index_address, tmp_path):
    done = run_cli("report", REQUEST_DUMP, "--kernel-log", LOGS / "syslog.log", "--out",
                   tmp_path / "out", "--db", index_address, "--host", "rack4-node7")
    assert done.returncode == 0, done.stderr
    [crash] = json.loads(run_cli("list", "--json", "--db", index_address).stdout)["crashes"]
    assert crash["kind"] == "kernel-log" and crash["recorded_by"] == "report"
    assert crash["host"] == "rack4-node7"  # the user's word over the log's prefix
    shown = json.loads(run_cli("show", str(crash["id"]), "--json", "--db", index_address).stdout)
    assert "requests sglang-0.5.23 crash dump" in shown["signature"]["title"]


def test_a_log_with_no_xid_is_not_recorded_and_db_needs_record(index_address, tmp_path):
    (tmp_path / "quiet.log").write_text("Nov 23 10:15:00 node7 kernel: nothing of the GPU\n")
    done = run_cli("inspect", "--kernel-log", tmp_path / "quiet.log", "--record", "--db",
                   index_address)
    assert done.returncode == 1 and b"not recorded" in done.stderr
    refused = run_cli("inspect", "--kernel-log", LOGS / "syslog.log", "--db", index_address)
    assert refused.returncode == 2 and b"--db is for --record" in refused.stderr


def test_the_web_view_labels_it_and_gives_the_logs_advice(index_address):
    done = run_cli("inspect", "--kernel-log", LOGS / "syslog.log", "--record", "--db",
                   index_address)
    assert done.returncode == 0, done.stderr
    [crash] = json.loads(run_cli("list", "--json", "--db", index_address).stdout)["crashes"]
    server = UiServer(index_address)
    try:
        page = requests.get(f"{server.url}/crash/{crash['id']}", timeout=120).text
    finally:
        server.stop()
    assert "triaged from the driver's Xid lines alone" in page and "drain" in page


def test_the_index_keeps_the_xid_triage_so_show_and_the_ui_need_no_log(index_address, tmp_path):
    log = tmp_path / "node7-journalctl-k.txt"
    log.write_bytes((LOGS / "syslog.log").read_bytes())
    first = run_cli("inspect", "--kernel-log", log, "--record", "--db", index_address, "--json")
    assert first.returncode == 0, first.stderr
    triaged = json.loads(first.stdout)
    log.unlink()  # the log stays on the node, or is gone: the index keeps what was read of it
    shown = json.loads(run_cli("show", "1", "--json", "--db", index_address).stdout)
    kept = shown["xid_triage"]
    assert kept["summary"] == triaged["summary"] and kept["kernel_log"] == triaged["kernel_log"]
    [mmu] = [x for x in kept["kernel_log"]["xids"] if x["kind"] == "mmu-fault"]
    assert (mmu["xid"], mmu["fault_type"], mmu["address"]) == (31, "FAULT_PDE", "0x7fcdce700000")
    # the advice still weighs the log's hardware Xids, from the kept triage
    assert shown["advice"] == triaged["advice"] and shown["advice"]["action"] == "drain"
    text = run_cli("show", "1", "--db", index_address).stdout.decode()
    assert f"triage      {triaged['summary'][:40]}" in text
    assert "MMU fault at VA 0x7fcdce700000" in text and "no triage of it" not in text
    server = UiServer(index_address)
    try:
        page = requests.get(f"{server.url}/crash/1", timeout=120).text
    finally:
        server.stop()
    assert 'id="xid-summary"' in page and "MMU fault at VA 0x7fcdce700000" in page, page[-3000:]


def test_a_kernel_log_crash_recorded_before_the_index_kept_its_triage_reads_its_log(index_address,
                                                                                   tmp_path):
    """A crash recorded before migration 9 has no kept triage (NULL, as the migration leaves
    it): show says so and its advice reads the log again while the file is there."""
    from crashlab.index.store import Index

    done = run_cli("inspect", "--kernel-log", LOGS / "syslog.log", "--record", "--db", index_address)
    assert done.returncode == 0, done.stderr
    with Index(index_address) as index, index.backend.transaction():
        index.backend.execute("UPDATE crashes SET xid_triage = NULL")
    shown = json.loads(run_cli("show", "1", "--json", "--db", index_address).stdout)
    assert shown["xid_triage"] is None and shown["advice"]["action"] == "drain"
    text = run_cli("show", "1", "--db", index_address).stdout.decode()
    assert "the index keeps no triage of it" in text
