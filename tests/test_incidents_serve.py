"""Incidents from real runs: two ``crashlab serve`` runs of the stand-in SGLang server of one
PD-disaggregated deployment (tests/standin, taught SGLang's --disaggregation-mode for this): a
prefill server whose scheduler is killed, then a decode server that faults on the GPU on both
of its ranks' watch. Their records, taken from the runs' own manifest and report.json, make one
incident whose first failure is the prefill server's.
"""

from __future__ import annotations

import os
import signal
from datetime import datetime
from pathlib import Path

from crashlab.incidents import group
from crashlab.incidents.fromrun import crashes, xid_lines
from crashlab.report.run import RunReport
from crashlab.supervise.manifest import load
from tests.schema_check import errors
from tests.serve_harness import FAST, Serve, environment, free_port, process, sglang


def folder(path: Path) -> Path:
    path.mkdir()
    return path


def records(serve: Serve):
    manifest = load(serve.run_dir)
    report = RunReport.model_validate_json((serve.run_dir / "report.json").read_bytes())
    return crashes(manifest, report, str(serve.run_dir)), xid_lines(manifest, report)


def test_a_decode_crash_after_its_prefill_server_died_is_one_incident_led_by_the_prefill(tmp_path):
    prefill = Serve(folder(tmp_path / "prefill"), sglang(free_port(), "--disaggregation-mode", "prefill"),
                    *FAST, "--deployment", "pd-1", "--incident-window", "90", env=environment())
    manifest = prefill.wait_healthy()
    os.kill(process(manifest, "scheduler", "TP0")["pid"], signal.SIGKILL)  # the OOM killer's way
    assert prefill.finish() == 0, prefill.stderr
    decode = Serve(folder(tmp_path / "decode"), sglang(free_port(), "--disaggregation-mode=decode",
                                               "--tp-size", "2"), *FAST, "--deployment", "pd-1",
                   env=environment(crash="gpu-fault", crash_on="start"))
    assert decode.finish() == 0, decode.stderr

    for serve, role, window in ((prefill, "prefill", 90.0), (decode, "decode", 120.0)):
        assert serve.manifest()["role"] == role
        assert serve.manifest()["options"]["deployment"] == "pd-1"
        assert serve.manifest()["options"]["incident_window"] == window
        report = serve.report()
        assert errors(report, "run") == []
        assert report["deployment"] == {"host": serve.manifest()["crashlab"]["host"],
                                        "label": "pd-1", "role": role, "incident_window_s": window}
    assert "disaggregation_mode='prefill'" in (prefill.incarnation / "stderr.log").read_text()

    prefill_crashes, prefill_xids = records(prefill)
    decode_crashes, decode_xids = records(decode)
    assert prefill_xids == decode_xids == []  # /dev/kmsg is not readable here, or quiet
    assert [(c.role, c.label, c.rank) for c in prefill_crashes] == [("prefill", None, "TP0")]
    incidents = group(decode_crashes + prefill_crashes)
    assert len(incidents) == 1
    incident = incidents[0]
    assert incident.first_failure == prefill_crashes[0]
    assert [(c.role, c.label, c.rank) for c in incident.members] == [
        ("prefill", None, "TP0"), ("decode", "FAULT", "TP0"), ("decode", "COLLATERAL", "TP1")]
    assert "moe_align_block_size" in incident.members[1].first_line
    fault_dump = decode.report()["incidents"][0]["dumps"][0]
    assert incident.members[1].time < datetime.fromisoformat(fault_dump["written_at"])  # its fault
    assert incident.members[2].time == datetime.fromisoformat(
        decode.report()["incidents"][0]["dumps"][1]["written_at"])
    assert any("same --deployment label 'pd-1'" in note for note in incident.notes)
    assert any("the prefill server" in note and "likely its consequence" in note
               for note in incident.notes)
    assert incident.id == group(prefill_crashes)[0].id  # the decode server's records keep it

    # the same two runs without a shared label, and a window shorter than the gap between them
    unlabelled = [_without_label(c) for c in decode_crashes + prefill_crashes]
    assert len(group(unlabelled)) == 1  # one host, one deployment
    gap = (incident.members[1].time - incident.first_failure.time).total_seconds()
    assert len(group(decode_crashes + prefill_crashes, window=gap / 2)) == 2


def _without_label(crash):
    from dataclasses import replace

    return replace(crash, deployment=None)


def test_a_non_sglang_command_has_no_role_and_a_missing_label_is_refused(tmp_path):
    serve = Serve(tmp_path, ["sh", "-c", "kill -ABRT $$"], env=environment())
    assert serve.finish() == 0, serve.stderr
    assert serve.manifest()["role"] is None
    assert serve.report()["deployment"]["role"] is None
    assert serve.report()["deployment"]["label"] is None
    [crash] = records(serve)[0]
    assert crash.role is None and crash.label is None
    for label, message in ((" ", "deployment label cannot be empty"),
                           ("--", "'--' is not a deployment label (is the label missing?)")):
        refused = Serve(folder(tmp_path / f"refused{len(label)}"), ["true"], "--deployment", label,
                        env=environment())
        assert refused.finish() == 2
        assert refused.stderr.count("\n") == 1 and message in refused.stderr, refused.stderr
        assert not list(refused.runs.glob("*/manifest.json"))
