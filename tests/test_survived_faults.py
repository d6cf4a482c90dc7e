"""Faults the server survives (crashlab.supervise.survived), read from a REAL SGLang 0.5.23 log:
fixtures/logs/sglang_0.5.23_http_500_then_crash.stderr.log, a server that answered a chat
request with HTTP 500 ("Error in request: 'add_generation_prompt'", a chained TypeError and
KeyError) and lived on, then died of a request whose top_logprobs its sampler could not take
("Scheduler hit an exception", RuntimeError). The real server tier (tests/test_sglang_records.py)
runs the same fault under serve.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from crashlab.report.run import Incident
from crashlab.signature.signing import compute
from crashlab.supervise import survived
from crashlab.supervise.logscan import StreamScanner
from crashlab.supervise.manifest import Health, Incarnation
from tests.conftest import ROOT

LOG = ROOT / "fixtures" / "logs" / "sglang_0.5.23_http_500_then_crash.stderr.log"


def _findings(data: bytes) -> list:
    found: list = []
    scanner = StreamScanner("stderr", found.append)
    scanner.feed(data)
    scanner.close()
    return found


def _incarnation(findings: list) -> Incarnation:
    return Incarnation(number=1, directory="incarnation-1", status="crashed",
                       started_at="2026-12-06T11:26:50.000+00:00", health=Health(url=None),
                       kernel_log="watched", findings=findings)


def _crash(findings: list) -> Incident:
    return Incident(incarnation=1, directory="incarnation-1", kind="crash",
                    started_at="2026-12-06T11:26:50.000+00:00", ended_at="2026-12-06T11:29:10.000+00:00",
                    exit=None, stopped_by_crashlab=False, summary="", dumps=[], findings=findings)


def test_the_500_and_its_chained_tracebacks_are_one_survived_fault():
    findings = _findings(LOG.read_bytes())
    [chain] = survived.settled(findings, set(), datetime.now().astimezone(), closed=True)
    line, *tracebacks = chain
    assert line.kind == "survived-fault" and "Error in request: 'add_generation_prompt'" in line.text
    assert [t.text.split(":")[0] for t in tracebacks] == ["TypeError", "KeyError"]
    assert line.end_line == tracebacks[-1].end_line
    text = LOG.read_bytes().decode().split("\n")  # lines end at a newline only (the log holds \r redraws)
    assert text[line.end_line - 1] == "KeyError: 'add_generation_prompt'"


def test_a_fault_waits_until_its_traceback_has_settled_and_is_made_once():
    findings = _findings(LOG.read_bytes())
    [line] = [f for f in findings if f.kind == "survived-fault"]
    read_at = datetime.fromisoformat(line.time)
    assert survived.settled(findings, set(), read_at + timedelta(seconds=0.5)) == []
    assert len(survived.settled(findings, set(), read_at + timedelta(seconds=3))) == 1
    assert survived.settled(findings, {survived.key(line)}, read_at + timedelta(seconds=3)) == []


def test_the_survived_incident_is_signed_as_the_tokenizer_process_raising_it():
    findings = _findings(LOG.read_bytes())
    [chain] = survived.settled(findings, set(), datetime.now().astimezone(), closed=True)
    built = survived.incident(_incarnation(findings), chain)
    assert built.kind == "survived" and built.exit is None
    assert built.summary.startswith("Error in request: 'add_generation_prompt' "
                                    "(KeyError: 'add_generation_prompt')")
    assert built.signature is not None and built.signature.kind == "python-exception"
    assert built.signature.parts == ["tokenizer", "TypeError", "_render_and_encode_chat_template",
                                     "_apply_jinja_template"]


def test_the_same_fault_killing_the_server_joins_the_survived_ones_signature():
    """CONSTRUCTED from the real log: the same chained traceback as SGLang prints it when the
    fault kills its TokenizerManager ("TokenizerManager hit an exception: Traceback ..." on one
    line, sglang/srt/managers/tokenizer_manager.py's handler), which no request makes 0.5.23 do."""
    lines = LOG.read_bytes().decode().split("\n")
    at = next(n for n, text in enumerate(lines) if "Error in request: " in text)
    stamp = lines[at].split("]")[0] + "]"
    fatal = lines[:at] + [f"{stamp} TokenizerManager hit an exception: {lines[at + 1]}"] + lines[at + 2:]
    killed = _findings("\n".join(fatal).encode())
    first_crash = [f for f in killed if f.line <= at + 40]  # the tokenizer's, not the scheduler's
    findings = _findings(LOG.read_bytes())
    [chain] = survived.settled(findings, set(), datetime.now().astimezone(), closed=True)
    lived = survived.incident(_incarnation(findings), chain)
    assert compute(_crash(first_crash)).hash == lived.signature.hash


def test_the_later_crash_is_signed_by_its_own_traceback_once_the_survived_fault_is_left_out():
    findings = _findings(LOG.read_bytes())
    [chain] = survived.settled(findings, set(), datetime.now().astimezone(), closed=True)
    done = {survived.key(chain[0])}
    crash_view = survived.without(_incarnation(findings), survived.consumed(findings, done))
    assert not [f for f in crash_view.findings if f.kind == "survived-fault"]
    signature = compute(_crash(crash_view.findings))
    assert signature.parts[:2] == ["scheduler", "RuntimeError"], signature.parts
    assert "get_top_logprobs_raw" in signature.parts
    # read with the survived fault in, the crash would take the 500's traceback for its own
    assert compute(_crash(findings)).parts[1] == "TypeError"
