"""What serve sets up for a hang's collective evidence, by the server's torch and NCCL versions
(crashlab.supervise.hangsources), whose value wins, and dump-now's refusals of what it cannot
capture. The versions are those of real releases; the job that reads these variables runs in
tests/test_hang_capture.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashlab.supervise import environment, hangsources
from crashlab.supervise.environment import CoredumpMode
from crashlab.supervise.hangsources import Stack
from tests.conftest import run_cli

FR, PIPES = Path("/run/incarnation-1/flight-recorder"), Path("/run/incarnation-1/pipes")


def _wanted(torch: str | None, nccl: str | None) -> dict[str, str]:
    return hangsources.wanted(Stack(torch, nccl), FR, PIPES, 40123)


def test_torch_from_2_8_gets_the_flight_recorders_names_and_older_torch_the_nccl_ones():
    new = _wanted("2.14.1+cu130", "2.30.7")
    assert new["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert new["TORCH_FR_DUMP_TEMP_FILE"] == f"{FR}/rank-"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in new and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in new
    old = _wanted("2.7.1+cu128", "2.26.2")
    assert old["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000" and "TORCH_FR_BUFFER_SIZE" not in old
    unknown = _wanted(None, None)
    assert unknown["TORCH_FR_BUFFER_SIZE"] == unknown["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
    for values in (new, old, unknown):  # 2.14.1 still reads these under their NCCL names only
        assert values["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == f"{PIPES}/torch-fr-"
        assert values["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"


@pytest.mark.parametrize("nccl,enable,address", [
    ("2.30.7", "1", "127.0.0.1:40123"),  # safe: queried on a port of the incarnation's own
    ("2.27.3", "1", "127.0.0.1:40123"),  # the release that fixed the crash when polled
    ("2.27.2", "0", None), ("2.26.2", "0", None), ("2.24.3", "0", None),  # crash when polled
    ("2.21.5", None, None),  # no RAS yet
    (None, None, None),  # unknown: nothing set, never queried
])
def test_ras_is_set_up_only_where_the_nccl_has_it_and_survives_a_poll(nccl, enable, address):
    values = _wanted("2.14.1", nccl)
    assert values.get("NCCL_RAS_ENABLE") == enable and values.get("NCCL_RAS_ADDR") == address
    refusal = hangsources.ras_refusal(nccl)
    assert (refusal is None) == (enable == "1")
    if enable == "0":
        assert "NVIDIA/nccl#1669" in refusal and "fixed in 2.27.3" in refusal


def test_the_users_value_under_either_spelling_wins_and_is_recorded_under_it(tmp_path):
    also = _wanted("2.14.1", "2.30.7")
    env, settings = environment.resolve({"TORCH_NCCL_TRACE_BUFFER_SIZE": "100"},
                                        CoredumpMode.LIGHTWEIGHT, False, tmp_path, tmp_path,
                                        also, hangsources.SPELLINGS)
    assert "TORCH_FR_BUFFER_SIZE" not in env and env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "100"
    by_name = {setting.name: setting for setting in settings}
    assert by_name["TORCH_NCCL_TRACE_BUFFER_SIZE"].as_manifest() == {
        "value": "100", "set_by": "user", "crashlab_value": "2000"}
    assert "TORCH_FR_BUFFER_SIZE" not in by_name
    assert by_name["NCCL_RAS_ADDR"].set_by == "crashlab"



def test_dump_now_asks_for_runs_or_a_deployment_and_finds_no_live_one(tmp_path):
    neither = run_cli("dump-now")
    assert neither.returncode == 2 and neither.stderr.count(b"\n") == 1
    both = run_cli("dump-now", tmp_path, "--deployment", "pd-1")
    assert both.returncode == 2 and b"not both or neither" in both.stderr
    none = run_cli("dump-now", "--deployment", "pd-1", "--runs-dir", tmp_path)
    assert none.returncode == 3 and none.stderr.decode() == \
        f"crashlab: no live run of deployment 'pd-1' in {tmp_path}\n"
