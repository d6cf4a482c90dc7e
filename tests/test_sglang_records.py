"""``crashlab serve`` around a REAL SGLang 0.5.23 server on CPU (one start): a fault the server
survives (an HTTP 500 from its chat endpoint, a real KeyError in its chat-template path), then
a crash (SIGSEGV to the detokenizer), with SGLang's kernel-API log raised to level 3 into a
file outside the run, and py-spy on the server's PATH (SGLang's crash path dumps its live
scheduler with it). Serve must record the survived fault while the server lives, as a crash of
its own kind, and keep, link and show what SGLang itself wrote around the crash.
"""

from __future__ import annotations

import json
import os
import signal
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, run_cli
from tests.real_sglang import server
from tests.real_sglang.fixtures import server_environment
from tests.serve_harness import Serve, survivors, wait_for

pytestmark = [pytest.mark.sglang, pytest.mark.xdist_group("sglang")]

#: A chat request SGLang 0.5.23 answers with HTTP 500: ``add_generation_prompt`` in
#: chat_template_kwargs reaches transformers' apply_chat_template twice (TypeError), and the
#: handler of that raises KeyError; its OpenAI layer logs "Error in request" and goes on.
SURVIVED_BODY = {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}],
                 "chat_template_kwargs": {"add_generation_prompt": {"a": 1}}}


@dataclass
class Run:
    serve: Serve
    status: int
    live_report: dict
    exit_code: int
    kernel_logs: list[Path]

    @property
    def report(self) -> dict:
        return json.loads((self.serve.run_dir / "report.json").read_text())


def _survived(report_path: Path) -> dict | None:
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        return None
    return report if any(i["kind"] == "survived" for i in report["incidents"]) else None


@pytest.fixture(scope="module")
def run(sglang_env, tmp_path_factory) -> Run:
    work = tmp_path_factory.mktemp("sglang-records")
    port = free_port()
    env = {**server_environment(), "SGLANG_KERNEL_API_LOGLEVEL": "3",
           "SGLANG_KERNEL_API_LOGDEST": str(work / "kernel-api-%i.log"),
           "PATH": f"{sglang_env / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    serve = Serve(work, server.launch_args(sglang_env, port, "--api-key", server.API_KEY),
                  "--health-interval", "1", "--no-debugger", "--quiet", "--db",
                  str(work / "index.sqlite"), env=env)
    try:
        serve.wait_manifest(lambda m: m["incarnations"] and
                            m["incarnations"][-1]["health"]["state"] == "healthy",
                            "crashlab to see the real server healthy", timeout=server.START_TIMEOUT)
        server.wait_healthy(port, serve.proc)
        server.traffic(port, 4)
        answer = requests.post(f"{server.url(port)}/v1/chat/completions", json=SURVIVED_BODY,
                               headers=server.AUTH, timeout=120)
        server.generate(port, "Still serving")  # raises unless the server lived on
        live = wait_for(lambda: _survived(serve.run_dir / "report.json"),
                        "the survived fault in report.json while the server runs", timeout=60)
        assert serve.proc.poll() is None
        server.role_process(serve.proc.pid, "detokenizer").send_signal(signal.SIGSEGV)
        code = serve.finish(timeout=server.START_TIMEOUT)
        return Run(serve, answer.status_code, live, code, sorted(work.glob("kernel-api-*.log")))
    except BaseException:
        if serve.proc.poll() is None:
            serve.signal(signal.SIGINT)
            try:
                serve.finish(timeout=120)
            finally:
                for survivor in survivors(serve.manifest()):
                    survivor.kill()
        raise


def _incidents(report: dict, kind: str) -> list[dict]:
    return [i for i in report["incidents"] if i["kind"] == kind]


def test_the_server_answered_500_and_lived_on_and_serve_recorded_it_while_it_ran(run):
    assert run.status == 500
    [fault] = _incidents(run.live_report, "survived")
    assert run.live_report["status"] == "survived"
    assert not _incidents(run.live_report, "crash")
    assert fault["summary"].startswith("Error in request: 'add_generation_prompt'")
    assert "KeyError: 'add_generation_prompt'" in fault["summary"]
    kinds = [f["kind"] for f in fault["findings"]]
    assert kinds == ["survived-fault", "traceback", "traceback"], kinds  # the chained tracebacks


def test_the_survived_fault_is_signed_as_the_tokenizer_process_raising_it(run):
    [fault] = _incidents(run.report, "survived")
    signature = fault["signature"]
    assert signature["kind"] == "python-exception"
    assert signature["parts"][:3] == ["tokenizer", "TypeError", "_render_and_encode_chat_template"]


def test_the_crash_after_it_is_signed_by_its_own_fault_not_the_survived_one(run):
    assert run.exit_code == 0, run.serve.stderr
    report = run.report
    assert report["status"] == "crash"
    [crash] = _incidents(report, "crash")
    assert crash["signature"]["kind"] == "signal", crash["signature"]
    assert "SIGSEGV" in crash["signature"]["parts"]
    assert not [f for f in crash["findings"] if f["kind"] == "survived-fault"]
    assert report["summary"].endswith("; and 1 fault the server survived"), report["summary"]
    assert run.serve.manifest()["outcome"]["result"] == "crash"


def test_the_survived_fault_is_in_the_crash_index_as_a_crash_of_its_own(run):
    listed = run_cli("list", "--json", "--db", run.serve.runs.parent / "index.sqlite")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    rows = rows["crashes"] if isinstance(rows, dict) else rows
    mine = [r for r in rows if r.get("run_dir") == str(run.serve.run_dir)]
    assert sorted(r["label"] or "-" for r in mine) == ["-", "SURVIVED"], mine


def test_the_kernel_api_log_is_kept_linked_and_its_last_calls_read(run):
    assert run.kernel_logs, "SGLang wrote no kernel-API log file"
    kept = [f for f in run.serve.manifest()["files"] if f["kind"] == "kernel-api-log"]
    assert {Path(f["origin"]).name for f in kept} == {p.name for p in run.kernel_logs}
    for record in kept:
        assert (run.serve.run_dir / record["path"]).stat().st_size == record["size_bytes"]
    [crash] = _incidents(run.report, "crash")
    logs = [log for log in crash["sglang"]["kernel_api"] if log["source"] in {f["path"] for f in kept}]
    assert logs
    calls = logs[0]["calls"]
    assert 0 < len(calls) <= 8 and logs[0]["omitted_calls"] > 0
    assert any(c["function"].endswith("UnquantizedLinearMethod.apply") for c in calls), calls
    assert any(line.strip().startswith("shape=") for c in calls for line in c["lines"])


def test_pyspy_stacks_and_batch_lines_are_read_from_the_log(run):
    [crash] = _incidents(run.report, "crash")
    records = crash["sglang"]
    scheduler = {p["pid"] for p in crash["processes"] if p["role"] == "scheduler"}
    stacks = [s for s in records["py_spy"] if s["pid"] in scheduler]
    assert stacks and stacks[0]["threads"], records["py_spy"]
    frames = [frame for thread in stacks[0]["threads"] for frame in thread["frames"]]
    assert any("scheduler.py" in frame for frame in frames), frames
    assert records["batches"] and all("batch" in line for line in records["batches"])
    assert len(records["batches"]) <= 10


def test_report_shows_them_and_bundles_the_kernel_api_log_without_the_api_key(run, tmp_path):
    out = tmp_path / "issue"
    made = run_cli("report", run.serve.run_dir, "--out", out, "--db", tmp_path / "index.sqlite")
    assert made.returncode == 0, made.stderr
    body = next(out.glob("*.md")).read_text()
    assert "What SGLang wrote" in body and "kernel-API calls" in body and "py-spy" in body
    assert "survived" in body
    bundle = next(out.glob("*.gz"))
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        kernel = [n for n in names if "/kernel-api/" in n or n.split("/")[-1].startswith("kernel-api")]
        assert kernel, names
        for name in names:
            member = tar.extractfile(name)
            if member is not None:
                assert server.API_KEY.encode() not in member.read(), name
