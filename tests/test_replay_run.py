"""Replaying dumps against a real HTTP server on 127.0.0.1: the stand-in SGLang server.

Every crash here is a real one of the stand-in's process (SIGKILL, a hang, a log line, a core
file), observed by the real crashlab CLI in its own process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console

import crashlab.replay as replay
from crashlab.replay import views
from crashlab.replay.oracle import Oracle, Watch
from crashlab.replay.result import ReplayResult
from crashlab.replay.send import Plan, Sender
from tests.conftest import run_cli
from tests.replay_support import FAST_WATCH, FIXTURES, free_port, server_command, standin, synthetic
from tests.schema_check import errors

FIXTURE = FIXTURES / "crash_dump_0.5.23.pkl"
INTERNAL = {"rid", "http_worker_ipc", "received_time", "lora_id", "is_single", "batch_size",
            "parallel_sample_num", "log_metrics", "need_wait_for_mm_inputs"}


def _replay(*args, timeout=120):
    result = run_cli("replay", *FAST_WATCH, *map(str, args), "--json", timeout=timeout)
    data = json.loads(result.stdout) if result.stdout else None
    assert data is None or errors(data, "replay") == []  # what --json prints is what the schema says
    return result, data


def _signals(data, attempt=0) -> dict:
    return {signal["kind"]: signal["detail"] for signal in data["attempts"][attempt]["signals"]}


@pytest.mark.parametrize("version", ["0.5.6", "0.5.23"])
def test_a_replay_sends_what_the_server_received(tmp_path, version):
    """As recorded (--force-decode off): the bodies are the requests SGLang received."""
    with standin(tmp_path) as server:
        result, data = _replay(FIXTURES / f"crash_dump_{version}.pkl", "--url", server.url,
                               "--force-decode", "off")
        received = server.received()
    assert result.returncode == 1, result.stderr  # done, no crash
    attempt = data["attempts"][0]
    assert not attempt["reproduced"] and attempt["ok"] == 8 and attempt["divergences"] == 0
    bodies = {entry["body"].get("text") or str(entry["body"].get("input_ids")[:2]): entry
              for entry in received}
    assert len(received) == 8
    assert [entry["path"] for entry in received].count("/encode") == 1
    for entry in received:
        assert not INTERNAL & set(entry["body"]), entry["body"]
    ids = bodies["[128000, 791]"]["body"]
    assert "text" not in ids  # input_ids preferred to the decoded text --log-requests adds
    image = bodies["<image> What is in the picture?"]["body"]
    assert image["image_data"] == ["https://example.com/cat.png"] and image["modalities"] == ["image"]
    lora = bodies["SELECT * FROM"]["body"]
    assert lora["lora_path"] == "sql-lora" and lora["return_logprob"] and lora["top_logprobs_num"] == 2
    assert bodies["Write a haiku about GPUs."]["body"]["stream"] is True
    assert bodies["Write a haiku about GPUs."]["body"]["sampling_params"] == \
        {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 12}
    streamed = next(o for o in attempt["requests"] if o["rid"] == "r2-stream")
    assert streamed["output"]["completion_tokens"] == 12 and len(streamed["output"]["text"]) == 12


def test_greedy_divergence_is_reported(tmp_path):
    with standin(tmp_path, "--diverge-on", "The capital") as server:
        result, data = _replay(FIXTURE, "--url", server.url)
    assert result.returncode == 1
    diverged = [o for o in data["attempts"][0]["requests"] if o["divergence"]]
    assert [o["rid"] for o in diverged] == ["r0-text"]
    assert diverged[0]["divergence"]["compared"] == "output_ids"
    assert diverged[0]["divergence"]["first_difference"] == 0


def test_schedules_follow_the_recorded_offsets(tmp_path):
    dump = replay.load(FIXTURE)
    with standin(tmp_path) as server:
        oracle = Oracle(server.url, Watch(health_interval=10)).start()
        outcomes = Sender(server.url, dump.requests, Plan.choose(speed=2.0), oracle).run()
        oracle.stop()
        arrivals = server.received()
    for request, outcome in zip(dump.requests, outcomes, strict=True):
        assert outcome.scheduled_s == pytest.approx(request.offset_s / 2, abs=1e-6)
        assert outcome.sent_s >= outcome.scheduled_s  # never early
    # each request goes out on a thread of its own: requests scheduled a few ms apart (r0 and r1,
    # 25 ms) can swap places on a loaded machine, those more than 100 ms apart arrive in order
    arrived = {entry["body"].get("text") or entry["body"].get("input_ids")[0]: n
               for n, entry in enumerate(arrivals)}
    keys = [request.input_ids[0] if request.input_ids else request.text for request in dump.requests]
    assert len(arrivals) == len(arrived) == len(keys) and set(arrived) == set(keys)
    spaced = [(early, late) for early, first in zip(keys, outcomes, strict=True)
              for late, then in zip(keys, outcomes, strict=True)
              if then.scheduled_s - first.scheduled_s > 0.1]
    assert ("The capital of France is", 1000) in spaced  # r0 and r7, the first and the last
    assert [(early, late) for early, late in spaced if arrived[early] > arrived[late]] == []


def test_concurrency_one_waits_for_each_answer(tmp_path):
    dump = replay.load(synthetic(tmp_path, 6))
    with standin(tmp_path, "--latency", "0.05") as server:
        oracle = Oracle(server.url, Watch(health_interval=10)).start()
        outcomes = Sender(server.url, dump.requests, Plan.choose(concurrency=1), oracle).run()
        oracle.stop()
    for before, after in zip(outcomes, outcomes[1:], strict=False):
        assert after.sent_s >= before.sent_s + before.latency_s - 1e-3


def test_a_server_closing_idle_connections_is_no_crash(tmp_path):
    """Keep-alive connections the server closed while idle are reopened, not reported."""
    dump = synthetic(tmp_path, 4, "--rate", "4")
    with standin(tmp_path, "--idle-timeout", "0.1") as server:
        result, data = _replay(dump, "--url", server.url, "--force-decode", "off")
        assert len(server.received()) == 4
    assert result.returncode == 1 and data["attempts"][0]["ok"] == 4 and not _signals(data)


def test_max_rate_plans_evenly(tmp_path):
    dump = replay.load(synthetic(tmp_path, 5))
    assert Plan.choose(max_rate=200).times(dump.requests) == [0, 0.005, 0.01, 0.015, 0.02]


def test_a_killed_server_is_a_reproduction(tmp_path):
    """--restart-cmd: the process exit, the refused connections and the crash log all count."""
    port = free_port()
    command = server_command(port, "--die-on", "Explain CUDA")
    result, data = _replay(FIXTURE, "--url", f"http://127.0.0.1:{port}", "--restart-cmd", command)
    assert result.returncode == 0, result.stderr
    signals = _signals(data)
    assert "exited with code" in signals["exited"]
    assert "refused" in signals or "health" in signals
    assert "Scheduler hit an exception" in signals["log"]
    assert "an illegal memory access" in Path(data["server_log"]).read_text()
    statuses = {o["rid"]: o["status"] for o in data["attempts"][0]["requests"]}
    assert statuses["r6-inflight-stream"] in ("refused", "unfinished")
    assert statuses["r0-text"] == "ok"


def test_a_hung_server_fails_its_health_check(tmp_path):
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "hang") as server:
        result, data = _replay(FIXTURE, "--url", server.url, "--health-timeout", "1",
                               "--timeout", "3")
    assert result.returncode == 0
    assert "no answer within 1 s" in _signals(data)["health"]


def test_a_fault_line_in_the_log_is_a_reproduction(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("old line: CUDA error: an illegal memory access was encountered\n")
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "log", "--log", str(log)) as server:
        result, data = _replay(FIXTURE, "--url", server.url, "--watch-log", log)
    assert result.returncode == 0
    signals = _signals(data)
    assert set(signals) == {"log"}  # the old line does not count; the server kept serving
    assert "Scheduler hit an exception" in signals["log"]


def test_a_new_coredump_is_a_reproduction(tmp_path):
    cores = tmp_path / "cores"
    (cores / "host").mkdir(parents=True)
    (cores / "host" / "core.cuda.old.1").write_bytes(b"old")
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "core", "--core-dir",
                 str(cores / "host")) as server:
        result, data = _replay(FIXTURE, "--url", server.url, "--watch-cores", cores)
    assert result.returncode == 0
    assert "core.cuda.standin." in _signals(data)["coredump"]


def test_no_crash_when_nothing_fails(tmp_path):
    log, cores = tmp_path / "server.log", tmp_path / "cores"
    cores.mkdir()
    with standin(tmp_path, "--log", str(log)) as server:
        result, data = _replay(FIXTURE, "--url", server.url, "--watch-log", log,
                               "--watch-cores", cores, "--pid", server.process.pid)
    assert result.returncode == 1 and data["reproductions"] == 0 and not _signals(data)


def test_the_death_of_a_given_pid_is_a_reproduction(tmp_path):
    with standin(tmp_path, "--die-on", "SELECT") as server:
        result, data = _replay(FIXTURE, "--url", server.url, "--pid", server.process.pid)
    assert result.returncode == 0
    assert f"server process {server.process.pid} exited" in _signals(data)["exited"]


def test_repeat_counts_reproductions(tmp_path):
    dump = synthetic(tmp_path, 8)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    crashing = server_command(port, "--die-on", "1003")
    result, data = _replay(dump, "--url", url, "--restart-cmd", crashing, "--repeat", "3")
    assert result.returncode == 0 and data["reproductions"] == 3 and len(data["attempts"]) == 3
    healthy = server_command(port)
    result, data = _replay(dump, "--url", url, "--restart-cmd", healthy, "--repeat", "2")
    assert result.returncode == 1 and data["reproductions"] == 0 and len(data["attempts"]) == 2
    text = run_cli("replay", dump, "--url", url, "--restart-cmd", crashing, "--repeat", "2",
                   *FAST_WATCH).stdout.decode()
    assert "reproduced 2/2" in text and "crashed" in text


def test_repeat_without_restart_stops_after_the_crash(tmp_path):
    dump = synthetic(tmp_path, 8)
    with standin(tmp_path, "--die-on", "1003") as server:
        result, data = _replay(dump, "--url", server.url, "--repeat", "3")
    assert result.returncode == 0 and data["reproductions"] == 1 and len(data["attempts"]) == 1
    assert "need --restart-cmd" in data["warnings"][0]


def test_an_unreachable_server_is_exit_3(tmp_path):
    result = run_cli("replay", FIXTURE, "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 3
    assert result.stderr.decode().count("\n") == 1 and "no healthy server" in result.stderr.decode()


def test_a_restart_command_that_dies_is_exit_3(tmp_path):
    port = free_port()
    result = run_cli("replay", FIXTURE, "--url", f"http://127.0.0.1:{port}",
                     "--restart-cmd", "exit 7")
    assert result.returncode == 3 and "exited with code 7" in result.stderr.decode()


@pytest.mark.parametrize("args, message", [
    (["--url", "http://x", "--minimize"], "--minimize needs --restart-cmd"),
    (["--restart-cmd", "true"], "need --url"),
    (["--url", "http://x", "--speed", "2", "--max-rate", "5"], "choose one"),
    (["--url", "http://x", "--budget", "soon"], "--budget 'soon'"),
    (["--list", "--url", "http://x"], "--list lists the dump and replays nothing"),
    (["--speed", "0"], "Invalid value for '--speed'"),
    (["--repeat", "many"], "Invalid value for '--repeat'"),
    (["--url", "http://x", "--fault-pattern", "(unclosed"], "--fault-pattern '(unclosed'"),
    (["--url", "http://x", "--pid", "999999999"], "--pid 999999999: no such process"),
])
def test_bad_command_lines_get_one_line_and_exit_2(args, message):
    result = run_cli("replay", FIXTURE, *args)
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and message in lines[0], lines


def _minimize(tmp_path, dump, *options, budget="100", out_option="-o"):
    port = free_port()
    out = tmp_path / "min.pkl"
    command = server_command(port, *options)
    result, data = _replay(dump, "--url", f"http://127.0.0.1:{port}", "--minimize",
                           "--restart-cmd", command, "--budget", budget, "--max-rate", "2000",
                           out_option, out)
    return result, data, out


@pytest.mark.parametrize("culprits", [["1005"], ["1003", "1006"]])
def test_minimize_finds_the_culprits(tmp_path, culprits):
    """Eight requests, the pair in different halves: neither half alone fails, so ddmin must go
    on to quarters and their complements (16 trials, each a server start) to find both."""
    dump = synthetic(tmp_path, 8)
    result, data, out = _minimize(tmp_path, dump, "--die-on", ",".join(culprits))
    assert result.returncode == 0, result.stderr
    minimization = data["minimization"]
    assert minimization["minimal"] == [int(c) - 1000 for c in culprits]
    assert minimization["output"] == str(out) and not minimization["budget_exhausted"]
    assert [r.rid for r in replay.load(out).requests] == [f"req-{int(c) - 1000}" for c in culprits]
    trials = [line for line in result.stderr.decode().splitlines() if line.startswith("trial ")]
    assert len(trials) == minimization["trials"]


@pytest.mark.parametrize("out_option", ["--out", "--output"])
def test_minimize_tries_the_in_flight_requests_first(tmp_path, out_option):
    """--out is where report and replay write; --output, replay's former name, still works."""
    dump = synthetic(tmp_path, 16, "--in-flight", "2")
    result, data, out = _minimize(tmp_path, dump, "--die-on", "1015", out_option=out_option)
    assert result.returncode == 0 and data["minimization"]["output"] == str(out)
    # all 16, the 2 in flight, then ddmin over those 2: [14] passes, [15] fails
    assert data["minimization"]["minimal"] == [15] and data["minimization"]["trials"] == 4


def test_minimize_within_a_budget_keeps_a_reproducing_set(tmp_path):
    dump = synthetic(tmp_path, 16)
    result, data, out = _minimize(tmp_path, dump, "--die-on", "1005", budget="3")
    assert result.returncode == 0
    minimization = data["minimization"]
    assert minimization["budget_exhausted"] and minimization["trials"] == 3
    assert 5 in minimization["minimal"] and len(minimization["minimal"]) < 16
    assert len(replay.load(out).requests) == len(minimization["minimal"])
    # a person watching sees, after each trial, the time spent and what is left of the budget
    trials = [line for line in result.stderr.decode().splitlines() if line.startswith("trial ")]
    assert [re.search(r"s elapsed, (\d+ of 3 trials left)\)$", line)[1] for line in trials] == [
        "2 of 3 trials left", "1 of 3 trials left", "0 of 3 trials left"]
    assert minimization["budget_left"] == "0 of 3 trials left" and minimization["elapsed_s"] > 0
    # and the result says it too, under the minimal reproducer
    console = Console(record=True, width=200)
    views.render_result(ReplayResult.model_validate(data), console)
    assert re.search(r"^trials used: 3 in [\d.,]+ s \(budget 3 trials, exhausted; 0 of 3 trials left\)$",
                     console.export_text(), re.MULTILINE)


def test_minimize_of_a_dump_that_does_not_reproduce(tmp_path):
    dump = synthetic(tmp_path, 4)
    result, data, out = _minimize(tmp_path, dump)
    assert result.returncode == 1
    assert data["minimization"]["minimal"] == [] and data["minimization"]["trials"] == 1
    assert not out.exists()


def test_a_server_started_with_an_api_key_gets_it_and_the_key_reaches_no_output(tmp_path):
    """SGLang refuses every request without its --api-key (401); replay sends the key of
    --restart-cmd, or --api-key's, and masks it wherever it writes."""
    key, written = "sk-replay-test-5b0c9e2d71", b"sk-replay-test-5b0c9e2d71"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    result, data = _replay(FIXTURE, "--url", url, "--restart-cmd", server_command(port, "--api-key", key))
    statuses = [o["status"] for o in data["attempts"][0]["requests"]]
    assert statuses.count("ok") == len(statuses), statuses
    assert written not in result.stdout and written not in result.stderr
    with standin(tmp_path, "--api-key", key) as server:
        refused, data = _replay(FIXTURE, "--url", server.url, "--force-decode", "off")
        assert {o["status"] for o in data["attempts"][0]["requests"]} == {"http-error"}
        assert "401" in json.dumps(data["attempts"][0]["requests"][0])
        assert server.received() == []
        given, data = _replay(FIXTURE, "--url", server.url, "--api-key", key)
        assert {o["status"] for o in data["attempts"][0]["requests"]} == {"ok"}
        assert len(server.received()) == len(data["attempts"][0]["requests"]) + 1  # + the probe
        assert written not in given.stdout and written not in given.stderr
