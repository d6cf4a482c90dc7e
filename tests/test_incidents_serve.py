"""Incidents from real runs: two ``crashlab serve`` runs of the stand-in SGLang server of one
PD-disaggregated deployment (tests/standin, taught SGLang's --disaggregation-mode for this): a
prefill server whose scheduler is killed, then a decode server that faults on the GPU on both
of its ranks' watch. Their records, as serve recorded them in the crash index from the runs'
report.json, make one incident whose first failure is the prefill server's.
"""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime
from pathlib import Path

from crashlab.incidents import group
from crashlab.index import Index
from tests.conftest import run_cli
from tests.schema_check import errors
from tests.serve_harness import FAST, Serve, environment, free_port, post_generate, process, sglang


def folder(path: Path) -> Path:
    path.mkdir()
    return path


def records(serve: Serve, db: Path):
    """The run's crashes as the index gives them to crashlab.incidents, and its Xid lines."""
    with Index(str(db)) as index:
        crashes = index.grouping_records(["c.run_dir = ?"], [str(serve.run_dir)])
        xids = [x for x in index.xid_lines(0, 1e12) if x.run_dir == str(serve.run_dir)]
    return crashes, xids


def test_a_decode_crash_after_its_prefill_server_died_is_one_incident_led_by_the_prefill(tmp_path):
    db = tmp_path / "index.sqlite"
    prefill = Serve(folder(tmp_path / "prefill"), sglang(free_port(), "--disaggregation-mode", "prefill"),
                    *FAST, "--deployment", "pd-1", "--incident-window", "90", "--db", str(db),
                    env=environment())
    manifest = prefill.wait_healthy()
    os.kill(process(manifest, "scheduler", "TP0")["pid"], signal.SIGKILL)  # the OOM killer's way
    assert prefill.finish() == 0, prefill.stderr
    decode = Serve(folder(tmp_path / "decode"), sglang(free_port(), "--disaggregation-mode=decode",
                                               "--tp-size", "2"), *FAST, "--deployment", "pd-1",
                   "--db", str(db), env=environment(crash="gpu-fault", crash_on="start"))
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

    prefill_crashes, prefill_xids = records(prefill, db)
    decode_crashes, decode_xids = records(decode, db)
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
    db = tmp_path / "index.sqlite"
    serve = Serve(tmp_path, ["sh", "-c", "kill -ABRT $$"], "--db", str(db), env=environment())
    assert serve.finish() == 0, serve.stderr
    assert serve.manifest()["role"] is None
    assert serve.report()["deployment"]["role"] is None
    assert serve.report()["deployment"]["label"] is None
    [crash] = records(serve, db)[0]
    assert crash.role is None and crash.label is None
    for label, message in ((" ", "deployment label cannot be empty"),
                           ("--", "'--' is not a deployment label (is the label missing?)")):
        refused = Serve(folder(tmp_path / f"refused{len(label)}"), ["true"], "--deployment", label,
                        env=environment())
        assert refused.finish() == 2
        assert refused.stderr.count("\n") == 1 and message in refused.stderr, refused.stderr
        assert not list(refused.runs.glob("*/manifest.json"))


def test_an_xid_line_read_by_serve_joins_the_incident_of_the_runs_crash(tmp_path):
    """Xid end to end: serve reads the kernel log while the stand-in server runs, the driver's
    Xid 79 arrives, a rank faults, and the index's incident of that crash shows the Xid.

    There is no GPU and no NVIDIA driver here, and the kernel's log is not ours to write to: a
    FIFO stands in for /dev/kmsg. The test writes records in /dev/kmsg's format ("PRIORITY,
    SEQUENCE,MICROSECONDS,FLAGS;MESSAGE" and continuation lines starting with a space, the
    kernel's Documentation/ABI/testing/dev-kmsg) with a real driver line (tests/test_incidents.py
    REAL_XID_LINES: NVIDIA/open-gpu-kernel-modules#461). serve takes the kernel log's path only
    through its Python entry (tests/serve_entry.py), as the command line always reads /dev/kmsg.
    """
    kmsg = tmp_path / "kmsg"
    os.mkfifo(kmsg)
    db = tmp_path / "index.sqlite"
    port = free_port()
    serve = Serve(folder(tmp_path / "decode"), sglang(port, "--tp-size", "2"), *FAST,
                  "--kernel-log", str(kmsg), "--db", str(db), env=environment(crash="gpu-fault"),
                  entry=("tests.serve_entry",))
    serve.wait_healthy()
    xid = ("NVRM: Xid (PCI:0004:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
           "the bus.")
    with open(kmsg, "wb", buffering=0) as kernel:
        kernel.write(b"4,3055,97461233,-;NVRM: GPU at PCI:0004:01:00: GPU-b850f46d\n")
        kernel.write(f"4,3056,97461240,-;{xid}\n SUBSYSTEM=pci\n DEVICE=+pci:0004:01:00.0\n"
                     .encode())
        serve.wait_manifest(lambda m: any(f["kind"] == "xid" for f in
                                          m["incarnations"][-1]["findings"]), "the Xid finding")
        post_generate(port)  # the stand-in's rank faults on the GPU: a FAULT and a COLLATERAL dump
        assert serve.finish() == 0, serve.stderr

    crashes, xids = records(serve, db)
    assert [(x.xid, x.device, x.text, x.run_dir) for x in xids] == [
        (79, "PCI:0004:01:00", xid, str(serve.run_dir))]
    listed = run_cli("list", "--incidents", "--json", "--db", db)
    assert listed.returncode == 0, listed.stderr.decode()
    [incident] = json.loads(listed.stdout)["incidents"]
    assert sorted(c["label"] for c in incident["crashes"]) == ["COLLATERAL", "FAULT"]
    assert incident["crashes"][0]["label"] == "FAULT"
    assert [(x["xid"], x["text"]) for x in incident["xids"]] == [(79, xid)]
    assert any(note.startswith("Xid 79 on ") for note in incident["notes"])
    text = run_cli("list", "--incidents", "--db", db).stdout.decode()
    assert "  xid 79  " in text and "GPU has fallen off the bus." in text
