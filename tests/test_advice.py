"""The advice (crashlab.advice): its rules over NVIDIA's Xid catalogue as crashlab copies it
(crashlab.incidents.xidcatalog), the known-fixes table with workarounds and fatal rows, a real
dump's inspect, and a real index (SQLite and PostgreSQL) with crashes on one GPU's UUID read back
by ``crashlab show`` and the ui. serve following it is tests/test_advice_serve.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from pydantic import ValidationError

import crashlab
from crashlab.advice.decide import Evidence, GpuHistory, RecentRestarts, advise
from crashlab.advice.evidence import classed
from crashlab.incidents.xidcatalog import xid_kind
from crashlab.index.recording import record_all
from crashlab.index.records import FleetFacts, NewCrash
from crashlab.owner import fixes
from crashlab.report.markdown_escape import inline
from tests.conftest import ROOT, run_cli
from tests.index_fixtures import crash, signature
from tests.ui_fleet import UiServer

FAULT_DUMP = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
LINK = "https://github.com/vllm-project/vllm/issues/35566"


def _advice(*xids: int, **more):
    return advise(Evidence(xids=tuple(classed(x, "PCI:0000:3b:00") for x in xids), **more))


# -- Xids ------------------------------------------------------------------------------------

@pytest.mark.parametrize("xid", [48, 62, 64, 79, 95, 119, 120, 140])
def test_a_hardware_xid_drains_its_gpu_by_the_address_the_line_names(xid):
    advice = _advice(13, xid)  # a software Xid beside it does not hide it
    assert (advice.action, advice.gpu) == ("drain", "PCI:0000:3b:00")
    assert advice.reason.startswith(f"Xid {xid} ({xid_kind(xid).description}) is a hardware fault")


def test_an_xid_whose_action_resets_the_gpu_drains_it_though_its_origin_is_unknown():
    kind = xid_kind(109)
    assert kind.origin == "unknown" and kind.takes_gpu_out_of_service
    advice = _advice(109)
    assert advice.action == "drain"
    assert f"NVIDIA's action {kind.immediate_action} takes the GPU out of service" in advice.reason


@pytest.mark.parametrize("xid", [63, 92, 94])
def test_a_hardware_xid_nvidia_says_to_ignore_or_restart_the_application_for_does_not_drain(xid):
    assert xid_kind(xid).origin == "hardware"
    assert xid_kind(xid).immediate_action in ("IGNORE", "RESTART_APP")
    assert _advice(xid).action == "restart"


def test_software_xids_are_a_restart_that_names_them():
    advice = _advice(13, 31, 43, earlier=0)
    assert advice.action == "restart"
    assert advice.reason == ("a crash (Xid 13, 31, 43: software), the first of its signature in "
                             "the index; no known fix")


# -- the index's history and serve's restarts ------------------------------------------------

def test_several_signatures_only_on_one_gpu_drain_it_where_the_index_knows_other_gpus():
    advice = advise(Evidence(gpu=GpuHistory("GPU-1", ("aaa", "bbb"), other_gpus=3)))
    assert (advice.action, advice.gpu) == ("drain", "GPU-1")
    assert advice.reason.startswith("2 different signatures (aaa, bbb) crashed on this GPU")
    assert advise(Evidence(gpu=GpuHistory("GPU-1", ("aaa", "bbb"), other_gpus=0))).action == "restart"
    assert advise(Evidence(gpu=GpuHistory("GPU-1", ("aaa",), other_gpus=3))).action == "restart"


def test_a_crash_after_n_restarts_within_m_minutes_is_a_loop_and_a_drain_comes_first():
    assert advise(Evidence(recent=RecentRestarts(2, 3, 10))).action == "restart"
    loop = advise(Evidence(recent=RecentRestarts(3, 3, 10)))
    assert (loop.action, loop.reason) == ("stop", "a crash loop: it crashed again after 3 restarts "
                                                  "within 10 min (the limit is 3)")
    assert _advice(79, recent=RecentRestarts(3, 3, 10)).action == "drain"


# -- the known-fixes table -------------------------------------------------------------------

def _row(**fields) -> str:
    row = {"artifact": "flashinfer", "kernel_pattern": "^BatchPrefill", "link": LINK,
           "summary": "a fault", "source": "a test row", **fields}
    return json.dumps({"about": "test", "fixes": [row]})


def _evidence(table: fixes.FixTable, version: str | None) -> Evidence:
    entry = fixes.find(table, "flashinfer", "BatchPrefillWithPagedKVCacheKernel", None)
    assert entry is not None
    return Evidence(fix=entry.known(), fix_status=fixes.status(entry, version), version=version)


def test_the_shipped_table_is_valid_and_its_workaround_names_its_source():
    [row] = [r for r in fixes.shipped().fixes if r.workaround]
    assert row.workaround_source is not None and fixes.is_web_link(row.workaround_source)


def test_a_workaround_row_without_a_released_fix_is_advised_with_its_source():
    table = fixes.parse(_row(workaround="--disable-cuda-graph", workaround_source=LINK))
    evidence = _evidence(table, "0.6.12")
    assert evidence.fix_status == "not-released"
    advice = advise(evidence)
    assert (advice.action, advice.workaround, advice.link) == (
        "workaround", "--disable-cuda-graph", LINK)
    assert advice.reason == "a fault; no release of flashinfer holds a fix yet"


def test_a_fix_in_a_later_release_is_a_workaround_to_upgrade_and_in_this_one_a_restart():
    table = fixes.parse(_row(fixed_in="0.6.18"))
    later = advise(_evidence(table, "0.6.12"))
    assert (later.action, later.workaround) == ("workaround", "flashinfer 0.6.18")
    held = advise(_evidence(table, "0.6.18"))
    assert held.action == "restart" and "another bug, or a regression" in held.reason


def test_a_row_marked_fatal_stops():
    advice = advise(_evidence(fixes.parse(_row(fatal=True)), "0.6.12"))
    assert (advice.action, advice.link) == ("stop", LINK)
    assert advice.reason.startswith("the known-fixes table marks this crash fatal")


@pytest.mark.parametrize("fields, words", [
    ({}, "a fixed_in release, a workaround or fatal"),
    ({"workaround": "--disable-cuda-graph"}, "a workaround and its workaround_source"),
    ({"fixed_in": "1.0", "workaround_source": LINK}, "a workaround and its workaround_source"),
    ({"workaround": "x", "workaround_source": "javascript:alert(1)"}, "not an http(s) address"),
])
def test_a_row_that_cannot_be_followed_is_refused(fields, words):
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        fixes.parse(_row(**fields))


# -- a real dump, and the index ---------------------------------------------------------------

def test_inspect_gives_a_dumps_advice_in_json_the_terminal_and_markdown():
    report = crashlab.inspect(FAULT_DUMP, sass=False)
    assert report.advice is not None and report.advice.action == "restart"
    assert report.advice.reason == "a crash; no known fix"
    shown = run_cli("inspect", "--no-sass", FAULT_DUMP)
    assert "advice: restart: a crash; no known fix" in shown.stdout.decode()
    as_json = json.loads(run_cli("inspect", "--no-sass", "--json", FAULT_DUMP).stdout)
    assert as_json["advice"] == report.advice.model_dump()
    assert "Advice: restart: a crash; no known fix" in \
        run_cli("inspect", "--no-sass", "--markdown", FAULT_DUMP).stdout.decode()


A, B, C = signature("a1a1a1a1a1a1"), signature("b2b2b2b2b2b2"), signature("c3c3c3c3c3c3")


def _on(key: str, sig, at: float, gpu: str, **more) -> NewCrash:
    return crash(key, sig, at, facts=FleetFacts(gpu_uuid=gpu), **more)


def _recorded(address: str, crashes: list[NewCrash], tmp_path: Path) -> dict[str, int]:
    warnings: list[str] = []
    said: list[str] = []
    assert record_all(crashes, address, tmp_path, warnings.append, said.append) == len(crashes), \
        warnings
    return {c.key: int(line.split("crash ")[1].split()[0]) for c, line in zip(crashes, said, strict=True)}


def _show(address: str, crash_id: int) -> dict:
    done = run_cli("show", str(crash_id), "--json", "--db", address)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)["advice"]


def test_show_drains_a_gpu_where_signatures_crashed_on_it_alone(index_address, tmp_path):
    ids = _recorded(index_address, [
        _on("a1", A, 1000.0, "GPU-bad"), _on("b1", B, 1100.0, "GPU-bad"),
        # C crashed on the bad GPU and on another: it says nothing of the bad one
        _on("c1", C, 1200.0, "GPU-bad"), _on("c2", C, 1300.0, "GPU-good"),
        # a COLLATERAL dump on the good GPU is another rank's fault seen from it
        _on("a2", A, 1400.0, "GPU-good", label="COLLATERAL")], tmp_path)
    advice = _show(index_address, ids["b1"])
    assert (advice["action"], advice["gpu"]) == ("drain", "GPU-bad")
    assert advice["reason"].startswith(f"2 different signatures ({A.hash}, {B.hash}) crashed on "
                                       "this GPU and on none of the index's 1 other GPU")
    assert _show(index_address, ids["c2"])["action"] == "restart"
    text = run_cli("show", str(ids["b1"]), "--db", index_address).stdout.decode()
    assert "advice drain GPU-bad: 2 different signatures" in " ".join(text.split())
    server = UiServer(index_address)
    try:
        page = requests.get(f"{server.url}/crash/{ids['b1']}", timeout=120).text
    finally:
        server.stop()
    assert 'id="advice">drain GPU-bad: 2 different signatures' in page


def test_show_says_how_often_a_signature_was_seen_before(index_address, tmp_path):
    ids = _recorded(index_address, [_on(f"a{n}", A, 1000.0 + n, "GPU-1") for n in range(3)]
                    + [_on("b1", B, 900.0, "GPU-2")], tmp_path)
    first, last = _show(index_address, ids["a0"]), _show(index_address, ids["a2"])
    assert first["action"] == last["action"] == "restart"
    assert first["reason"] == "a crash, the first of its signature in the index; no known fix"
    assert last["reason"] == "a crash, seen 2 times before; no known fix"
    # one GPU with one signature on it, though the index knows another GPU: no drain
    assert _show(index_address, ids["b1"])["action"] == "restart"


# -- a kernel log given to inspect and report (constructed lines: fixtures/logs/xid/PROVENANCE.md)

LOGS = ROOT / "fixtures" / "logs" / "xid"
REQUEST_DUMP = ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.23.pkl"
[NULL_ARGUMENT] = (ROOT / "fixtures" / "gpu" / "h200" / "null_argument.explain").glob("core.*.nvcudmp")
RESET_REQUIRED = "Xid 95 (Uncontained memory error): the driver says a GPU reset is required (RST)"


def test_a_node_log_alone_drains_the_gpu_its_first_reset_flag_names():
    """syslog.log's 94 says RST: No (a contained error: NVIDIA's action is RESTART_APP), its 95
    RST: Yes: the 95 drains."""
    done = run_cli("inspect", "--kernel-log", LOGS / "syslog.log", "--json")
    assert done.returncode == 0, done.stderr.decode()
    advice = json.loads(done.stdout)["advice"]
    assert (advice["action"], advice["gpu"]) == ("drain", "PCI:0000:3b:00")
    assert advice["reason"].startswith(RESET_REQUIRED)
    assert f"advice: drain PCI:0000:3b:00: {RESET_REQUIRED}" in \
        run_cli("inspect", "--kernel-log", LOGS / "syslog.log").stdout.decode()
    said = inline(f"drain PCI:0000:3b:00: {advice['reason']}")  # as Markdown escapes it
    assert f"Advice: {said}\n" in \
        run_cli("inspect", "--kernel-log", LOGS / "syslog.log", "--markdown").stdout.decode()


def test_a_contained_error_and_an_injected_one_are_a_restart():
    done = run_cli("inspect", "--kernel-log", LOGS / "mig-and-old.log", "--json")
    assert json.loads(done.stdout)["advice"]["action"] == "restart"


def test_the_recovery_action_of_xid_154_drains(tmp_path):
    [line] = [line for line in (LOGS / "syslog.log").read_text().splitlines() if ": 154, " in line]
    (tmp_path / "kern.log").write_text(line + "\n")
    advice = json.loads(run_cli("inspect", "--kernel-log", tmp_path / "kern.log", "--json").stdout)
    assert advice["advice"]["action"] == "drain"
    assert "the driver says its recovery action is now GPU Reset Required" in \
        advice["advice"]["reason"]


def test_a_real_dump_with_its_kernel_log_weighs_the_logs_xids():
    done = run_cli("inspect", NULL_ARGUMENT, "--no-sass", "--kernel-log",
                   LOGS / "null_argument-agrees.log", "--json")
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["advice"] == {
        "action": "restart", "reason": "a crash (Xid 13, 31, 43: software); no known fix",
        "gpu": None, "workaround": None, "link": None}


def test_report_of_a_request_dump_and_a_node_log_gives_the_incidents_advice(tmp_path):
    done = run_cli("report", REQUEST_DUMP, "--kernel-log", LOGS / "syslog.log", "--out", tmp_path,
                   "--json")
    assert done.returncode == 0, done.stderr.decode()
    issue = json.loads(done.stdout)
    assert issue["advice"] == issue["xid_triage"]["advice"]
    assert issue["advice"]["reason"].startswith(RESET_REQUIRED)
    said = inline(f"drain PCI:0000:3b:00: {issue['advice']['reason']}")
    assert f"- Advice: {said}\n" in Path(issue["body"]).read_text()
