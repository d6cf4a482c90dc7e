"""``crashlab serve --restart`` following the advice, with real processes: a real crashing child
program under the real serve (tests/serve_harness.py), the driver's Xid line through the kernel
log source serve reads (a FIFO standing in for /dev/kmsg, as tests/test_incidents_serve.py
does), a real crash loop, and the index serve records in.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from crashlab.advice.decide import advise
from crashlab.advice.evidence import of_incident
from crashlab.owner import fixes
from crashlab.report.run import RunReport
from tests.conftest import run_cli
from tests.serve_harness import Serve, environment
from tests.test_incidents_serve import folder

# NVIDIA/open-gpu-kernel-modules#461 (driver 525.85.05): tests/test_incidents.py REAL_XID_LINES
FALLEN_OFF = ("NVRM: Xid (PCI:0004:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
              "off the bus.")
# NVIDIA developer forums, "Error Graphics SM Warp Exception on (GPC 1, TPC 0)": REAL_XID_LINES
WARP_EXCEPTION = ("NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 0): "
                  "Out Of Range Address")


def _crasher(go: Path) -> list[str]:
    """A server that runs until GO exists, then aborts (at once in a later incarnation)."""
    script = (f"import os, pathlib, time\ngo = pathlib.Path({str(go)!r})\n"
              "while not go.exists():\n    time.sleep(0.05)\nos.abort()\n")
    return [sys.executable, "-c", script]


def _serve_with_xid(tmp_path: Path, line: str, *options: str) -> Serve:
    """serve (its Python entry, for the kernel log's path) on the crasher; the Xid LINE reaches
    the kernel log while the server runs, then the server crashes."""
    kmsg, go = tmp_path / "kmsg", tmp_path / "go"
    os.mkfifo(kmsg)
    serve = Serve(folder(tmp_path / "serve"), _crasher(go), "--kernel-log", str(kmsg),
                  "--db", str(tmp_path / "index.sqlite"), "--restart-delay", "0.1", *options,
                  env=environment(), entry=("tests.serve_entry",))
    serve.wait_manifest(lambda m: m["incarnations"] and m["incarnations"][0]["status"] == "running",
                        "the first incarnation running")
    with open(kmsg, "wb", buffering=0) as kernel:
        kernel.write(f"4,3056,97461240,-;{line}\n SUBSYSTEM=pci\n".encode())
        serve.wait_manifest(lambda m: any(f["kind"] == "xid" for f in
                                          m["incarnations"][0]["findings"]), "the Xid finding")
        go.touch()
        serve.finish()
    return serve


def _said(serve: Serve, start: str) -> list[str]:
    """serve's lines (Python entry: printed to stdout) that start with START."""
    return [line for line in serve.out.read_text().splitlines() if line.startswith(start)]


def test_a_hardware_xid_stops_the_restart_onto_its_gpu_and_says_why_in_one_line(tmp_path):
    serve = _serve_with_xid(tmp_path, FALLEN_OFF, "--restart", "on-crash")
    manifest = serve.manifest()
    assert [i["incident"] for i in manifest["incarnations"]] == ["crash"]
    [refused] = _said(serve, "not restarting")
    assert refused.startswith("not restarting onto PCI:0004:01:00, which the advice drains: "
                              "Xid 79 (GPU has fallen off the bus) is a hardware fault")
    assert refused.endswith("(--restart always would restart)")
    [incident] = serve.report()["incidents"]
    advice = incident["advice"]
    assert (advice["action"], advice["gpu"]) == ("drain", "PCI:0004:01:00")
    assert f"| Advice | drain PCI:0004:01:00: {advice['reason']} |" in \
        (serve.run_dir / "report.md").read_text()
    assert manifest["outcome"]["result"] == "crash"
    # crashlab report on the run: the advice in its JSON, its body and on the terminal
    done = run_cli("report", serve.run_dir, "--out", tmp_path / "issue", "--json",
                   "--db", tmp_path / "index.sqlite")
    assert done.returncode == 0, done.stderr.decode()
    issue = json.loads(done.stdout)
    assert issue["advice"] == advice
    assert f"advice: drain PCI:0004:01:00: {advice['reason']}" in done.stderr.decode()
    assert f"- Advice: drain PCI:0004:01:00: {advice['reason']}" in Path(issue["body"]).read_text()


def test_restart_always_restarts_onto_the_drained_gpu_and_says_so(tmp_path):
    serve = _serve_with_xid(tmp_path, FALLEN_OFF, "--restart", "always", "--max-restarts", "1")
    manifest = serve.manifest()
    assert [i["incident"] for i in manifest["incarnations"]] == ["crash", "crash"]
    [restarting] = _said(serve, "restarting onto")
    assert restarting.startswith("restarting onto PCI:0004:01:00, which the advice drains "
                                 "(--restart always): Xid 79")
    # the second incarnation read no Xid: its advice is a restart, which the limit ends
    first, second = serve.report()["incidents"]
    assert first["advice"]["action"] == "drain" and second["advice"]["action"] == "restart"
    assert _said(serve, "not restarting") == ["not restarting: --max-restarts 1 reached"]


def test_a_software_xid_is_restarted_and_seen_before_the_second_time(tmp_path):
    serve = _serve_with_xid(tmp_path, WARP_EXCEPTION, "--restart", "on-crash",
                            "--max-restarts", "1")
    manifest = serve.manifest()
    assert [i["incident"] for i in manifest["incarnations"]] == ["crash", "crash"]
    first, second = (i["advice"] for i in serve.report()["incidents"])
    assert first["action"] == second["action"] == "restart"
    assert first["reason"].startswith("a crash (Xid 13: software), the first of its signature")
    assert second["reason"].startswith("a crash, seen 1 time before")


def test_a_crash_loop_under_the_real_command_line_is_stopped_with_its_reason(tmp_path):
    serve = Serve(tmp_path, [sys.executable, "-c", "import os; os.abort()"], "--restart",
                  "on-crash", "--max-restarts", "5", "--restart-delay", "0.05", "--crash-loop",
                  "2/10", "--db", str(tmp_path / "index.sqlite"), env=environment())
    assert serve.finish() == 0, serve.stderr  # a crash was caught and triaged: exit 0
    manifest = serve.manifest()
    assert [i["incident"] for i in manifest["incarnations"]] == ["crash"] * 3
    refused = [line for line in serve.stderr.splitlines() if "not restarting" in line]
    assert refused == ["crashlab: not restarting: a crash loop: it crashed again after 2 "
                       "restarts within 10 min (the limit is 2)"]
    report = RunReport.model_validate(serve.report())
    assert [i.advice.action for i in report.incidents if i.advice] == ["restart", "restart", "stop"]
    # a known-fixes row keyed on this crash's signature alone (no dump, so no owner) and marked
    # fatal stops at the first crash
    first = report.incidents[0]
    assert first.signature is not None and not first.dumps
    row = {"artifact": "sglang", "signature": first.signature.hash, "fatal": True,
           "link": "https://github.com/sgl-project/sglang/issues/1467", "summary": "a test row",
           "source": "this test"}
    fatal = advise(of_incident(first, fixes.parse(json.dumps({"about": "t", "fixes": [row]}))))
    assert (fatal.action, fatal.link) == ("stop", row["link"])
    listed = json.loads(run_cli("list", "--json", "--db", tmp_path / "index.sqlite").stdout)
    shown = json.loads(run_cli("show", str(listed["crashes"][0]["id"]), "--json", "--db",
                               tmp_path / "index.sqlite").stdout)
    # show weighs the index now (no restarts there): a repeat, restarted
    assert shown["advice"]["action"] == "restart"
    assert shown["advice"]["reason"].startswith("a crash, seen 2 times before")


def test_a_crash_loop_option_that_is_not_n_over_m_is_refused_in_one_line(tmp_path):
    for bad in ("3", "0/10", "3/0", "x/10", "3/inf"):
        serve = Serve(tmp_path, [sys.executable, "-c", "pass"], "--crash-loop", bad,
                      env=environment())
        assert serve.finish() == 2
        assert "is not N/M" in serve.stderr and "Traceback" not in serve.stderr
        assert not serve.runs.exists()
