"""What ``crashlab report`` tells the issue of the machine it runs on: a real H200 dump (its
provenance: fixtures/gpu/PROVENANCE.md) lying in a home folder of a made-up user, reported by the
real command with the checkout's real cuda-gdb 12.4. The body and the coredump's triage name the
dump as the bundle holds it and the debugger by its name; with --anonymize the home folder (also
one outside /home) and the user name are replaced in every member; the host the user gives with
--host is shown as the user's word."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.test_report_verb import bundle_members

DUMP = ROOT / "fixtures" / "gpu" / "h200" / "tp_ranks.explain" / "core.1972.nvcudmp"
MEMBER = f"cores/{DUMP.name}"
USER = "walkrev"


@pytest.fixture
def home(tmp_path) -> Path:
    """A home folder outside /home (as HOME=/tmp/walkhome is), holding the dump."""
    folder = tmp_path / "walkhome"
    (folder / "dumps").mkdir(parents=True)
    shutil.copy(DUMP, folder / "dumps" / DUMP.name)
    return folder


def _report(home: Path, out: Path, cuda_gdb: str, *options: str) -> tuple[dict, dict[str, bytes]]:
    done = run_cli("report", home / "dumps" / DUMP.name, "--host", "node7", "--json",
                   "--out", out, *options,
                   env={"HOME": str(home), "USER": USER, "CRASHLAB_CUDA_GDB": cuda_gdb})
    assert done.returncode == 0, done.stderr.decode()
    issue = json.loads(done.stdout)
    members = bundle_members(Path(issue["bundle"]))
    return issue, members


def _texts(members: dict[str, bytes]) -> dict[str, bytes]:
    """Every member as bytes to search, gzip members unpacked too."""
    texts = dict(members)
    texts.update({f"{name} (unpacked)": gzip.decompress(data) for name, data in members.items()
                  if data[:2] == b"\x1f\x8b"})
    return texts


def test_the_body_and_the_triage_name_the_dump_as_bundled_and_the_debugger_by_its_name(
        home, tmp_path, real_cuda_gdb):
    issue, members = _report(home, tmp_path / "out", real_cuda_gdb)
    body = members["report.md"].decode()
    dump = str(home / "dumps" / DUMP.name)
    assert dump not in body and str(home) not in body and str(ROOT) not in body
    assert f"| File | `{MEMBER}`, " in body
    triage = json.loads(members[f"triage/{DUMP.name}.json"])
    assert triage["source"]["path"] == MEMBER
    debugger = triage["debugger"]
    assert debugger["status"] == "ok" and debugger["tool"] == "cuda-gdb", debugger["status"]
    [opened] = [command for command in debugger["transcript"] if "cudacore" in command["command"]]
    assert opened["command"] == f"target cudacore {MEMBER}"
    assert f"Opening GPU coredump: {MEMBER}" in opened["output"]
    assert dump.encode() not in members[f"triage/{DUMP.name}.json"]
    assert real_cuda_gdb.encode() not in members[f"triage/{DUMP.name}.json"]
    # report.json still says what was given and where each member came from (the user's word)
    assert issue["inputs"] == [dump] and {m["source"] for m in issue["members"]} == {dump}


def test_the_host_given_is_in_the_bodys_environment_as_the_users_word(home, tmp_path, real_cuda_gdb):
    issue, members = _report(home, tmp_path / "out", real_cuda_gdb)
    body = members["report.md"].decode()
    environment = body[body.index("### Environment"):body.index("### Triage")]
    assert ("Where it crashed, in the reporter's words (`--host`, not read from any file): host "
            "`node7`.") in environment
    assert issue["host"] == "node7" and issue["deployment"] is None


def test_anonymize_replaces_a_home_outside_home_and_the_user_in_every_member(
        home, tmp_path, real_cuda_gdb):
    issue, members = _report(home, tmp_path / "out", real_cuda_gdb, "--anonymize")
    forbidden = [str(home), home.name, USER, "node7", str(ROOT), real_cuda_gdb]
    for name, data in _texts(members).items():
        for word in forbidden:
            assert word.encode() not in data, (name, word)
    assert f"cores/{DUMP.name}" in {m["name"] for m in issue["members"]}  # bundled, not left out
    [given] = issue["inputs"]
    assert given.startswith("/home/user") and given.endswith(f"/dumps/{DUMP.name}"), given
    body = members["report.md"].decode()
    assert "host `host-1.example`" in body and issue["host"] == "host-1.example"


def test_a_home_folder_is_replaced_as_a_folder_only():
    """The reporting machine's HOME and the launch's, each named for its user: a path inside
    it is replaced, a folder whose name only starts like it or that ends in it is not, and one
    directly under / (/root) says nothing and stays."""
    from crashlab.privacy.anonymize import Anonymizer

    anonymizer = Anonymizer.for_launch([], {"HOME": "/data/alice", "USER": "alice"},
                                       here={"HOME": "/tmp/walkhome", "USER": USER})
    assert anonymizer.text("target cudacore /tmp/walkhome/dumps/x.nvcudmp") == \
        "target cudacore /home/user1/dumps/x.nvcudmp"
    assert anonymizer.text("--model-path /data/alice/m") == "--model-path /home/user2/m"
    assert anonymizer.text("/tmp/walkhome2/x /srv/tmp/walkhome/x") == "/tmp/walkhome2/x /srv/tmp/walkhome/x"
    assert anonymizer.text(f"{USER} ran it in /tmp/walkhome") == "user1 ran it in /home/user1"
    assert Anonymizer.for_launch([], {}, here={"HOME": "/root"}).text("/root/x") == "/root/x"
