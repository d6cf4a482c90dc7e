"""The hang reading's readers and rules on files made here, for the shapes a live run cannot be
made to give on demand (an older PyTorch's keys, a ring buffer that forgot, a hostile file).

The Flight Recorder dumps here are CONSTRUCTED: dicts with the keys and value types torch's
FlightRecorder.cpp writes (as the real dumps of tests/test_hangs_gloo.py show), pickled by the
stdlib at protocol 2 or dumped as JSON with sorted keys, as torch does. The NCCL RAS replies are
CONSTRUCTED from NCCL's documented format (fixtures/hangs/ras/PROVENANCE.md). Real dumps, real
py-spy text and real processes are tests/test_hangs_gloo.py's.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashlab.console import ViewConsole
from crashlab.errors import BadInput
from crashlab.hangs import flightrecorder, pyspy, ras, terminal
from crashlab.hangs.across import read_groups
from crashlab.hangs.calls import c10d_native, collective_call
from crashlab.hangs.files import Unreadable, read_within
from crashlab.hangs.layout import CAPTURE, Capture, RankProcess, SourceRecord, source_path
from crashlab.hangs.p2p import unmatched
from crashlab.hangs.reading import read
from crashlab.hangs.verdicts import verdicts
from tests.conftest import ROOT, run_cli

RAS = ROOT / "fixtures" / "hangs" / "ras"
FILE = "/opt/app/torch/distributed/distributed_c10d.py"


def entry(seq: int, op: str = "all_reduce", sizes=((4,),), *, retired: bool = True,
          state: str = "scheduled", pg=("0", "default_pg"), frames: bool = True) -> dict:
    made = {
        "record_id": seq - 1, "pg_id": 0, "process_group": tuple(pg), "collective_seq_id": seq,
        "p2p_seq_id": 0, "op_id": seq, "profiling_name": f"nccl:{op}",
        "time_created_ns": 1_700_000_000_000_000_000 + seq, "input_sizes": [list(s) for s in sizes],
        "input_dtypes": ["Float"] * len(sizes), "output_sizes": [list(s) for s in sizes],
        "output_dtypes": ["Float"] * len(sizes), "state": state,
        "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
        "retired": retired, "timeout_ms": 600_000, "is_p2p": False, "thread_id": "1",
        "thread_name": "python"}
    if frames:
        made["frames"] = [{"name": op, "filename": FILE, "line": 3906},
                          {"name": "forward", "filename": "model.py", "line": 12}]
    return made


def dump(entries: list[dict], completed: int | None = None, ranks=(0, 1, 2, 3)) -> dict:
    newest = max((e.get("collective_seq_id", e.get("seq_id", -1)) for e in entries
                  if isinstance(e, dict)), default=-1)
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                    "ranks": str(list(ranks))}},
            "comm_lib_version": "2.27.3",
            "pg_status": {"0": {"last_enqueued_collective": newest, "last_started_collective": -1,
                                "last_completed_collective": newest if completed is None else completed}},
            "entries": entries}


def pickled(value) -> bytes:
    return pickle.dumps(value, protocol=2)


def as_json(value) -> bytes:
    """As torch's JSON handler writes: sorted keys, pg_status' numbers as text, no frames."""
    copy = json.loads(json.dumps(value))
    for status in copy.get("pg_status", {}).values():
        for key in status:
            status[key] = str(status[key])
    for item in copy.get("entries", []):
        item.pop("frames", None)
    return json.dumps(copy, sort_keys=True).encode()


def test_a_pickled_dump_gives_each_entry_with_its_stack_and_the_groups_status():
    record = flightrecorder.read(pickled(dump([entry(1), entry(2, retired=False)], completed=1)), "d")
    assert record.format == "pickle" and record.version == "2.10" and record.cut is None
    first, second = record.entries
    assert (second.seq, second.op, second.profiling_name, second.pg_name, second.pg_desc) == \
        (2, "all_reduce", "nccl:all_reduce", "0", "default_pg")
    assert second.input_sizes == [[4]] and second.retired is False
    assert first.frames[0] == flightrecorder.Frame("all_reduce", FILE, 3906)
    assert record.pg_status["0"].last_completed == 1 and record.pg_ranks == {"0": [0, 1, 2, 3]}


def test_a_json_dump_reads_the_same_entries_without_stacks():
    data = dump([entry(1), entry(2, sizes=((2, 8),))], completed=1)
    record = flightrecorder.read(as_json(data), "d.json")
    assert record.format == "json" and [e.seq for e in record.entries] == [1, 2]
    assert record.entries[1].input_sizes == [[2, 8]] and not record.entries[1].frames
    assert record.pg_status["0"].last_completed == 1 and record.pg_status["0"].last_started == -1


def test_an_older_dump_numbers_its_collectives_seq_id():
    old = entry(7)
    old["seq_id"] = old.pop("collective_seq_id")
    assert [e.seq for e in flightrecorder.read(pickled(dump([old])), "old").entries] == [7]


def test_entries_not_of_flight_recorders_shape_are_left_out_and_counted():
    broken = [entry(1), {"process_group": "0"}, entry(2) | {"profiling_name": 5}, "text"]
    record = flightrecorder.read(pickled(dump(broken)), "d")
    assert [e.seq for e in record.entries] == [1]
    assert record.warnings == ["3 entries not of Flight Recorder's shape were left out"]


@pytest.mark.parametrize("encode", [pickled, as_json], ids=["pickle", "json"])
def test_a_dump_cut_anywhere_gives_its_whole_entries_or_one_line(encode):
    data = encode(dump([entry(n) for n in range(1, 6)]))
    whole = [e.seq for e in flightrecorder.read(data, "whole").entries]
    kept = set()
    for cut in range(len(data)):
        try:
            record = flightrecorder.read(data[:cut], "cut")
        except BadInput as refusal:
            assert "\n" not in str(refusal) and str(refusal).startswith("cut: ")
            continue
        seqs = [e.seq for e in record.entries]
        assert seqs == whole[:len(seqs)] and record.cut and "whole entries read" in record.cut
        kept.add(len(seqs))
    assert kept >= {1, 2, 3, 4}


def _global_call(module: str, name: str, argument: str) -> bytes:
    """A protocol-2 pickle that calls module.name(argument) when the stdlib loads it."""
    return (b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\nq\x00X"
            + len(argument).to_bytes(4, "little") + argument.encode() + b"\x85R.")


@pytest.mark.parametrize("data, said", [
    # a test's own file to touch: a fixed /tmp path is shared by every run on the machine
    (lambda owned: _global_call("os", "system", f"touch {owned}"), "refused to load this pickle"),
    (pickled({"entries": []})[:-1] + b"", "cut before its first whole Flight Recorder entry"),
    (b"\x80\x02csglang.srt.managers.io_struct\nGenerateReqInput\n)\x81}b.", "names the class"),
    (pickled([1, 2, 3]), "no 'entries' list"),
    (b"GARBAGE", "neither a pickle nor JSON"),
    (b"", "empty file"),
    (b'{"entries": ' + b"[" * 100_000, "nested too deep"),
    (b'{"entries": [1, 2}, "version": "2.10"}', "not valid JSON"),
    (b"\xff{", "neither a pickle nor JSON"),
], ids=["os-system", "cut-before-entries", "a-class", "a-list", "garbage", "empty", "deep-json",
        "broken-json", "not-utf8"])
def test_hostile_and_broken_files_are_refused_in_one_line(data, said, tmp_path):
    owned = tmp_path / "owned"
    with pytest.raises(BadInput) as refused:
        flightrecorder.read(data(owned) if callable(data) else data, "fr.pkl")
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert not owned.exists()


def test_a_pickle_bomb_is_refused_before_anything_walks_it():
    leaf = [entry(1)]
    level = [leaf] * 1000
    bomb = pickled({"entries": [level] * 1000})  # the pickler writes each list once, then refers
    assert len(bomb) < 20_000
    with pytest.raises(BadInput) as refused:
        flightrecorder.read(bomb, "bomb.pkl")
    assert "pickle bomb" in str(refused.value)


PY_SPY = """Process 4183: python -m sglang.launch_server --tp 4
Python v3.11.7 (/usr/bin/python3.11)

Thread 0x7F80837C6B80 (active+gil): "MainThread"
    pthread_cond_wait (libc.so.6)
    c10d::Work::wait (libtorch_cpu.so)
    std::function<void (int)>::operator() (libtorch.so)
    recv_requests (sglang/srt/managers/scheduler.py:812)
        Arguments:
            self: <Scheduler at 0x7f00>
        Locals:
            recv_reqs: []
    event_loop_normal (sglang/srt/managers/scheduler.py:790)
    _run_module_as_main (<frozen runpy>:198)
Thread 4201 (idle)
    0x7f80830a3f16 (libc.so.6)

Process 4190: sglang::detokenizer
Python v3.11.7 (/usr/bin/python3.11)

Thread 4190 (idle): "MainThread"
    recv (zmq/sugar/socket.py:800)
"""


def test_py_spy_text_gives_threads_and_frames_innermost_first():
    read = pyspy.read(PY_SPY)
    assert (read.pid, read.python, read.error) == (4183, "3.11.7", None)
    main, other, child = read.threads
    assert (main.thread, main.state, main.name) == ("0x7F80837C6B80", "active+gil", "MainThread")
    assert [f.place() for f in main.python_frames()] == [
        "sglang/srt/managers/scheduler.py:812 recv_requests",
        "sglang/srt/managers/scheduler.py:790 event_loop_normal",
        "<frozen runpy>:198 _run_module_as_main"]
    assert main.frames[2].function == "std::function<void (int)>::operator()"
    assert (other.name, other.frames[0].native, other.key()) == (None, True, ())
    assert child.frames[0].place() == "zmq/sugar/socket.py:800 recv"
    assert read.main_thread() is main


def test_a_py_spy_that_failed_leaves_its_error_and_no_thread():
    read = pyspy.read("Error: Permission Denied (os error 13)\nTry running again with elevated permissions\n")
    assert read.threads == [] and read.error == "Error: Permission Denied (os error 13)"


def test_ras_replies_give_communicators_issues_and_operation_counts():
    healthy = ras.read((RAS / "healthy.txt").read_text())
    assert healthy.healthy and healthy.nccl_version == "2.27.3"
    assert healthy.groups == [ras.CommunicatorGroup(0, 1, 1, 4, "RUNNING", "OK")]
    mismatch = ras.read((RAS / "mismatch.txt").read_text())
    [issue] = mismatch.issues
    assert not mismatch.healthy and (issue.kind, issue.communicator) == ("MISMATCH", "#0-0 (27a079b828ff1a75)")
    assert issue.counts == [ras.OperationCount("AllReduce", 3, None, 6),
                            ras.OperationCount("AllReduce", None, 2, 5)]
    assert issue.ranks == [2]
    incomplete = ras.read((RAS / "incomplete.txt").read_text())
    assert [(i.kind, i.communicator, i.ranks) for i in incomplete.issues] == [
        ("INCOMPLETE", None, []), ("INCOMPLETE", "#0-0 (9e17999afaa87dbb)", [7]), ("TIMEOUT", None, [])]
    assert incomplete.groups[0].errors == "INCOMPLETE" and not incomplete.healthy


def test_files_outside_the_capture_or_not_files_or_too_large_are_not_read(tmp_path):
    base = tmp_path / "capture"
    (base / "rank-0").mkdir(parents=True)
    (tmp_path / "secret").write_text("x")
    os.symlink(tmp_path / "secret", base / "rank-0" / "link")
    (base / "big").write_bytes(b"x" * 11)
    cases = {"../secret": "leaves the folder", "rank-0/link": "leaves the folder",
             "/etc/passwd": "not a path inside", "rank-0": "not a regular file",
             "big": "more than the 10", "none": "no such file"}
    for relative, said in cases.items():
        with pytest.raises(Unreadable) as refused:
            read_within(base, relative, 10)
        assert said in str(refused.value)


def _records(*dumps: dict) -> dict[int, flightrecorder.FlightRecord]:
    return {rank: flightrecorder.read(pickled(made), f"rank{rank}") for rank, made in enumerate(dumps)}


def test_a_rank_whose_buffer_forgot_the_collective_is_unknown_not_behind():
    ahead = [entry(n) for n in range(10, 13)] + [entry(13, retired=False)]
    forgot = [entry(n) for n in range(12, 13)] + [entry(13, retired=False)]  # its buffer starts at 12
    lagging = [entry(n) for n in range(9, 13)]
    [group] = read_groups(_records(dump(ahead, 12), dump(forgot, 12), dump(lagging, 12)), [0, 1, 2])
    assert (group.seq, group.kind, group.behind, group.waiting) == (13, "not-entered", [2], [0, 1])
    assert group.unknown == []


def test_ranks_that_entered_one_collective_with_other_ops_disagree_on_the_op():
    one = [entry(1), entry(2, op="_all_gather_base", retired=False)]
    two = [entry(1), entry(2, op="all_reduce", retired=False)]
    [group] = read_groups(_records(dump(one, 1), dump(one, 1), dump(two, 1)), [0, 1, 2])
    assert (group.seq, group.kind, group.op) == (2, "op", "_all_gather_base / all_reduce")
    assert [side.text() for side in group.sides] == ["all_reduce on rank 2", "_all_gather_base on ranks 0, 1"]
    [verdict] = verdicts([group], {}, [])
    assert verdict.kind == "mismatch" and verdict.ranks == [2]


def test_every_rank_in_one_collective_and_none_completing_is_no_progress():
    same = [entry(1), entry(2, retired=False)]
    [group] = read_groups(_records(dump(same, 1), dump(same, 1)), [0, 1])
    [verdict] = verdicts([group], {}, [])
    assert verdict.kind == "no-progress" and verdict.line.startswith(
        "every rank of pg 0 (default_pg) (0, 1) entered all_reduce #2 and none completed it")


def p2p(seq: int, name: str, *, done: bool = True, pg=("0", "default_pg")) -> dict:
    """A point-to-point entry as NCCL's Flight Recorder writes one (``send 0->1``, ``recv 1<-0``,
    group ranks; numbered by p2p_seq_id, collective_seq_id left at the last collective's)."""
    made = entry(1, pg=pg, retired=done, state="completed" if done else "started")
    made.update({"p2p_seq_id": seq, "is_p2p": True, "profiling_name": f"nccl:{name}"})
    return made


def test_a_recv_whose_send_the_peer_never_made_waits_on_that_peer():
    sender = [entry(1), p2p(1, "send 0->1")]
    receiver = [entry(1), p2p(1, "recv 1<-0"), p2p(2, "recv 1<-0", done=False)]
    [wait] = unmatched(_records(dump(sender, 1, ranks=(0, 1)), dump(receiver, 1, ranks=(0, 1))))
    assert (wait.rank, wait.op, wait.seq, wait.peer, wait.nth, wait.peer_made) == \
        (1, "recv", 2, 0, 2, 1)
    [verdict] = verdicts([], {}, [], [wait])
    assert (verdict.kind, verdict.ranks, verdict.op, verdict.pg_desc) == \
        ("unmatched-p2p", [0], "recv", "default_pg")
    assert verdict.line == ("rank 1 waits in recv #2 of pg 0 (default_pg) from rank 0, which rank 0 "
                            "never sent (1 send to rank 1 in its dump, 2 needed); rank 0's Python "
                            "stack is unknown (no py-spy sample)")


def test_a_send_matched_and_a_peer_that_forgot_say_nothing():
    # the recv was posted: matched, whatever the send's state
    sender = [entry(1), p2p(1, "send 0->1", done=False)]
    receiver = [entry(1), p2p(1, "recv 1<-0", done=False)]
    assert unmatched(_records(dump(sender, 1, ranks=(0, 1)), dump(receiver, 1, ranks=(0, 1)))) == []
    # a buffer that no longer holds the group's first point-to-point operation cannot count
    forgot = [entry(1), p2p(7, "send 0->1")]
    waiting = [entry(1), p2p(1, "recv 1<-0", done=False)]
    assert unmatched(_records(dump(forgot, 1, ranks=(0, 1)), dump(waiting, 1, ranks=(0, 1)))) == []


def test_group_ranks_in_a_profiling_name_are_placed_by_pg_config():
    pg = ("1", "pp_group")
    config = {"1": {"name": "1", "desc": "pp_group", "ranks": "[2, 3]"}}
    stage = [p2p(1, "recv 1<-0", done=False, pg=pg)]
    peer = [p2p(1, "recv 0<-1", done=False, pg=pg)]  # both receive: neither sent
    records = {2: flightrecorder.read(pickled(dump(peer) | {"pg_config": config}), "r2"),
               3: flightrecorder.read(pickled(dump(stage) | {"pg_config": config}), "r3")}
    waits = unmatched(records)
    assert sorted((w.rank, w.peer, w.pg_desc) for w in waits) == [(2, 3, "pp_group"), (3, 2, "pp_group")]


def _capture(folder: Path, rows: list[SourceRecord]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = Capture(started_at="2026-12-06T08:00:00+00:00", trigger="hang-after", samples=1,
                     interval_s=0, ranks=[RankProcess(rank=r, pid=100 + r) for r in range(2)],
                     sources=rows)
    (folder / CAPTURE).write_text(record.model_dump_json())


def test_a_capture_of_json_dumps_and_missing_sources_reads_without_a_gpu(tmp_path):
    folder = tmp_path / "run" / "captures" / "20261206T080000Z"
    rows = []
    for rank, entries in ((0, [entry(1), entry(2, retired=False)]), (1, [entry(1)])):
        path = source_path(rank, 0, "flight-recorder", ".json")
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(as_json(dump(entries, 1)))
        rows.append(SourceRecord(source="flight-recorder", rank=rank, sample=0, taken_at="x",
                                 status="ok", path=path))
        rows.append(SourceRecord(source="py-spy", rank=rank, sample=0, taken_at="x",
                                 status="skipped", note="ptrace is not allowed (yama ptrace_scope 3)"))
    (folder / "rank-0").mkdir(exist_ok=True)
    _capture(folder, rows)
    reading = read(tmp_path / "run", None)
    verdict = reading.verdicts[0]
    assert verdict.line == ("rank 1 never entered all_reduce #2 of pg 0 (default_pg) (rank 0 "
                            "waits in it); rank 1's Python stack is unknown (no py-spy sample)")
    assert {r.state for r in reading.ranks} == {"unknown"}
    assert reading.signature.parts[-1] == "unknown place"


def test_a_capture_whose_rank_waits_on_a_send_never_made_is_signed_by_it(tmp_path):
    folder = tmp_path / "run" / "captures" / "20261206T080000Z"
    rows = []
    sides = ((0, [entry(1), p2p(1, "send 0->1")]),
             (1, [entry(1), p2p(1, "recv 1<-0"), p2p(2, "recv 1<-0", done=False)]))
    for rank, entries in sides:
        path = source_path(rank, 0, "flight-recorder", ".pkl")
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(pickled(dump(entries, 1, ranks=(0, 1))))
        rows.append(SourceRecord(source="flight-recorder", rank=rank, sample=0, taken_at="x",
                                 status="ok", path=path))
    _capture(folder, rows)
    reading = read(tmp_path / "run", None)
    assert reading.found and reading.verdicts[0].kind == "unmatched-p2p"
    assert [(w.rank, w.peer) for w in reading.peer_waits] == [(1, 0)]
    assert reading.headline() == "Hang across 2 ranks: unmatched-p2p at recv #2"
    assert reading.signature.kind == "collective-hang"
    assert reading.signature.parts == ["never sent", "recv", "default_pg", "unknown place"]


def test_inspect_refuses_a_capture_record_that_is_not_one_in_one_line(tmp_path):
    folder = tmp_path / "captures" / "20261206T080000Z"
    folder.mkdir(parents=True)
    (folder / CAPTURE).write_text('{"started_at": 5}')
    done = run_cli("inspect", tmp_path)
    assert done.returncode == 2
    message = done.stderr.decode()
    assert message.count("\n") == 1 and "not a hang capture record" in message


_SEEDS = {"pickle": pickled(dump([entry(n) for n in range(1, 4)] + [entry(4, retired=False)])),
          "json": as_json(dump([entry(n) for n in range(1, 4)]))}


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_SEEDS)),
       st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8),
       st.integers(0, 1 << 20))
def test_mutated_dumps_give_a_record_or_one_line_never_a_traceback(which, flips, keep):
    """Bytes flipped and the file cut: as crash dumps are fuzzed (tests/test_fuzz.py)."""
    data = bytearray(_SEEDS[which])
    for at, value in flips:
        data[at % len(data)] = value
    data = data[:keep % (len(data) + 1)]
    try:
        record = flightrecorder.read(bytes(data), "fuzzed")
    except BadInput as refusal:
        assert "\n" not in str(refusal)
        return
    assert all(isinstance(e.seq, int) and isinstance(e.op, str) for e in record.entries)
    read_groups({0: record, 1: record}, [0, 1])


def test_names_from_a_capture_are_printed_as_text_never_markup(tmp_path):
    folder = tmp_path / "run" / "captures" / "20261206T080000Z"
    hostile = "[bold red]evil[/bold red]\x1b]0;owned\x07 :smile:"
    rows = []
    for rank, entries in ((0, [entry(1), entry(2, op=hostile, retired=False)]), (1, [entry(1)])):
        path = source_path(rank, 0, "flight-recorder", ".pkl")
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(pickled(dump(entries, 1)))
        rows.append(SourceRecord(source="flight-recorder", rank=rank, sample=0, taken_at="x",
                                 status="ok", path=path))
        spied = source_path(rank, 0, "py-spy")
        (folder / spied).write_text(f'Thread 1 (idle): "MainThread"\n    {hostile} (app.py:3)\n')
        rows.append(SourceRecord(source="py-spy", rank=rank, sample=0, taken_at="x", status="ok",
                                 path=spied))
    _capture(folder, rows)
    out = io.StringIO()
    terminal.render(read(tmp_path / "run", None), ViewConsole(file=out, width=120))
    shown = out.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown
    assert "[bold red]evil[/bold red]\\x1b]0;owned\\x07 :smile:" in shown.replace("\n", "")


# Verdicts from Python stacks only (no Flight Recorder dump): CONSTRUCTED py-spy text in the
# shape of the real dumps (tests/test_hangs_gloo.py reads the real ones), for what the real job
# does not do: ranks in different collectives, a rank that keeps moving, odd frames.

def _spied(*frames: str) -> str:
    return 'Thread 1 (idle): "MainThread"\n' + "".join(f"    {frame}\n" for frame in frames)


def _in(op: str, line: int = 3913) -> str:
    return _spied(f"{op} (torch/distributed/distributed_c10d.py:{line})",
                  "wrapper (torch/distributed/c10d_logger.py:83)", "step (serve.py:40)")


def _stacks_capture(run: Path, stacks: dict[int, list[str]]) -> None:
    """A capture of py-spy samples only, ``stacks[rank][sample]`` each; no Flight Recorder."""
    folder = run / "captures" / "20261206T080000Z"
    rows = []
    for rank, samples in stacks.items():
        for sample, text in enumerate(samples):
            path = source_path(rank, sample, "py-spy")
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text)
            rows += [SourceRecord(source="py-spy", rank=rank, sample=sample, taken_at="x",
                                  status="ok", path=path),
                     SourceRecord(source="flight-recorder", rank=rank, sample=sample, taken_at="x",
                                  status="missing", note="TORCH_FR_BUFFER_SIZE not set")]
    record = Capture(started_at="2026-12-06T08:00:00+00:00", trigger="hang-after",
                     samples=max(len(s) for s in stacks.values()), interval_s=0.3,
                     ranks=[RankProcess(rank=r, pid=100 + r) for r in stacks], sources=rows)
    (folder / CAPTURE).write_text(record.model_dump_json())


def test_stacks_in_different_collectives_are_a_mismatch_of_ops(tmp_path):
    _stacks_capture(tmp_path, {0: [_in("all_reduce")] * 3, 1: [_in("all_reduce")] * 3,
                               2: [_in("broadcast", 4021)] * 3})
    reading = read(tmp_path, None)
    [verdict] = reading.verdicts
    assert (verdict.kind, verdict.ranks, verdict.op, verdict.seq) == \
        ("stack-mismatch", [2], "all_reduce / broadcast", None)
    assert verdict.line.startswith(
        "the ranks stand in different collectives: ranks 0, 1 wait in all_reduce (their Python "
        "stacks, unchanged over 3 samples); rank 2 waits in broadcast (its Python stack, unchanged "
        "over 3 samples) (from Python stacks only")
    assert reading.signature.parts == ["in another by its stack", "all_reduce / broadcast",
                                       "step serve.py"]
    assert "Flight Recorder: no rank has a dump (3 ranks; rank 0: flight-recorder: missing in " \
        "samples 0-2: TORCH_FR_BUFFER_SIZE not set)" in verdict.evidence


def test_a_rank_whose_stack_moved_is_not_read_as_hung(tmp_path):
    moving = [_spied(f"decode (serve.py:{line})", "step (serve.py:40)") for line in (50, 51, 52)]
    _stacks_capture(tmp_path, {0: [_in("all_reduce")] * 3, 1: [_in("all_reduce")] * 3, 2: moving})
    reading = read(tmp_path, None)
    [verdict] = reading.verdicts
    assert (verdict.kind, verdict.ranks) == ("incomplete", [2])
    assert "; rank 2's Python stack moved between samples (last at serve.py:52 decode): not read " \
        "as hung" in verdict.line
    assert [r.state for r in reading.ranks] == ["stuck", "stuck", "moving"]
    assert not reading.found and reading.signature is None


def test_one_sample_or_no_rank_in_a_collective_gives_no_verdict_from_stacks(tmp_path):
    _stacks_capture(tmp_path / "one", {0: [_in("all_reduce")], 1: [_spied("step (serve.py:40)")]})
    _stacks_capture(tmp_path / "none", {r: [_spied("step (serve.py:40)")] * 3 for r in range(2)})
    assert read(tmp_path / "one", None).verdicts == []
    assert read(tmp_path / "none", None).verdicts == []


def test_a_collective_is_named_by_torch_distributed_frames_only():
    def call(text: str) -> str | None:
        found = collective_call(pyspy.read(_spied(*text.split("|"))).threads[0].frames)
        return found.function if found else None

    assert call("all_gather (torch/distributed/distributed_c10d.py:10)|"
                "all_gather_object (torch/distributed/distributed_c10d.py:20)") == "all_gather"
    assert call("barrier (/opt/venv/lib/torch/distributed/distributed_c10d.py:4700)") == "barrier"
    assert call("all_reduce (mine/distributed_c10d.py:3)") is None
    assert call("all_reduce (torch/distributed/distributed_c10d.py.bak:3)") is None
    assert call("all_reduce (torch/distributed/distributed_c10d.py:x)") is None  # not a line: native
    assert call("new_group (torch/distributed/distributed_c10d.py:5000)") is None
    assert call("c10d::Work::wait (libtorch_cpu.so)|main (job.py:1)") is None
    assert c10d_native(["c10d::Work::wait (libtorch_cpu.so)",
                        "pybind11::cpp_function<bool, c10d::Work> (libtorch_python.so)"]) == \
        ["c10d::Work::wait (libtorch_cpu.so)"]


_NAMES = st.sampled_from(["all_reduce", "broadcast", "recv", "main", "(", ")", " (x.py:1)",
                          "all_reduce (torch", "\x1b[31m", "名前", "a" * 300, ""])
_PLACES = st.sampled_from(["torch/distributed/distributed_c10d.py:3913", "job.py:7", "libc.so.6",
                           "torch/distributed/distributed_c10d.py", ":", "x.py:-1", "<frozen runpy>:198",
                           "/abs/torch/distributed/distributed_c10d.py:1", ""])
_FRAME_LINE = st.one_of(st.builds(lambda n, p: f"    {n} ({p})", _NAMES, _PLACES),
                        st.text(max_size=60).map(lambda t: "    " + t))


@settings(max_examples=120, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.lists(_FRAME_LINE, max_size=5), min_size=1, max_size=3),
                min_size=2, max_size=3))
def test_odd_py_spy_frames_give_a_reading_never_a_traceback(stacks):
    """py-spy texts of odd frames for each rank and sample, read whole without Flight Recorder."""
    texts = {rank: ['Thread 1 (idle): "MainThread"\n' + "\n".join(lines) + "\n" for lines in samples]
             for rank, samples in enumerate(stacks)}
    with tempfile.TemporaryDirectory() as folder:
        _stacks_capture(Path(folder), texts)
        reading = read(Path(folder), None)
    for rank in reading.ranks:
        if rank.call is not None:
            assert rank.call in {"all_reduce", "broadcast", "recv"}
    for verdict in reading.verdicts:
        assert verdict.seq is None and verdict.kind in (
            "stack-outside", "stack-mismatch", "stack-all-waiting", "incomplete")
        assert verdict.line.endswith("are unknown)")
