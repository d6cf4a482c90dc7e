"""crashlab report --kernel-log through the real command: a request dump and a node's kernel
log with no GPU dump make a triaged, signed incident; with a real H200 dump the log's Xids join
its triage (constructed lines: fixtures/logs/xid/PROVENANCE.md)."""

from __future__ import annotations

import json
import tarfile

from tests.conftest import ROOT, run_cli

LOGS = ROOT / "fixtures" / "logs" / "xid"
REQUEST_DUMP = ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.23.pkl"
[NULL_ARGUMENT] = (ROOT / "fixtures" / "gpu" / "h200" / "null_argument.explain").glob("core.*.nvcudmp")
SERIAL = "1650123456789"


def test_a_request_dump_and_a_kernel_log_make_a_signed_incident(tmp_path):
    done = run_cli("report", REQUEST_DUMP, "--kernel-log", LOGS / "syslog.log", "--out", tmp_path,
                   "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    triaged = issue["xid_triage"]
    assert issue["found"] and triaged["signature"]["kind"] == "gpu-xid"
    assert "requests sglang-0.5.23 crash dump, 2 in flight" in triaged["signature"]["parts"]
    assert "kernel unknown: no GPU dump" in triaged["summary"]
    body = next(tmp_path.glob("*.md")).read_text()
    assert triaged["summary"] in body and SERIAL not in body and "0a1b2c3d" not in body
    with tarfile.open(next(tmp_path.glob("*.tar.gz"))) as bundle:
        for member in bundle.getmembers():
            if member.isfile():
                assert SERIAL.encode() not in bundle.extractfile(member).read(), member.name


def test_with_a_dump_the_log_joins_its_triage_and_a_contradiction_is_said(tmp_path):
    done = run_cli("report", NULL_ARGUMENT, "--kernel-log", LOGS / "null_argument-differs.log",
                   "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    body = done.stdout.decode()
    assert "contradicts the explanation" in body and "Xid 31" in body


def test_a_bad_kernel_log_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "binary").write_bytes(b"\0" * 100)
    done = run_cli("report", REQUEST_DUMP, "--kernel-log", tmp_path / "binary", "--out",
                   tmp_path / "out")
    assert done.returncode == 2 and b"not text" in done.stderr
    assert not (tmp_path / "out").exists()
