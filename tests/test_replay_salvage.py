"""Crash dumps cut short (their writer killed, the disk full) give the requests read whole before
the cut, with a warning; a cut before the first whole request, or bytes that are wrong rather than
missing, are still refused in one line.

The real SGLang dumps (fixtures/sglang_dumps/real) are cut at every 1% and at every byte of their
last 4% (the last request and what follows it); each partial load is compared with the full one.
"""

from __future__ import annotations

import functools
import json
import pickle

import pytest

import crashlab.replay as replay
from crashlab.errors import BadInput
from crashlab.picklesafe import unpickler
from crashlab.picklesafe.opcodes import PickleRefused, Truncated
from tests.conftest import run_cli
from tests.replay_support import FAST_WATCH, FIXTURES, standin
from tests.schema_check import errors

REAL = {version: FIXTURES / "real" / f"crash_dump_real_{version}.pkl"
        for version in ("0.5.6.post2", "0.5.12", "0.5.23")}
#: What a partial load may number differently from the full one: arrival order among fewer.
RENUMBERED = {"index", "offset_s"}


def in_dump_order(dump) -> list[dict]:
    return [request.model_dump(exclude=RENUMBERED)
            for request in sorted(dump.requests, key=lambda request: request.position)]


@functools.cache
def full(version: str) -> list[dict]:
    return in_dump_order(replay.load(REAL[version]))


def cut_file(tmp_path, version: str, cut: int):
    path = tmp_path / f"cut-{version}-{cut}.pkl"
    path.write_bytes(REAL[version].read_bytes()[:cut])
    return path


@pytest.mark.parametrize("version", sorted(REAL))
def test_every_cut_salvages_the_dumps_first_requests(tmp_path, version):
    size = REAL[version].stat().st_size
    whole = full(version)
    read_before, endings = 0, set()
    for cut in sorted({size * percent // 100 for percent in range(1, 100)}
                      | set(range(size - size // 25, size))):
        path = cut_file(tmp_path, version, cut)
        try:
            dump = replay.load(path)
        except BadInput as refusal:
            assert "before its first request" in str(refusal) or "inside its first" in str(refusal)
            assert read_before == 0, f"cut at {cut} refused after {read_before} requests were read"
            continue
        finally:
            path.unlink()
        read = len(dump.requests)
        assert dump.partial.requests_read == read >= read_before  # monotone in the cut
        assert in_dump_order(dump) == whole[:read], cut
        assert dump.warnings[0] == dump.partial.line()
        endings.add((dump.partial.ends_inside, dump.partial.requests_complete))
        read_before = read
    assert read_before == len(whole)
    # some cuts fell inside the last request, some after the whole list
    assert (len(whole), False) in endings and (None, True) in endings


@pytest.mark.parametrize("version", sorted(REAL))
def test_a_cut_inside_the_header_is_one_line_and_exit_2(tmp_path, version):
    result = run_cli("replay", str(cut_file(tmp_path, version, 2000)), "--list")
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.count(b"\n") == 1
    assert b"cut before its first request" in result.stderr


def test_list_and_json_say_partial(tmp_path):
    size = REAL["0.5.23"].stat().st_size
    path = cut_file(tmp_path, "0.5.23", size * 98 // 100)
    listed = run_cli("replay", str(path), "--list")
    assert listed.returncode == 0, listed.stderr
    line = f"{path}: partial: 16 requests, the file ends inside request 17".encode()
    assert listed.stderr.startswith(line) and listed.stderr.count(b"\n") == 1
    assert b"partial:" not in listed.stdout  # said once, on stderr
    as_json = run_cli("replay", str(path), "--list", "--json")
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and errors(data, "listing") == []
    assert data["partial"]["requests_read"] == len(data["requests"]) == 16
    assert data["partial"]["ends_inside"] == 17 and not data["partial"]["requests_complete"]
    assert data["partial"]["bytes_missing_at_least"] == size - size * 98 // 100


def test_a_replay_of_a_partial_dump_sends_its_requests_and_says_partial(tmp_path):
    data = (FIXTURES / "crash_dump_0.5.23.pkl").read_bytes()
    path = tmp_path / "cut.pkl"
    path.write_bytes(data[:len(data) * 97 // 100])
    read = len(replay.load(path).requests)
    with standin(tmp_path) as server:
        result = run_cli("replay", *FAST_WATCH, str(path), "--url", server.url, "--json")
    assert result.returncode == 1, result.stderr  # replayed, no crash
    report = json.loads(result.stdout)
    assert errors(report, "replay") == []
    assert 0 < read < 8 and len(report["attempts"][0]["requests"]) == read
    assert any(warning.startswith(f"partial: {read} requests") for warning in report["warnings"])
    assert b"partial:" in result.stderr


def test_a_replay_of_a_partial_dump_says_partial_once(tmp_path):
    """The human view leaves out of its warnings the partial line stderr has said."""
    data = (FIXTURES / "crash_dump_0.5.23.pkl").read_bytes()
    path = tmp_path / "cut.pkl"
    path.write_bytes(data[:len(data) * 97 // 100])
    with standin(tmp_path) as server:
        result = run_cli("replay", *FAST_WATCH, str(path), "--url", server.url)
    assert result.returncode == 1, result.stderr
    assert (result.stdout + result.stderr).count(b"partial: ") == 1, (result.stdout, result.stderr)


def _framed(value) -> bytes:
    return pickle.dumps(value, protocol=4)


def test_a_frame_longer_than_the_file_with_a_stop_is_refused_not_salvaged():
    """Bytes that are wrong, not missing: the pickle ends (STOP) before its frame says it does."""
    data = bytearray(_framed({"requests": []}))
    assert data[2] == 0x95  # FRAME
    data[3:11] = (len(data) + 100).to_bytes(8, "little")
    with pytest.raises(PickleRefused, match="FRAME declares") as refused:
        unpickler.loads(bytes(data))
    assert not isinstance(refused.value, Truncated)


def test_a_length_running_past_its_frame_is_forged_not_a_cut():
    """A string whose declared length runs past the end of a frame that ends inside the file:
    a pickler never writes that, so it is refused, not read as a cut."""
    data = bytearray(_framed({"requests": ["abc"]}))
    at = data.index(b"\x8c\x03abc")  # SHORT_BINUNICODE 3 "abc"
    data[at + 1] = 0xFF
    with pytest.raises(PickleRefused, match="declares 255 bytes") as refused:
        unpickler.loads(bytes(data))
    assert not isinstance(refused.value, Truncated)
