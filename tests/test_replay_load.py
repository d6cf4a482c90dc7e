"""Loading SGLang crash dumps of the three layouts into typed records, without sglang."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

import crashlab.replay as replay
from crashlab.errors import BadInput
from tests.conftest import run_cli
from tests.replay_support import FIXTURES, MAKE_DUMPS, ROOT, synthetic
from tests.standin_model import complete, tokenize

LAYOUTS = {
    "crash_dump_0.5.6.pkl": "sglang-0.5.6 crash dump, or a request dump before 0.5.23",
    "crash_dump_0.5.12.pkl": "sglang-0.5.12 crash dump",
    "crash_dump_0.5.23.pkl": "sglang-0.5.23 crash dump",
    "crash_dump_0.5.23_no_server_args.pkl": "sglang-0.5.23 crash dump",
    "request_dump_0.5.23.pkl": "sglang-0.5.23 request dump (/configure_logging)",
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_layout_gives_typed_records(name):
    dump = replay.load(FIXTURES / name)
    assert dump.layout == LAYOUTS[name]
    assert [r.rid for r in dump.requests] == ["r0-text", "r1-ids", "r2-stream", "r3-lora",
                                             "r4-image", "r5-embed", "r6-inflight-stream",
                                             "r7-inflight-ids"]
    by_rid = {r.rid: r for r in dump.requests}
    assert by_rid["r0-text"].text == "The capital of France is"
    assert by_rid["r0-text"].sampling_params == {"temperature": 0, "max_new_tokens": 8}
    assert by_rid["r0-text"].output.finish_reason == "length"
    assert by_rid["r0-text"].output.completion_tokens == 8
    assert by_rid["r1-ids"].input_ids == [128000, 791, 6864, 315]  # a tuple in 0.5.23, a list here
    assert by_rid["r2-stream"].stream and not by_rid["r0-text"].stream
    assert by_rid["r3-lora"].lora_path == "sql-lora"
    assert by_rid["r3-lora"].logprob.return_logprob and by_rid["r3-lora"].logprob.top_logprobs_num == 2
    assert by_rid["r4-image"].multimodal == {"image": 1}
    assert by_rid["r5-embed"].kind == "embedding" and by_rid["r5-embed"].output.embedding_size == 8
    assert [r.rid for r in dump.in_flight] == ["r6-inflight-stream", "r7-inflight-ids"]
    partial = complete(tokenize("Explain CUDA graphs in detail."), 5)[1]
    assert by_rid["r6-inflight-stream"].output.text == partial  # what it had produced at the crash
    assert by_rid["r7-inflight-ids"].output.text is None
    assert [r.index for r in dump.requests] == list(range(8))
    assert dump.requests[0].offset_s == 0.0
    assert dump.requests[3].offset_s == pytest.approx(0.30)
    assert dump.requests[3].finished - dump.requests[3].created == pytest.approx(0.2)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_server_args_and_launch_command_are_plain_data(name):
    dump = replay.load(FIXTURES / name)
    json.dumps(dump.model_dump(mode="json"))  # everything is JSON-able plain data
    if "no_server_args" in name:
        assert dump.server_args is None and dump.resolved_config is None
        return
    assert dump.server_args["tp_size"] == 2 and dump.server_args["crash_dump_folder"] == "/tmp/crash"
    assert dump.server_args_class == "sglang.srt.server_args.ServerArgs"
    assert dump.server_args["lora_paths"][0]["lora_name"] == "sql-lora"
    if "0.5.6" in name or "request_dump" in name:
        assert dump.launch_command is None
    else:
        assert "--crash-dump-folder /tmp/crash" in dump.launch_command


def test_loading_imports_no_sglang():
    """In a fresh interpreter: loading every fixture leaves no sglang module behind."""
    code = ("import sys, crashlab.replay as r\n"
            f"for name in {sorted(LAYOUTS)!r}: r.load({str(FIXTURES)!r} + '/' + name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sglang'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_fixtures_are_what_make_dumps_writes(tmp_path):
    """The committed fixtures are reproducible from their script (provenance holds)."""
    out = tmp_path / "again.pkl"
    subprocess.run([sys.executable, str(MAKE_DUMPS), "fixture", "--version", "0.5.23",
                    "--out", str(out)], check=True, capture_output=True, cwd=ROOT)
    assert out.read_bytes() == (FIXTURES / "crash_dump_0.5.23.pkl").read_bytes()


def test_a_bare_record_list_is_read(tmp_path):
    """SGLang's replay script also accepts a plain list of records; so does crashlab."""
    source = replay.load(FIXTURES / "crash_dump_0.5.12.pkl")
    from crashlab.picklesafe.writer import dumps

    path = tmp_path / "list.pkl"
    path.write_bytes(dumps([request._record for request in source.requests]))
    dump = replay.load(path)
    assert dump.layout == "record list" and len(dump.requests) == 8


def test_malformed_records_are_skipped_with_a_warning(tmp_path):
    path = tmp_path / "odd.pkl"
    path.write_bytes(pickle.dumps({"server_args": None, "requests": [("x", {}, 1.0, 2.0)]}))
    with pytest.raises(BadInput, match="none of its 1 records is a request record"):
        replay.load(path)
    source = replay.load(FIXTURES / "crash_dump_0.5.12.pkl")
    from crashlab.picklesafe.writer import dumps

    records = [request._record for request in source.requests] + [(1, 2), ("obj", {}, "t", 0)]
    path.write_bytes(dumps({"server_args": None, "requests": records, "extra": 1}))
    dump = replay.load(path)
    assert len(dump.requests) == 8
    assert dump.layout == "unrecognised"
    assert any("record 8 skipped" in warning for warning in dump.warnings)
    assert any("record 9 skipped" in warning for warning in dump.warnings)


@pytest.mark.parametrize("data, message", [
    (b"", "empty file"),
    (b"hello, world\n", "not a pickle of protocol 2 or later"),
    (b"\x1f\x8b\x08\x00", "gzip-compressed"),
    (pickle.dumps([1, 2, 3]), "none of its 3 records"),
    (pickle.dumps("text"), "its top level is a str"),
    (pickle.dumps({"a": 1}), "its top level is a dict with keys ['a']"),
    (pickle.dumps({"requests": 5}), "its 'requests' is a int"),
])
def test_files_that_are_not_dumps(tmp_path, data, message):
    path = tmp_path / "x.pkl"
    path.write_bytes(data)
    with pytest.raises(BadInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        replay.load(path)


def test_list_and_json_views(tmp_path):
    listed = run_cli("replay", FIXTURES / "crash_dump_0.5.23.pkl", "--list")
    assert listed.returncode == 0, listed.stderr
    text = listed.stdout.decode()
    assert "sglang-0.5.23 crash dump, 8 requests, 2 in flight" in text
    assert "The capital of France is" in text and "in flight" in text
    assert "lora=sql-lora" in text and "image×1" in text

    long_dump = synthetic(tmp_path, 3, "--version", "0.5.12")
    as_json = run_cli("replay", long_dump, "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    first = data["requests"][0]
    assert first["input_ids"] == [1000] + [17] * 15 and first["input_ids_count"] == 16
    assert data["layout"] == "sglang-0.5.12 crash dump"


def test_json_shortens_prompts(tmp_path):
    from crashlab.picklesafe.writer import dumps

    source = replay.load(FIXTURES / "crash_dump_0.5.12.pkl")
    record = source.requests[0]._record
    record[0].state["text"] = "word " * 1000
    record[0].state["input_ids"] = None
    path = tmp_path / "long.pkl"
    path.write_bytes(dumps({"server_args": None, "requests": [record]}))
    data = json.loads(run_cli("replay", path, "--json").stdout)
    text = data["requests"][0]["text"]
    assert text.startswith("word word") and text.endswith("… (5,000 chars)") and len(text) < 120


def test_an_empty_crash_dump_names_the_likely_cause(tmp_path):
    """SGLang 0.5.6 opens the file, then fails to pickle a --trust-remote-code config."""
    path = tmp_path / "crash_dump_2026-06-01_12-00-00.pkl"
    path.write_bytes(b"")
    with pytest.raises(BadInput, match="empty file .*server's arguments cannot be pickled"):
        replay.load(path)


def test_a_dump_without_server_args_says_why():
    dump = replay.load(FIXTURES / "crash_dump_0.5.23_no_server_args.pkl")
    assert any("could not pickle the server's arguments" in warning for warning in dump.warnings)


def test_requests_stream_in_dump_order_and_are_the_ones_returned():
    streamed = []
    dump = replay.load(FIXTURES / "crash_dump_0.5.23.pkl", on_request=streamed.append)
    in_dump_order = sorted(dump.requests, key=lambda request: request.position)
    assert len(streamed) == len(in_dump_order) == 8
    assert all(a is b for a, b in zip(streamed, in_dump_order, strict=True))


def test_a_pipe_is_read_like_a_file(tmp_path):
    data = (FIXTURES / "crash_dump_0.5.12.pkl").read_bytes()
    listed = run_cli("replay", "/dev/stdin", "--json", stdin=data)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["requests"]) == 8


def test_the_listing_prints_a_strangers_text_as_inert_text(tmp_path):
    from crashlab.picklesafe.writer import dumps

    source = replay.load(FIXTURES / "crash_dump_0.5.12.pkl")
    record = source.requests[0]._record
    record[0].state["rid"] = "\x1b[2J[bold red]owned[/]"
    record[0].state["text"] = "\x1b]0;title\x07 [link=file:///etc/passwd]x[/link]"
    path = tmp_path / "hostile_text.pkl"
    path.write_bytes(dumps({"server_args": None, "requests": [record]}))
    listed = run_cli("replay", path, "--list")
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout.decode()
    assert "\x1b" not in out and "\x07" not in out
    # the rid's column shows its start and end around "…" (short_rid): the markup stays text
    assert "[bold red]…" in out and "[link=file:///etc/passwd]" in out


def test_a_reader_that_goes_away_ends_a_piped_listing_quietly(tmp_path):
    """`cat dump | crashlab replay /dev/stdin --list | head -1`: exit 0, nothing on stderr."""
    import subprocess
    import sys

    from crashlab.picklesafe.writer import dumps

    source = replay.load(FIXTURES / "crash_dump_0.5.12.pkl")
    data = dumps({"server_args": None, "requests": [source.requests[0]._record] * 3000})
    child = subprocess.Popen([sys.executable, "-m", "crashlab", "replay", "/dev/stdin", "--list"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdin.write(data)
    child.stdin.close()
    assert child.stdout.readline().startswith(b"#")
    child.stdout.close()
    assert child.wait(timeout=120) == 0
    assert child.stderr.read() == b""
