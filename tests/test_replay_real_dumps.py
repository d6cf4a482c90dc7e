"""crashlab reads the dumps SGLang's own code wrote, and agrees with what SGLang put in them.

The judge is fixtures/sglang_dumps/real/*.expected.json: written by make_real_dumps.py from the
real request objects in each release's own environment (rids, classes, in-flight set, prompt
lengths), and the globals and opcodes each pickle uses. Nothing here imports sglang.
"""

from __future__ import annotations

import json

import pytest

import crashlab.replay as replay
from crashlab.picklesafe.allowlist import lookup
from crashlab.replay.body import request_body
from crashlab.replay.records import LAYOUTS
from crashlab.replay.writer import write_subset
from tests.conftest import run_cli
from tests.replay_support import FIXTURES

REAL = FIXTURES / "real"
DUMPS = sorted(path.name for path in REAL.glob("*.pkl") if path.stat().st_size)


def expected(name: str) -> dict:
    return json.loads((REAL / name).with_suffix(".expected.json").read_text())


def by_position(dump) -> list:
    return sorted(dump.requests, key=lambda request: request.position)


def test_every_release_has_real_dumps():
    releases = {expected(name)["sglang"] for name in DUMPS}
    assert {"0.5.6.post2", "0.5.12", "0.5.23"} <= releases, releases


@pytest.mark.parametrize("name", DUMPS)
def test_every_global_a_real_dump_names_is_readable(name):
    for module, global_name in expected(name)["globals"]:
        assert lookup(module, global_name) is not None, f"{module}.{global_name}"


@pytest.mark.parametrize("name", DUMPS)
def test_a_real_dump_loads_with_the_requests_sglang_wrote(name):
    truth = expected(name)
    dump = replay.load(REAL / name)
    assert dump.keys == truth["top_level_keys"]
    assert dump.layout == next(layout for keys, layout in LAYOUTS if keys == set(dump.keys))
    assert dump.server_args_class == truth["server_args_class"]
    if truth["server_args_class"] is None:
        assert len(dump.warnings) == 1 and "could not pickle the server's arguments" in \
            dump.warnings[0]
    else:
        assert not dump.warnings
    records = by_position(dump)
    assert len(records) == truth["num_records"]
    for request, record in zip(records, truth["records"], strict=True):
        assert request.rid == record["rid"]
        assert request.sglang_class == record["class"]
        assert request.in_flight == record["in_flight"], request.rid
        assert request.stream == bool(record["stream"])
        if record["input_ids_len"] is not None:
            assert len(request.input_ids) == record["input_ids_len"]
        if record["text_len"] is not None and isinstance(request.text, str):
            assert len(request.text) == record["text_len"]
    assert [[r.created, r.finished] for r in records] == truth["record_times"]


@pytest.mark.parametrize("name", DUMPS)
def test_server_args_of_a_real_dump_are_plain_data(name):
    dump = replay.load(REAL / name)
    if dump.server_args is None:
        return
    json.dumps(dump.server_args)  # every nested config is JSON-able data
    config = dump.server_args.get("model_config") or dump.server_args.get("_model_config")
    if config is not None:
        assert config["__class__"] == "sglang.srt.configs.model_config.ModelConfig"
        assert config["hf_config"]["__class__"].split(".")[0] in ("transformers",
                                                                  "transformers_modules")


@pytest.mark.parametrize("name", DUMPS)
def test_every_real_request_makes_a_json_body(name):
    for request in replay.load(REAL / name).requests:
        endpoint, body = request_body(request)
        json.dumps(body)
        assert endpoint in ("/generate", "/encode")


@pytest.mark.parametrize("name", DUMPS)
def test_a_subset_of_a_real_dump_reads_back(tmp_path, name):
    dump = replay.load(REAL / name)
    keep = by_position(dump)[::2]
    write_subset(dump, keep, tmp_path / "subset.pkl")
    again = replay.load(tmp_path / "subset.pkl")
    assert [r.rid for r in by_position(again)] == [r.rid for r in keep]
    assert [r.in_flight for r in by_position(again)] == [r.in_flight for r in keep]


@pytest.mark.parametrize("name", DUMPS)
def test_the_cli_lists_and_prints_json_for_a_real_dump(name):
    truth = expected(name)
    listed = run_cli("replay", REAL / name, "--list")
    assert listed.returncode == 0, listed.stderr
    assert f"{truth['num_records']} requests" in listed.stdout.decode()
    printed = run_cli("replay", REAL / name, "--json")
    assert printed.returncode == 0, printed.stderr
    rids = [request["rid"] for request in json.loads(printed.stdout)["requests"]]
    assert sorted(rids) == sorted(record["rid"] for record in truth["records"])


def test_the_empty_dump_sglang_0_5_6_leaves_names_its_cause():
    """0.5.6 opens the file, then fails to pickle a ServerArgs it cannot pickle: 0 bytes."""
    empty = [path for path in REAL.glob("*.pkl") if not path.stat().st_size]
    assert empty, "make_real_dumps.py writes 0.5.6's empty dump"
    for path in empty:
        result = run_cli("replay", path, "--list")
        lines = result.stderr.decode().splitlines()
        assert result.returncode == 2 and len(lines) == 1
        assert "empty file" in lines[0] and "cannot be pickled" in lines[0]
