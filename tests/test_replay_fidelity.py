"""A replay that explains a non-reproduction: schedule fidelity, forced decode, requests never
sent twice, a crash oracle that matches signatures, the hardened profile. Real processes and
real HTTP servers on 127.0.0.1 (the stand-in SGLang server and tests/keepalive_server.py).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

import crashlab
import crashlab.replay as replay
from crashlab.replay import runner
from crashlab.replay.result import Expectation, ObservedFault
from crashlab.replay.signature import compare, kernels_in, observe, short_kernel
from tests import scenarios
from tests.conftest import ROOT, run_cli
from tests.keepalive_server import KeepAliveServer
from tests.replay_support import FAST_WATCH, FIXTURES, free_port, server_command, standin, synthetic

FIXTURE = FIXTURES / "crash_dump_0.5.23.pkl"
TOOLS = ROOT / "tests" / "standin_tools"
OLD_RUN_REPORT = ROOT / "fixtures" / "reports" / "392e7d4" / "run-tp2-gpu-fault.json"
ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
ASSERT = "RuntimeError: CUDA error: device-side assert triggered"


def _replay(*args, env=None, timeout=120):
    result = run_cli("replay", *FAST_WATCH, *map(str, args), "--json", timeout=timeout, env=env)
    return result, (json.loads(result.stdout) if result.stdout else None)


def _one_line_error(result, code, text):
    lines = result.stderr.decode().splitlines()
    assert result.returncode == code and len(lines) == 1 and text in lines[0], lines


# -- schedule fidelity ---------------------------------------------------------------------------

def test_every_request_has_its_planned_and_actual_send_time(tmp_path):
    dump = synthetic(tmp_path, 20, "--rate", "100")
    with standin(tmp_path) as server:
        result, data = _replay(dump, "--url", server.url, "--late-threshold", "100000")
    attempt = data["attempts"][0]
    for outcome in attempt["requests"]:
        assert outcome["delivery"] == "answered"
        assert outcome["scheduled_s"] == pytest.approx(outcome["index"] / 100, abs=1e-6)
        assert outcome["late_s"] == pytest.approx(outcome["sent_s"] - outcome["scheduled_s"], abs=2e-6)
        assert outcome["late_s"] >= 0  # never early
    schedule = attempt["schedule"]
    late = sorted(o["late_s"] for o in attempt["requests"])
    assert schedule["late_max_s"] == pytest.approx(late[-1], abs=1e-6)
    assert schedule["late_p50_s"] <= schedule["late_p99_s"] <= schedule["late_max_s"]
    assert schedule["threshold_s"] == 100 and schedule["kept"] is True and data["schedule_kept"] is True


def test_a_schedule_over_the_threshold_says_it_was_not_kept(tmp_path):
    """Threshold 0: any lateness at all (a send cannot be exactly on time) breaks the schedule."""
    dump = synthetic(tmp_path, 10, "--rate", "100")
    with standin(tmp_path) as server:
        result, data = _replay(dump, "--url", server.url, "--late-threshold", "0")
        text = run_cli("replay", dump, "--url", server.url, "--late-threshold", "0",
                       *FAST_WATCH).stdout.decode()
    assert data["attempts"][0]["schedule"]["kept"] is False and data["schedule_kept"] is False
    assert "NOT KEPT" in text and "the schedule was not kept" in text


def test_concurrency_alone_has_no_schedule_to_keep(tmp_path):
    dump = synthetic(tmp_path, 6)
    with standin(tmp_path) as server:
        _, data = _replay(dump, "--url", server.url, "--concurrency", "2", "--late-threshold", "0")
    assert data["attempts"][0]["schedule"]["kept"] is None and data["schedule_kept"] is None


# -- forced decode -------------------------------------------------------------------------------

def _bodies(received) -> dict:
    return {entry["body"].get("text") or entry["body"]["input_ids"][0]: entry["body"]
            for entry in received if entry["body"].get("sampling_params", {}).get("max_new_tokens") != -1}


def test_forced_lengths_when_the_server_lacks_the_trace_field(tmp_path):
    with standin(tmp_path) as server:
        result, data = _replay(FIXTURE, "--url", server.url)
        received = server.received()
    probes = [e for e in received if e["body"].get("sampling_params", {}).get("max_new_tokens") == -1]
    assert len(probes) == 1 and len(received) == 9  # one probe, then the 8 requests once each
    force = data["force_decode"]
    assert force["asked"] == "auto" and force["used"] == "length" and force["requests"] == 6
    assert "unexpected keyword argument" in force["probe"]
    bodies = _bodies(received)
    finished = bodies["The capital of France is"]["sampling_params"]
    assert finished == {"temperature": 0, "max_new_tokens": 8, "min_new_tokens": 8, "ignore_eos": True}
    in_flight = bodies["Explain CUDA graphs in detail."]["sampling_params"]  # 5 of 64 recorded
    assert in_flight["min_new_tokens"] == 5 and in_flight["max_new_tokens"] == 64
    assert "ignore_eos" not in in_flight
    assert "min_new_tokens" not in bodies[1000]["sampling_params"]  # in flight, nothing recorded
    outcomes = {o["rid"]: o for o in data["attempts"][0]["requests"]}
    assert outcomes["r0-text"]["forced"] == "length" and outcomes["r0-text"]["forced_tokens"] == 8
    assert outcomes["r6-inflight-stream"]["forced"] == "at-least"
    assert outcomes["r5-embed"]["forced"] is None and outcomes["r7-inflight-ids"]["forced"] is None


#: What real servers answered to the probe (max_new_tokens=-1 with the trace field).
SGLANG_0_5_23_REFUSAL = ('{"error":"unknown field `trace_decode_token_ids`, expected one of '
                         '`max_new_tokens`, `stop`, `stop_token_ids`, `temperature`, `top_p`"}')


@pytest.mark.parametrize("status, answer, takes", [
    (400, SGLANG_0_5_23_REFUSAL, False),
    (400, "SamplingParams.__init__() got an unexpected keyword argument 'trace_decode_token_ids'", False),
    (400, "max_new_tokens must be at least 0, got -1.", True)])
def test_the_trace_probe_reads_how_the_server_refused(status, answer, takes):
    """SGLang 0.5.23's refusal lists max_new_tokens among the fields it knows: that is not the
    refusal of a count it accepted the field for."""
    found, said = _probe(status, answer)
    assert found is takes and said.startswith(f"HTTP {status}")


#: A refusal that lists every field the server takes, as 0.5.23's does (serde's "expected one
#: of"; the names are the arguments of SGLang's SamplingParams): far past what the probe keeps.
LONG_REFUSAL = ('{"error":"unknown field `trace_decode_token_ids`, expected one of ' + ", ".join(
    f"`{name}`" for name in (
        "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k",
        "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
        "n", "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
        "spaces_between_special_tokens", "no_stop_trim", "custom_params", "stream_interval",
        "logit_bias", "sampling_seed")) + '"}')


def test_the_probes_answer_is_cut_between_words():
    """What the server answered the probe is kept to a few hundred characters, cut between two
    words and marked (the result and its view say it), never inside a field's name."""
    found, said = _probe(400, LONG_REFUSAL)
    assert found is False and len(LONG_REFUSAL) > 300
    kept = said.removeprefix("HTTP 400: ")
    assert kept.endswith(" …") and len(kept) < len(LONG_REFUSAL)
    kept = kept.removesuffix(" …")
    assert LONG_REFUSAL.startswith(kept) and LONG_REFUSAL[len(kept)] == " ", kept[-30:]


def _probe(status: int, answer: str) -> tuple[bool, str]:
    """probe_trace against a server that answers every POST with STATUS and ANSWER."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from crashlab.replay.force import probe_trace

    class Answer(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = answer.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Answer) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            return probe_trace(f"http://127.0.0.1:{server.server_address[1]}")
        finally:
            server.shutdown()


def test_forced_trace_makes_the_recorded_tokens(tmp_path):
    """The server would now generate other tokens (--diverge-on); the trace forces the recorded ones."""
    dump = replay.load(FIXTURE)
    recorded = {r.rid: list(r.output.output_ids or []) for r in dump.requests}
    with standin(tmp_path, "--trace-decode", "--diverge-on", "The capital") as server:
        result, data = _replay(FIXTURE, "--url", server.url)
        bodies = _bodies(server.received())
    assert data["force_decode"]["used"] == "trace"
    params = bodies["The capital of France is"]["sampling_params"]
    assert params["trace_decode_token_ids"] == recorded["r0-text"]
    assert params["min_new_tokens"] == params["max_new_tokens"] == len(recorded["r0-text"])
    assert bodies["Explain CUDA graphs in detail."]["sampling_params"]["trace_decode_token_ids"] == \
        recorded["r6-inflight-stream"]
    outcomes = {o["rid"]: o for o in data["attempts"][0]["requests"]}
    assert outcomes["r0-text"]["output"]["output_ids"] == recorded["r0-text"]
    assert outcomes["r0-text"]["divergence"] is None and outcomes["r0-text"]["forced"] == "trace"


def test_force_decode_off_sends_the_recorded_sampling_params(tmp_path):
    with standin(tmp_path) as server:
        _, data = _replay(FIXTURE, "--url", server.url, "--force-decode", "off")
        received = server.received()
    assert len(received) == 8 and data["force_decode"]["used"] == "off"
    assert all("min_new_tokens" not in e["body"].get("sampling_params", {}) for e in received)


# -- a request is never sent twice ---------------------------------------------------------------

def _counts(data, count):
    attempt = data["attempts"][0]
    assert attempt["answered"] + attempt["failed_after_send"] + attempt["never_sent"] == count
    return attempt


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_idle_connections_the_server_closed_are_replaced_before_sending(tmp_path, reset):
    dump = synthetic(tmp_path, 6, "--rate", "10")
    with KeepAliveServer(idle_close=0.02, idle_reset=reset) as server:
        result, data = _replay(dump, "--url", server.url, "--force-decode", "off")
        received = dict(server.received)
    assert received == {1000 + i: 1 for i in range(6)}
    attempt = _counts(data, 6)
    assert attempt["answered"] == 6 and attempt["reconnects"] >= 1 and not attempt["signals"]
    assert result.returncode == 1


@pytest.mark.parametrize("how", ["drop_on", "reset_on"])
def test_a_request_the_server_read_and_never_answered_is_not_sent_again(tmp_path, how):
    """Request 2 goes over a reused keep-alive connection; the server reads it and closes (or
    resets) without answering. A retry would deliver it twice: it must arrive exactly once."""
    dump = synthetic(tmp_path, 6, "--rate", "20")
    with KeepAliveServer(**{how: {1002}}) as server:
        result, data = _replay(dump, "--url", server.url, "--force-decode", "off")
        received = dict(server.received)
    assert received[1002] == 1 and set(received.values()) == {1}
    attempt = _counts(data, 6)
    outcomes = {o["index"]: o for o in attempt["requests"]}
    assert outcomes[2]["delivery"] == "failed-after-send"
    assert attempt["answered"] + attempt["failed_after_send"] == len(received) == attempt["sent"]
    assert attempt["never_sent"] == 6 - len(received)
    assert all(o["delivery"] == "never-sent" and o["sent_s"] is None
               for o in attempt["requests"] if o["index"] + 1000 not in received)


# -- a crash oracle that matches signatures --------------------------------------------------------

def test_the_expected_crash_is_reproduced(tmp_path):
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "log", "--log", str(tmp_path / "l")) as s:
        result, data = _replay(FIXTURE, "--url", s.url, "--watch-log", tmp_path / "l",
                               "--expect", "illegal memory access")
    assert result.returncode == 0 and data["attempts"][0]["verdict"] == "reproduced"
    assert data["expected"]["fault_class"] == "illegal-address"
    assert "illegal-address" in data["attempts"][0]["observed"]["classes"]


def test_a_different_fault_is_a_different_crash(tmp_path):
    log = tmp_path / "server.log"
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "log", "--log", str(log),
                 "--crash-line", ASSERT) as server:
        result, data = _replay(FIXTURE, "--url", server.url, "--watch-log", log,
                               "--expect", "illegal memory access")
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "log", "--log", str(log),
                 "--crash-line", ASSERT) as server:  # the same, seen in the terminal view
        text = run_cli("replay", FIXTURE, "--url", server.url, "--watch-log", log, "--expect",
                       "illegal memory access", *FAST_WATCH).stdout.decode()
    attempt = data["attempts"][0]
    assert result.returncode == 1 and data["reproductions"] == 0
    assert attempt["verdict"] == "different crash" and not attempt["reproduced"]
    assert "device-assert" in attempt["mismatch"] and "illegal memory access" in attempt["mismatch"]
    assert "different crash" in text and "reproduced 0/1" in text


def _run_directory(tmp_path, kernel="fused_moe_kernel"):
    """A crashlab serve run directory holding the dump, its report naming the recorded fault:
    a real report.json (of an older crashlab), its fault made an illegal address in ``kernel``."""
    run = tmp_path / "run"
    requests = run / "incarnation-1" / "requests" / "node7"
    requests.mkdir(parents=True)
    shutil.copy(FIXTURE, requests / "crash_dump_2026-06-01_12-00-01.pkl")
    report = json.loads(OLD_RUN_REPORT.read_text())
    incident = report["incidents"][0]
    fault = incident["dumps"][0]["report"]["faults"][0]
    fault["exception"].update(code=14, name="CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS",
                              display="Warp Illegal Address")
    fault["kernel"]["name"] = f"void {kernel}<float>(float*, int)"
    incident["findings"] = []
    (run / "report.json").write_text(json.dumps(report))
    return requests / "crash_dump_2026-06-01_12-00-01.pkl"


@pytest.mark.parametrize("named, verdict", [("fused_moe_kernel<float, 4>(float*, int)", "reproduced"),
                                            ("rms_norm_kernel(float*)", "different crash")])
def test_the_run_directorys_triage_is_the_expected_crash(tmp_path, named, verdict):
    dump = _run_directory(tmp_path)
    log = tmp_path / "server.log"
    lines = ["========= Invalid __global__ write of size 4 bytes", f"=========     at {named}+0x1a0 in k.cu:12"]
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "log", "--log", str(log),
                 *[arg for line in lines for arg in ("--crash-line", line)]) as server:
        result, data = _replay(dump, "--url", server.url, "--watch-log", log)
    assert data["expected"]["kernel"].startswith("void fused_moe_kernel")
    assert data["expected"]["source"].endswith("report.json (incarnation 1)")
    assert data["attempts"][0]["verdict"] == verdict
    assert result.returncode == (0 if verdict == "reproduced" else 1)


@pytest.mark.parametrize("crash_line, verdict", [
    ("IndexError: index 4999 is out of bounds for dimension 1 with size 1000", "reproduced"),
    ("KeyError: 'bootstrap_room'", "different crash")])
def test_a_scheduler_exception_in_the_run_directory_is_the_expected_crash(tmp_path, crash_line, verdict):
    """No coredump and no CUDA error: the exception that ended the scheduler's traceback (as
    serve's report records it) is expected, its numbers free to differ."""
    dump = _run_directory(tmp_path)
    report_path = dump.parents[3] / "report.json"
    report = json.loads(report_path.read_text())
    head = "[2026-11-23 16:49:56] Scheduler hit an exception: Traceback (most recent call last):"
    report["incidents"][0]["dumps"] = []
    report["incidents"][0]["findings"] = [
        {"kind": "scheduler-exception", "text": head, "stream": "stderr", "line": 61,
         "time": "2026-11-23T16:49:56Z"},
        {"kind": "traceback", "stream": "stderr", "line": 61, "time": "2026-11-23T16:49:56Z",
         "text": "IndexError: index 5000 is out of bounds for dimension 0 with size 1000"}]
    report_path.write_text(json.dumps(report))
    log = tmp_path / "server.log"
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "log", "--log", str(log),
                 "--crash-line", crash_line) as server:
        result, data = _replay(dump, "--url", server.url, "--watch-log", log)
    assert data["expected"]["patterns"] == [
        r"IndexError: index \d+ is out of bounds for dimension \d+ with size \d+"]
    assert data["attempts"][0]["verdict"] == verdict
    assert crash_line in data["attempts"][0]["observed"]["lines"]
    assert result.returncode == (0 if verdict == "reproduced" else 1)


def test_any_crash_ignores_the_run_directory(tmp_path):
    dump = _run_directory(tmp_path)
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "log", "--log", str(tmp_path / "l"),
                 "--crash-line", ASSERT) as server:
        result, data = _replay(dump, "--url", server.url, "--watch-log", tmp_path / "l", "--any-crash")
    assert data["expected"] is None and data["attempts"][0]["verdict"] == "crashed"
    assert result.returncode == 0


def test_the_minimiser_does_not_keep_a_different_crash(tmp_path):
    """The only crash this server has is a device-side assert: with an illegal memory access
    expected, the first trial fails to reproduce and nothing is written."""
    port = free_port()
    out = tmp_path / "min.pkl"
    command = server_command(port, "--die-on", "1005", "--crash-line", ASSERT)
    result, data = _replay(synthetic(tmp_path, 8), "--url", f"http://127.0.0.1:{port}", "--minimize",
                           "--restart-cmd", command, "--expect", "illegal memory access", "-o", out)
    assert result.returncode == 1 and data["minimization"]["minimal"] == [] and not out.exists()
    assert data["attempts"][0]["verdict"] == "different crash"
    assert "not reproduced" in result.stderr.decode()


@pytest.mark.parametrize("line, kernels", [
    ("=========     at 0x1a0 in /t/oob.cu:5:oob_kernel(int *, int)", ["oob_kernel"]),
    ("=========     at void ns::fused_moe<float, 4>(float *, int)+0x70 in /t/m.cu:9", ["fused_moe"]),
    ("illegal memory access in kernel 'rms_norm'", ["rms_norm"]),
    ("CUDA kernel errors might be asynchronously reported at some other API call", []),
])
def test_kernel_names_in_fault_lines(line, kernels):
    assert kernels_in(line) == kernels


def test_only_what_the_evidence_names_contradicts():
    expected = Expectation(source="t", fault_class="illegal-address", kernel="void k1(int*)")
    assert compare(expected, observe([ILLEGAL]), True) == ("reproduced", None)
    assert compare(expected, ObservedFault(), True)[0] == "unconfirmed"
    assert compare(expected, ObservedFault(), False)[0] == "no crash"
    assert compare(None, observe([ASSERT]), True)[0] == "crashed"
    assert short_kernel("void a::b::k1<int, (char)3>(int*)") == "k1"


def test_a_new_coredump_whose_fault_names_no_kernel_is_evidence_of_its_exception(build):
    """The oracle reads the first fault of each coredump written during a replay; a fault with
    no kernel (no grid entry point to name one) still gives its exception, where it used to
    stop the replay with an AttributeError."""
    scenario = scenarios.exited_warp()
    for grid in scenario.spec.devices[0].grids:
        grid.function_entry = 0
    core = str(build(scenario).path)
    exception = crashlab.inspect(core, sass=False).faults[0].exception.name
    assert runner._core_faults([core]) == [(None, exception)]


# -- the hardened profile ------------------------------------------------------------------------

def _launch(tmp_path, harden, env=None):
    port = free_port()
    launched = tmp_path / "launch.json"
    command = server_command(port, "--launch-record", str(launched))
    result, data = _replay(synthetic(tmp_path, 3), "--url", f"http://127.0.0.1:{port}",
                           "--restart-cmd", command, "--harden", harden, env=env)
    return result, data, json.loads(launched.read_text()), command


def test_harden_sglang_launches_with_the_debug_switches(tmp_path):
    result, data, seen, command = _launch(tmp_path, "sglang")
    assert result.returncode == 1, result.stderr
    assert seen["env"]["SGLANG_DEBUG_POISON_POOL"] == "1"
    assert seen["env"]["SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY"] == "1"
    assert seen["argv"][-2:] == ["--kv-canary", "raise"]
    assert data["harden"]["profile"] == "sglang" and data["harden"]["command"] == f"{command} --kv-canary raise"


def test_harden_sanitizer_runs_the_command_under_compute_sanitizer(tmp_path):
    record = tmp_path / "sanitizer.json"
    env = {"PATH": f"{TOOLS}{os.pathsep}{os.environ['PATH']}",
           "CRASHLAB_TEST_SANITIZER_RECORD": str(record)}
    result, data, seen, command = _launch(tmp_path, "all", env=env)
    sanitizer = json.loads(record.read_text())
    options = sanitizer["argv"][1:sanitizer["argv"].index("/bin/sh")]
    assert options == ["--tool", "memcheck", "--target-processes", "all", "--generate-coredump"]
    assert sanitizer["program"] == ["/bin/sh", "-c", f"{command} --kv-canary raise"]
    assert seen["env"]["SGLANG_DEBUG_POISON_POOL"] == "1"  # the server really ran, under it
    assert result.returncode == 1 and not data["attempts"][0]["signals"]  # its banner is no fault


def test_harden_needs_a_restart_command_and_a_sanitizer(tmp_path):
    _one_line_error(run_cli("replay", FIXTURE, "--url", "http://x", "--harden"), 2, "give --restart-cmd")
    missing = run_cli("replay", FIXTURE, "--url", "http://127.0.0.1:1", "--restart-cmd", "true",
                      "--harden", "sanitizer", env={"CRASHLAB_COMPUTE_SANITIZER": str(tmp_path / "no")})
    _one_line_error(missing, 3, "is not an executable file")


@pytest.mark.parametrize("args, message", [
    (["--url", "http://x", "--expect", "(unclosed"], "--expect '(unclosed'"),
    (["--url", "http://x", "--any-crash", "--expect", "x"], "contradict"),
    (["--url", "http://x", "--force-decode", "always"], "Invalid value for '--force-decode'"),
    (["--url", "http://x", "--late-threshold", "-1"], "Invalid value for '--late-threshold'"),
])
def test_bad_fidelity_options_get_one_line_and_exit_2(args, message):
    _one_line_error(run_cli("replay", FIXTURE, *args), 2, message)
