"""The launch as serve recorded it, read back by its one reader, and SGLang's options in each
spelling: a damaged launch.json costs its readers the launch, never an exception."""

from __future__ import annotations

import json

import pytest

from crashlab.launchline import SGLANG_TP, RecordedLaunch, option_value


def test_a_launch_json_as_serve_writes_it_reads_back(tmp_path):
    path = tmp_path / "launch.json"
    path.write_text(json.dumps({"argv": ["python", "-m", "sglang.launch_server", "--tp", "2"],
                                "cwd": "/srv", "sglang": True,
                                "environment": {"CUDA_VISIBLE_DEVICES": "2,3", "HF_TOKEN": "***"}}))
    launch = RecordedLaunch.read(path)
    assert launch.argv[-2:] == ["--tp", "2"]
    assert launch.environment == {"CUDA_VISIBLE_DEVICES": "2,3", "HF_TOKEN": "***"}
    assert option_value(launch.argv, SGLANG_TP) == "2"


@pytest.mark.parametrize("content", [
    None, b"", b"\xff\xfe{", b"[1, 2]", b'"argv"', b'{"argv": "python", "environment": ["A=1"]}',
])
def test_a_missing_or_damaged_launch_json_reads_as_an_empty_launch(tmp_path, content):
    path = tmp_path / "launch.json"
    if content is not None:
        path.write_bytes(content)
    assert RecordedLaunch.read(path) == RecordedLaunch()


def test_a_launch_json_larger_than_any_launch_is_not_read(tmp_path):
    path = tmp_path / "launch.json"
    path.write_text(json.dumps({"argv": ["python"], "environment": {"PAD": "x" * (5 << 20)}}))
    assert RecordedLaunch.read(path) == RecordedLaunch()


def test_values_of_another_type_are_left_out_one_by_one(tmp_path):
    path = tmp_path / "launch.json"
    path.write_text(json.dumps({"argv": ["python", 3, None, "--tp-size=4"],
                                "environment": {"HOME": "/root", "N": 1, "X": None}}))
    launch = RecordedLaunch.read(path)
    assert launch.argv == ["python", "--tp-size=4"] and launch.environment == {"HOME": "/root"}
    assert option_value(launch.argv, SGLANG_TP) == "4"
    assert option_value(["--tensor-parallel-size", "8", "--tp", "2"], SGLANG_TP) == "2"  # the last
