"""What SGLang itself writes around a crash, read by crashlab.supervise.sglang_records: the REAL
kernel-API log of an SGLang 0.5.23 server at level 3 (fixtures/logs/sglang_0.5.23_kernel_api.log)
and its batch lines (fixtures/logs/sglang_0.5.23_http_500_then_crash.stderr.log), each masked
and cut to its budget, and py-spy's stacks SGLang's crash path printed
(fixtures/logs/sglang_0.5.23_pyspy_before_crash.stderr.log); crash snapshots are CONSTRUCTED (no
release writes one yet).
"""

from __future__ import annotations

import json
import os
import time

from markdown_it import MarkdownIt

from crashlab.privacy.redact import PLAIN
from crashlab.report.model import Source, Tool
from crashlab.report.run import Incident, RunReport
from crashlab.report.run_views import markdown
from crashlab.report.sglang_records import KernelApiLog, SGLangRecords
from crashlab.supervise import runreport
from crashlab.supervise import sglang_records as records
from tests.conftest import ROOT

LOGS = ROOT / "fixtures" / "logs"
KERNEL_API = LOGS / "sglang_0.5.23_kernel_api.log"
SERVER = LOGS / "sglang_0.5.23_http_500_then_crash.stderr.log"
PYSPY = LOGS / "sglang_0.5.23_pyspy_before_crash.stderr.log"
SECRET = "hf_" + "Q" * 30


def test_the_last_kernel_calls_are_kept_with_their_inputs_and_the_rest_counted():
    lines = records.tail_lines(KERNEL_API)
    calls, omitted = records.kernel_api_calls(lines, PLAIN.text)
    seen = sum("SGLang Kernel API Call: " in line for line in lines)
    assert len(calls) == records.KERNEL_API_CALLS and omitted == seen - records.KERNEL_API_CALLS
    assert calls[-1].function == "sglang.quant_method.UnquantizedLinearMethod.apply"
    assert calls[-2].function == "kernels.fused_op.BaseFusedOp.forward"
    assert calls[-1].time == "2026-12-06 11:29:05"
    assert "Positional input arguments:" in calls[-1].lines
    assert "      shape=(16, 64)" in calls[-1].lines and "      dtype=torch.float16" in calls[-1].lines
    assert all(call.exception is None and call.returned for call in calls)  # died in the sampler


def test_a_call_s_lines_a_raised_exception_a_secret_and_the_budget():
    lines = ["=" * 80, "[2026-12-06 11:29:05] SGLang Kernel API Call: sglang.op",
             "Positional input arguments:", f"  arg[0]=Thing(token={SECRET})",
             *[f"  arg[{n}]=1" for n in range(1, 60)], "  arg[99]=" + "x" * 1000,
             "[2026-12-06 11:29:05] SGLang Kernel API Exception: sglang.op (IndexError: out of range)",
             "[2026-12-06 11:29:06] INFO: another record"]
    [call], omitted = records.kernel_api_calls(lines, PLAIN.text)
    assert omitted == 0 and call.exception == "IndexError: out of range"
    assert len(call.lines) == records.CALL_LINES and call.omitted_lines == 62 - records.CALL_LINES
    assert SECRET not in "".join(call.lines) and "token=" in call.lines[1]


def test_a_last_call_without_output_had_not_returned():
    """The real log's last two calls, the last one cut before its output, as a server that dies
    inside a kernel leaves it."""
    lines = records.tail_lines(KERNEL_API)
    at = max(n for n, line in enumerate(lines) if line.startswith("Output:"))
    calls, _ = records.kernel_api_calls(lines[:at], PLAIN.text)
    assert [call.returned for call in calls[-2:]] == [True, False]


def test_a_line_of_another_record_ends_a_call_in_a_shared_stream():
    lines = ["[t] SGLang Kernel API Call: sglang.op", "Output:", "  return=Tensor(",
             "[2026-12-06 11:29:06] Prefill batch, #new-seq: 1", "    shape=(8,)"]
    [call], _ = records.kernel_api_calls(lines, PLAIN.text)
    assert call.lines == ["Output:", "  return=Tensor("]


def test_the_last_batch_lines_of_the_real_log():
    batches = records.batch_lines(records.tail_lines(SERVER), PLAIN.text)
    assert 0 < len(batches) <= records.BATCH_LINES
    assert batches[-1].startswith("[2026-12-06 11:28:56] Prefill batch, #new-seq: 2")
    every = [line for line in SERVER.read_bytes().decode().split("\n") if "batch, #" in line]
    assert batches == [line[: records.LINE_CHARS] for line in every[-len(batches):]]


def test_the_real_pyspy_dump_of_the_scheduler():
    [stacks] = records.py_spy_stacks(records.tail_lines(PYSPY), PLAIN.text)
    assert stacks.pid == 31043 and stacks.error is None
    assert [t.name for t in stacks.threads][0] == "MainThread" and len(stacks.threads) == 3
    main = stacks.threads[0].frames
    assert "scheduler.py:2078 Scheduler.event_loop_overlap" in main
    assert main.index("scheduler.py:2205 Scheduler.ingest_requests") < \
        main.index("scheduler.py:2078 Scheduler.event_loop_overlap")  # innermost first
    assert len(main) <= records.SPY_FRAMES


def test_pyspy_failures_and_dumps_per_pid():
    """CONSTRUCTED in SGLang 0.5.23's words (utils/cudacore_pyspy_dump_utils.py): py-spy's first
    attempt (--native) failing, the second dumping; another pid where py-spy is missing."""
    lines = ["[2026-12-06 11:29:10] Pyspy failed (py-spy dump --native --pid 7). Error: Permission denied",
             "[2026-12-06 11:29:11] Pyspy dump for PID 7 (py-spy dump  --pid 7):",
             "Process 7: sglang::scheduler", "Python v3.11.7 (/usr/bin/python3.11)", "",
             'Thread 7 (idle): "MainThread"', "    recv (zmq/sugar/socket.py:805)",
             "    event_loop_overlap (sglang/srt/managers/scheduler.py:2090)", "",
             "[2026-12-06 11:29:12] Pyspy failed (py-spy dump --native --pid 9). Error: "
             "/bin/sh: 1: py-spy: not found"]
    by_pid = {stacks.pid: stacks for stacks in records.py_spy_stacks(lines, PLAIN.text)}
    assert by_pid[7].error is None and by_pid[7].threads[0].name == "MainThread"
    assert by_pid[7].threads[0].frames == ["zmq/sugar/socket.py:805 recv",
                                           "sglang/srt/managers/scheduler.py:2090 event_loop_overlap"]
    assert by_pid[9].error == "/bin/sh: 1: py-spy: not found" and not by_pid[9].threads


def test_a_crash_snapshot_s_fields_are_masked_and_cut(tmp_path):
    """CONSTRUCTED: no release writes the snapshot yet; its fields are kept as written."""
    path = tmp_path / "requests" / "crash_snapshot.json"
    path.parent.mkdir()
    fields = {f"field_{n}": n for n in range(70)} | {"api_key": SECRET, "batch": {"size": 3}}
    path.write_text(json.dumps({"batch": {"size": 3}, "api_key": SECRET, **fields}))
    snapshot = records.crash_snapshot(path, tmp_path, PLAIN.text)
    assert snapshot.path == "requests/crash_snapshot.json" and snapshot.error is None
    assert snapshot.fields["batch"] == '{"size":3}' and SECRET not in snapshot.fields["api_key"]
    assert len(snapshot.fields) == records.SNAPSHOT_FIELDS and snapshot.omitted_fields == 72 - 60
    path.write_text("[1, 2]")
    assert records.crash_snapshot(path, tmp_path, PLAIN.text).error == "a JSON list, not an object"
    path.write_bytes(b"\x80 not json")
    assert records.crash_snapshot(path, tmp_path, PLAIN.text).error.startswith("not readable JSON")


def test_the_kernel_api_files_are_those_its_destination_names_written_since_the_start(tmp_path):
    since = time.time()
    old, new = tmp_path / "kernel-api-1.log", tmp_path / "kernel-api-2.log"
    old.write_text("x")
    os.utime(old, (since - 60, since - 60))
    new.write_text("x")
    env = {"SGLANG_KERNEL_API_LOGLEVEL": "3", "SGLANG_KERNEL_API_LOGDEST": "kernel-api-%i.log"}
    assert records.kernel_api_files(env, tmp_path, since) == [new]
    assert records.kernel_api_files({**env, "SGLANG_KERNEL_API_LOGLEVEL": "0"}, tmp_path, since) == []
    assert records.kernel_api_files({**env, "SGLANG_KERNEL_API_LOGDEST": "stdout"}, tmp_path, since) == []


def test_report_md_shows_each_record_the_cut_last_call_and_nothing_unescaped(tmp_path):

    lines = records.tail_lines(KERNEL_API)
    cut = max(n for n, line in enumerate(lines) if line.startswith("Output:"))
    calls, omitted = records.kernel_api_calls(lines[:cut], PLAIN.text)
    snapshot = tmp_path / "requests" / "snapshot.json"
    snapshot.parent.mkdir()
    snapshot.write_text(json.dumps({"last_batch": "<b>decode</b> `x`"}))
    found = SGLangRecords(
        kernel_api=[KernelApiLog(source="incarnation-1/stdout.log", calls=calls, omitted_calls=omitted)],
        py_spy=records.py_spy_stacks(records.tail_lines(PYSPY), PLAIN.text),
        batches=records.batch_lines(records.tail_lines(SERVER), PLAIN.text),
        crash_snapshots=[records.crash_snapshot(snapshot, tmp_path, PLAIN.text)])
    crash = Incident(incarnation=1, directory="incarnation-1", kind="crash", started_at="t",
                     ended_at="t", exit=None, stopped_by_crashlab=False, summary="s", dumps=[],
                     sglang=found)
    body = markdown(RunReport(tool=Tool(version="t"), status="crash", summary="s",
                              source=Source(path=str(tmp_path), size_bytes=1, kind="run"),
                              command=["x"], incidents=[crash]))
    assert "**What SGLang wrote**" in body
    assert f"oldest first, {omitted} earlier left out" in body
    assert "`sglang.quant_method.UnquantizedLinearMethod.apply`, had not returned" in body
    assert "py-spy's stacks of pid 31043:" in body and "scheduler.py:2078 Scheduler.event_loop_overlap" in body
    assert "Prefill batch, #new-seq: 2" in body
    rendered = MarkdownIt("commonmark").enable("table").render(body)
    assert "&lt;b&gt;decode" in rendered and "<b>decode" not in rendered  # data, never markup


def test_a_run_whose_server_only_survived_says_so():

    def made(kind: str, summary: str) -> Incident:
        return Incident(incarnation=1, directory="incarnation-1", kind=kind, started_at="t",
                        ended_at="t", exit=None, stopped_by_crashlab=False, summary=summary, dumps=[])
    lived = [made("survived", "a 500"), made("survived", "another 500")]
    assert runreport.status(lived) == "survived"
    assert runreport.summary(lived) == "2 incidents; first: a 500"
    both = [*lived, made("crash", "the crash")]
    assert runreport.status(both) == "crash"
    assert runreport.summary(both) == "the crash; and 2 faults the server survived"
