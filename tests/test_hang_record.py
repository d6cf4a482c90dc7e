"""A real hang across 4 ranks, reported and recorded.

Real: torch.distributed on this CPU with the gloo backend (the SGLang environment's torch,
tests/gloo_hang/workload.py), rank 2 planted to skip an all_reduce, twice (at step 5, and at
step 9 in new processes, as the same hang after a restart), each rank's Flight Recorder dump
through PyTorch's own debug pipe, py-spy on the live processes, the real ``crashlab report``,
``inspect --record``, ``list``, ``show`` and ``ui`` as a user runs them, the index on SQLite and
on a real PostgreSQL server, the crash page in a real headless Chromium. Not real: each rank's
GPU dump is a SYNTHETIC builder dump and NVML is recorded as missing (tests/gloo_hang/capture.py).

Expected values come from the workload (rank 2, the planted step and so the collective's
number, the three samples) and the capture's own files, never from crashlab's output.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
import tarfile
from pathlib import Path

import psutil
import pytest

from crashlab.hangs.layout import CAPTURE, CAPTURES, Capture
from crashlab.published import parse
from tests.conftest import run_cli
from tests.gloo_hang.capture import (
    LAGGING,
    PLANTED,
    capture,
    gpu_dumps,
    ptrace_refusal,
    py_spy_of,
    python_of,
    start,
    wait_ready,
)
from tests.test_report_verb import bundle_members
from tests.test_ui_browser import browser  # noqa: F401 - the real Chromium, a fixture
from tests.ui_fleet import UiServer

#: the SGLang environment's torch, no server: a group of its own, started with the real-SGLang
#: tier (tests/conftest.py) but on another worker than its servers
pytestmark = pytest.mark.sglang

RESTART_PLANTED = 9
SAMPLES = 3
WORLD = 4
#: A token of the shape every report masks, planted in a copy of a capture's files.
TOKEN = "hf_" + "Q" * 34


@pytest.fixture(scope="module")
def runs(sglang_env, tmp_path_factory) -> dict[str, Path]:
    """The planted hang and the same hang in new processes, each captured (3 host samples, the
    GPU dumps); no rank outlives the fixture."""
    tool = py_spy_of(sglang_env)
    if not tool.is_file():
        pytest.skip(f"no py-spy in the SGLang environment at {tool}")
    root = tmp_path_factory.mktemp("gloo-record")
    python = python_of(sglang_env)
    hung = {"first": start(python, "skip", root / "first" / "processes"),
            "restart": start(python, "skip", root / "restart" / "processes",
                             planted=RESTART_PLANTED)}
    pids = [p.pid for run in hung.values() for p in run.processes.values()]
    try:
        for run in hung.values():
            wait_ready(run)
        refusal = ptrace_refusal(tool, hung["first"].processes[0].pid)
        if refusal:
            pytest.skip(f"py-spy cannot read a process on this machine (ptrace not allowed?): {refusal}")
        for name, run in hung.items():
            run_dir = root / name
            capture(run, run_dir, tool=tool, samples=SAMPLES,
                    gpu_dumps=gpu_dumps(run_dir, list(run.processes)), native=False)
    finally:
        for run in hung.values():
            run.stop()
    assert not [pid for pid in pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    return {name: root / name for name in hung}


def _folder(run_dir: Path) -> Path:
    return next((run_dir / CAPTURES).iterdir())


def _report(tmp_path: Path, *args) -> tuple[dict, str, dict[str, bytes]]:
    done = run_cli("report", *args, "--out", tmp_path / "out", "--json", timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    issue = json.loads(done.stdout)
    members = bundle_members(Path(issue["bundle"]))
    return issue, members["report.md"].decode(), members


def test_the_report_of_a_capture_tells_the_hang_and_bundles_the_capture(runs, tmp_path):
    folder = _folder(runs["first"])
    record = parse(Capture, (folder / CAPTURE).read_bytes())
    issue, body, members = _report(tmp_path, folder)
    seq = PLANTED + 1
    assert issue["found"] is True
    [hang] = issue["hangs"]
    assert hang["reading"] == "hang/reading.json" and hang["found"] is True
    verdict = hang["verdicts"][0]
    assert (verdict["kind"], verdict["ranks"], verdict["op"], verdict["seq"]) == \
        ("never-entered", [LAGGING], "all_reduce", seq)
    assert [(r["rank"], r["state"]) for r in hang["ranks"]] == [(n, "stuck") for n in range(WORLD)]
    [group] = hang["groups"]
    assert (group["seq"], group["behind"], group["waiting"]) == (seq, [LAGGING], [0, 1, 3])
    statuses = {(s["source"], s["status"]): s["rows"] for s in hang["sources"]}
    assert statuses == {("py-spy", "ok"): WORLD * SAMPLES, ("flight-recorder", "ok"): WORLD * SAMPLES,
                        ("nvml", "missing"): SAMPLES, ("gpu-dump", "ok"): WORLD}

    # the body: a Hang section with the verdict, the ranks' table and each source's status
    assert "### Hang across ranks" in body
    assert f"rank 2 never entered all_reduce \\#<!-- -->{seq} of pg 0 (default_pg)" in body
    for rank in range(WORLD):
        assert f"| {rank} | {record.ranks[rank].pid} | stuck |" in body
    assert "| nvml | missing | 3 | machine | no NVML: this machine has no GPU |" in body
    assert issue["title"].startswith("[Bug] all_reduce of default_pg: rank 2 never entered")

    # the bundle: the reading, named as bundled, and every file capture.json names, by its
    # path inside the capture; nothing of this machine's folders in any name or in the reading
    named = {row.path for row in record.sources if row.path and row.source != "gpu-dump"}
    assert {f"hang/capture/{path}" for path in named} | {"hang/capture/capture.json",
                                                         "hang/reading.json"} <= set(members)
    assert all(not name.startswith("/") and ".." not in name for name in members)
    reading = json.loads(members["hang/reading.json"])
    assert reading["capture"]["path"] == "hang/capture"
    assert str(folder) not in members["hang/reading.json"].decode()
    assert str(folder) not in body
    steps = reading["ranks"][0]["groups"][0]["timeline"]
    assert [s["sample"] for s in steps] == list(range(SAMPLES))
    py_spy = "rank-0/sample-1/py-spy.txt"
    assert members[f"hang/capture/{py_spy}"] == (folder / py_spy).read_bytes()
    pickled = next(p for p in sorted(named) if p.endswith(".pkl"))
    assert members[f"hang/capture/{pickled}"] == (folder / pickled).read_bytes()
    # the GPU dumps only when asked
    assert not [name for name in members if name.startswith("hang/gpu-dumps/")]
    assert not [m for m in issue["members"] if m["kind"] == "coredump"]


def test_the_gpu_dumps_go_in_when_asked_and_the_budget_leaves_out_the_least_needed(runs, tmp_path):
    folder = _folder(runs["first"])
    issue, _, members = _report(tmp_path / "all", folder, "--gpu-dumps")
    dumps = sorted(name for name in members if name.startswith("hang/gpu-dumps/"))
    assert dumps == [f"hang/gpu-dumps/core_rank{rank}.nvcudmp" for rank in range(WORLD)]
    on_disk = runs["first"] / "incarnation-0" / "cores" / "core_rank0.nvcudmp"
    assert members["hang/gpu-dumps/core_rank0.nvcudmp"] == on_disk.read_bytes()

    # a budget that holds the capture's other files and less than half of any dump: the dumps
    # are left out, each with why, and the reading stays
    without, _, _ = _report(tmp_path / "without", folder)
    smallest = min(m["compressed_bytes"] for m in issue["members"] if m["kind"] == "coredump")
    budget = without["bundle_bytes"] + smallest // 2
    small, _, kept = _report(tmp_path / "small", folder, "--gpu-dumps", "--max-size", str(budget))
    assert "hang/reading.json" in kept and not [n for n in kept if n.startswith("hang/gpu-dumps/")]
    left = {item["member"]: item["reason"] for item in small["left_out"]}
    assert {f"hang/gpu-dumps/core_rank{rank}.nvcudmp" for rank in range(WORLD)} <= set(left)
    assert all("budget" in reason for reason in left.values())
    assert small["hangs"][0]["reading"] == "hang/reading.json"


def test_a_secret_in_a_capture_is_masked_in_its_text_and_keeps_its_pickle_out(runs, tmp_path):
    copied = tmp_path / "run"
    shutil.copytree(runs["first"], copied, ignore=shutil.ignore_patterns("processes"))
    folder = _folder(copied)
    text = folder / "rank-1" / "sample-0" / "py-spy.txt"
    text.write_text(text.read_text() + f"\n    token {TOKEN} (workload.py:1)\n")
    pickled = folder / "rank-1" / "sample-0" / "flight-recorder.pkl"
    entries = pickle.loads(pickled.read_bytes())
    entries["comm_lib_version"] = f"gloo {TOKEN}"
    pickled.write_bytes(pickle.dumps(entries, protocol=2))
    done = run_cli("report", folder, "--out", tmp_path / "out", "--json",
                   env={"HF_TOKEN": TOKEN}, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    issue = json.loads(done.stdout)
    members = bundle_members(Path(issue["bundle"]))
    assert not [name for name, data in members.items() if TOKEN.encode() in data]
    assert b"token ***" in members["hang/capture/rank-1/sample-0/py-spy.txt"]
    [left] = [item for item in issue["left_out"]
              if item["member"] == "hang/capture/rank-1/sample-0/flight-recorder.pkl"]
    assert "holds a secret" in left["reason"]


def _cli_json(*args) -> dict:
    done = run_cli(*args, "--json", timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_the_same_hang_after_a_restart_is_one_signature_of_kind_hang(runs, index_address):
    recorded = []
    for name in ("first", "restart"):
        done = run_cli("inspect", runs[name], "--record", "--db", index_address, timeout=300)
        assert done.returncode == 0, done.stderr.decode()
        recorded.append(done.stderr.decode())
    assert all("recorded as crash" in said for said in recorded)
    again = run_cli("inspect", runs["first"], "--record", "--db", index_address, timeout=300)
    assert "already recorded as crash" in again.stderr.decode()

    crashes = _cli_json("list", "--db", index_address)["crashes"]
    assert len(crashes) == 2 and {c["kind"] for c in crashes} == {"hang"}
    assert len({c["signature"] for c in crashes}) == 1
    by_source = {Path(c["source"]): c for c in crashes}
    listed = run_cli("list", "--db", index_address).stdout.decode()
    rows = [row for row in listed.splitlines() if row[:1].isdigit()]
    assert len(rows) == 2 and all("  hang  " in row for row in rows)

    for name, planted in (("first", PLANTED), ("restart", RESTART_PLANTED)):
        crash = by_source[_folder(runs[name])]
        assert crash["summary"] == f"Hang across {WORLD} ranks: never-entered at all_reduce #{planted + 1}"
        shown = _cli_json("show", str(crash["id"]), "--db", index_address)
        assert shown["crash"]["kind"] == "hang" and shown["signature"]["count"] == 2
        assert shown["signature"]["kind"] == "collective-hang"
        by_rank = {r["rank"]: r for r in shown["hang"]["ranks"]}
        for rank in range(WORLD):
            [group] = by_rank[rank]["groups"]
            enqueued = planted if rank == LAGGING else planted + 1
            assert [(s["sample"], s["enqueued"], s["completed"]) for s in group["timeline"]] == \
                [(sample, enqueued, planted) for sample in range(SAMPLES)]
        text = " ".join(run_cli("show", str(crash["id"]), "--db", index_address).stdout.decode().split())
        assert f"rank 2 never entered all_reduce #{planted + 1}" in text
        assert (f"rank 2 pg 0 (default_pg): sample 0: enqueued all_reduce #{planted}, "
                f"completed #{planted}") in text


def test_a_capture_recorded_before_its_gpu_dumps_is_brought_up_to_date_when_recorded_again(
        runs, index_address, tmp_path):
    """A copy of the first run whose capture.json says what it said before its GPU dumps were
    collected (each row timed out, no dump named): recorded, the hang's kept reading has no GPU
    side. The capture as it ended, recorded again (as serve does with a run's crashes, or
    inspect --record), is the same crash, and its kept reading now has every rank's dump."""
    run = tmp_path / "run"
    shutil.copytree(runs["first"], run, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
    folder = _folder(run)
    ended = (folder / CAPTURE).read_bytes()
    early = parse(Capture, ended)
    early.gpu_dumps = []
    for row in early.sources:
        if row.source == "gpu-dump":
            row.status, row.path, row.size_bytes = "timeout", None, None
            row.note = "triggered, not collected within 120 s"
    (folder / CAPTURE).write_text(early.model_dump_json())

    first = run_cli("inspect", run, "--record", "--db", index_address, timeout=300)
    assert first.returncode == 0, first.stderr.decode()
    said = re.search(r"recorded as crash (\d+) ", first.stderr.decode())
    assert said, first.stderr.decode()
    crash_id = said[1]
    before = _cli_json("show", crash_id, "--db", index_address)
    assert [rank["gpu"] for rank in before["hang"]["ranks"]] == [None] * WORLD

    (folder / CAPTURE).write_bytes(ended)
    again = run_cli("inspect", run, "--record", "--db", index_address, timeout=300)
    assert f"already recorded as crash {crash_id} " in again.stderr.decode()
    after = _cli_json("show", crash_id, "--db", index_address)
    dumps = {r["rank"]: r["gpu"]["dump"] for r in after["hang"]["ranks"] if r["gpu"]}
    assert dumps == {row.rank: row.path for row in parse(Capture, ended).sources
                     if row.source == "gpu-dump"}
    waits = {r["rank"]: {w["kind"] for w in r["gpu"]["waits"]} for r in after["hang"]["ranks"]}
    assert all("collective-wait" in waits[rank] for rank in range(WORLD) if rank != LAGGING)
    assert after["signature"]["count"] == 1
    assert len(_cli_json("list", "--db", index_address)["crashes"]) == 1


def test_the_crash_page_of_a_hang_shows_each_ranks_state_and_timeline(runs, browser, tmp_path):  # noqa: F811
    address = str(tmp_path / "index.sqlite")
    done = run_cli("inspect", runs["first"], "--record", "--db", address, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    [crash] = _cli_json("list", "--db", address)["crashes"]
    server = UiServer(address)
    try:
        browser.get(f"{server.url}/crash/{crash['id']}")
        from selenium.webdriver.common.by import By

        headline = browser.find_element(By.ID, "hang-headline").text
        assert headline == f"Hang across {WORLD} ranks: never-entered at all_reduce #{PLANTED + 1}"
        rows = [row.text.split(" ", 3) for row in
                browser.find_elements(By.CSS_SELECTOR, "#hang-ranks tr")[1:]]
        assert [(int(r[0]), r[2]) for r in rows] == [(rank, "stuck") for rank in range(WORLD)]
        timeline = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
                    for row in browser.find_elements(By.CSS_SELECTOR, "#hang-timeline tr")[1:]]
        assert len(timeline) == WORLD * SAMPLES
        for rank, _, sample, enqueued, _, completed in timeline:
            seq = PLANTED if rank == str(LAGGING) else PLANTED + 1
            assert (enqueued, completed) == (f"all_reduce #{seq}", f"#{PLANTED}"), (rank, sample)
        sources = browser.find_element(By.ID, "hang-sources").text
        assert "nvml missing 3 machine no NVML: this machine has no GPU" in sources
    finally:
        server.stop()


def test_a_bundle_holds_no_link_or_absolute_name(runs, tmp_path):
    issue, _, _ = _report(tmp_path, runs["first"])
    with tarfile.open(issue["bundle"], "r:gz") as bundle:
        for member in bundle.getmembers():
            assert member.isfile() and not member.name.startswith("/") and ".." not in member.name
