"""``crashlab replay`` of the dump a REAL SGLang 0.5.23 server wrote under ``crashlab serve``, against
fresh real servers started by --restart-cmd: the request-triggered crash reproduces k/N, the
temperature-0 outputs of the finished requests match the recorded ones, and --minimize shrinks
the dozens of requests to the one that raises.
"""

from __future__ import annotations

import json

import pytest

import crashlab.replay as replay
from tests.conftest import free_port, run_cli
from tests.real_sglang import server

pytestmark = [pytest.mark.sglang, pytest.mark.xdist_group("sglang")]

REPLAY_TIMEOUT = 900


@pytest.fixture(scope="module")
def crashed(sglang_crash):
    return sglang_crash("exception")


def _replay(crashed, sglang_env, *options):
    port = free_port()
    done = run_cli("replay", crashed.request_dump, "--url", server.url(port), "--json",
                   "--restart-cmd", server.shell_command(sglang_env, port),
                   "--start-timeout", str(server.START_TIMEOUT), *options, timeout=REPLAY_TIMEOUT)
    assert done.returncode in (0, 1), done.stderr.decode(errors="replace")
    return done.returncode, json.loads(done.stdout)


def test_the_crash_reproduces_on_fresh_servers_and_the_other_outputs_match(crashed, sglang_env):
    code, result = _replay(crashed, sglang_env, "--repeat", "2")
    assert code == 0, result
    assert (result["reproductions"], result["repeat"]) == (2, 2)
    expected = result["expected"]
    assert expected["source"].endswith("report.json (incarnation 1)")
    assert any("IndexError" in pattern for pattern in expected["patterns"]), expected
    dump = replay.load(crashed.request_dump)
    finished = {r.index for r in dump.requests if not r.in_flight}
    for attempt in result["attempts"]:
        assert attempt["verdict"] == "reproduced", attempt["mismatch"]
        assert any("IndexError: index 5000" in line for line in attempt["observed"]["lines"])
        answered = [o for o in attempt["requests"] if o["index"] in finished]
        assert len(answered) == len(finished)
        # Replayed on the recorded schedule, a request that had finished before the crash may
        # still be running when the crashing one arrives on a slower (loaded) machine: the server
        # dies under it. That is the only other outcome a finished request may have.
        cut = [o for o in answered if (o["status"], o["delivery"]) == ("unfinished", "failed-after-send")]
        odd = [(o["index"], o["status"], o["delivery"], o["error"]) for o in answered
               if o["status"] != "ok" and o not in cut]
        assert not odd, odd
        assert len(cut) < len(answered), "no finished request was answered: nothing compared"
        assert attempt["divergences"] == 0, [o["divergence"] for o in answered if o["divergence"]]


def test_minimize_shrinks_the_dump_to_the_request_that_raises(crashed, sglang_env, tmp_path):
    output = tmp_path / "minimal.pkl"
    code, result = _replay(crashed, sglang_env, "--minimize", "--budget", "12", "-o", output)
    assert code == 0, result
    dump = replay.load(crashed.request_dump)
    [culprit] = [r for r in dump.requests if r.text == "The lazy dog"]
    minimization = result["minimization"]
    assert minimization["original"] == len(dump.requests) > 30
    assert minimization["minimal_rids"] == [culprit.rid], minimization
    assert not minimization["budget_exhausted"]
    minimal = replay.load(output)
    assert [r.rid for r in minimal.requests] == [culprit.rid]
    assert minimal.requests[0].fields.get("custom_logit_processor") == \
        culprit.fields.get("custom_logit_processor")
