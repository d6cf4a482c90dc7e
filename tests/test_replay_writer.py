"""Writing a subset back in SGLang's layout: readable by crashlab and by SGLang's own loaders."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pickletools import genops

import pytest

import crashlab.replay as replay
from crashlab.picklesafe.writer import dumps
from crashlab.replay.writer import write_subset
from tests.replay_support import FIXTURES, ROOT, STANDIN

VERSIONS = ["0.5.6", "0.5.12", "0.5.23"]
#: The sglang.* globals that SGLang 0.5.23's SafeUnpickler (srt/utils/common.py:3144, the loader
#: of its replay script since 0.5.10) allows (its allowlist of sglang.* classes).
SAFE_UNPICKLER_SGLANG = {
    "sglang.srt.managers.io_struct.GenerateReqInput",
    "sglang.srt.managers.io_struct.EmbeddingReqInput",
    "sglang.srt.managers.schedule_batch.Modality",
    "sglang.srt.multimodal.modality.Modality",
}

# SGLang's replay script reads a dump with plain pickle.load, sorts by created time and posts
# dataclasses.asdict(obj); this does the same in a process where the stand-in classes import.
READ_LIKE_SGLANG = """
import dataclasses, json, pickle, sys
data = pickle.load(open(sys.argv[1], "rb"))
records = data["requests"] if isinstance(data, dict) else data
records.sort(key=lambda x: x[-2])
print(json.dumps({"keys": sorted(data), "server_args": type(data["server_args"]).__name__,
                  "launch_command": data.get("launch_command"),
                  "requests": [[dataclasses.asdict(r[0]), r[1], r[2], r[3]] for r in records]}))
"""


def _globals(data: bytes) -> set[str]:
    found, strings = set(), []
    for opcode, arg, _ in genops(data):
        if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE"):
            strings.append(arg)
        elif opcode.name == "STACK_GLOBAL":
            found.add(f"{strings[-2]}.{strings[-1]}")
    return found


def _read_with_stdlib(version: str, path) -> dict:
    environment = {**os.environ, "PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_VERSION": version}
    out = subprocess.run([sys.executable, "-c", READ_LIKE_SGLANG, str(path)], capture_output=True,
                         text=True, env=environment, cwd=ROOT, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("version", VERSIONS)
def test_subset_reads_back_like_the_original(tmp_path, version):
    dump = replay.load(FIXTURES / f"crash_dump_{version}.pkl")
    keep = [dump.requests[index] for index in (7, 1, 4, 5)]
    out = tmp_path / "min.pkl"
    write_subset(dump, keep, out)

    again = replay.load(out)
    assert again.layout == dump.layout and again.keys == dump.keys
    assert again.launch_command == dump.launch_command
    assert [r.rid for r in again.requests] == ["r1-ids", "r4-image", "r5-embed", "r7-inflight-ids"]
    for before, after in zip(sorted(keep, key=lambda r: r.index), again.requests, strict=True):
        assert after.model_dump(exclude={"index", "position", "offset_s"}) == \
            before.model_dump(exclude={"index", "position", "offset_s"})

    original = _read_with_stdlib(version, FIXTURES / f"crash_dump_{version}.pkl")
    written = _read_with_stdlib(version, out)
    assert written["keys"] == original["keys"]
    assert written["server_args"] == "dict"  # not ServerArgs: see test below
    by_rid = {entry[0]["rid"]: entry for entry in original["requests"]}
    for entry in written["requests"]:
        assert entry == by_rid[entry[0]["rid"]]  # the same fields, output and times


@pytest.mark.parametrize("version", VERSIONS)
def test_only_globals_sglangs_safe_loader_allows(tmp_path, version):
    dump = replay.load(FIXTURES / f"crash_dump_{version}.pkl")
    out = tmp_path / "min.pkl"
    write_subset(dump, dump.requests, out)
    original = _globals((FIXTURES / f"crash_dump_{version}.pkl").read_bytes())
    assert "sglang.srt.server_args.ServerArgs" in original  # the original needs more than allowed
    written = _globals(out.read_bytes())
    assert written <= SAFE_UNPICKLER_SGLANG and written


def test_written_bytes_match_the_stdlib_pickler_for_plain_data():
    """For plain values the emitter writes what CPython's pickler reads back identically."""
    value = {"a": [1, -1, 255, 256, 65535, 65536, -2**31, 2**31, 2**70, -2**70, 1.5, None,
                   True, False], "s": "é" * 300, "b": b"\x00" * 300, "t": (1, 2, 3, 4),
             "e": (), "set": {1, 2}, "fs": frozenset({"x"}), "ba": bytearray(b"ab"), "c": 1 + 2j,
             "nested": [[{"k": (1,)}]] * 2, "big": list(range(2500))}
    assert pickle.loads(dumps(value)) == value
