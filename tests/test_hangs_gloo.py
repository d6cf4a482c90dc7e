"""A real hang across 4 ranks, captured and read.

Real: torch.distributed on this CPU with the gloo backend (the SGLang environment's torch 2.14.1,
tests/gloo_hang/workload.py), the planted hangs (rank 2 skips an all_reduce; rank 2 passes 8
floats where the others pass 4; the skip again at a later step, as the same hang after a
restart), each rank's Flight Recorder dump through PyTorch's own debug pipe (its WorkerServer),
and py-spy on the live processes (the environment's own). Not real: each rank's GPU dump is a
SYNTHETIC builder dump, NVML and NCCL RAS replies are CONSTRUCTED (tests/gloo_hang/capture.py,
fixtures/hangs/ras/PROVENANCE.md). The twelve ranks start once for the module.

Expected values come from the workload (rank 2, the planted step and so the collective's number,
4 and 8 floats, recv_requests' line) and the builder's kernels, never from crashlab's output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pytest

import crashlab
from crashlab.errors import BadInput
from crashlab.hangs import flightrecorder, pyspy
from crashlab.hangs.layout import CAPTURE, CAPTURES, Capture, NvmlSample, SourceRecord
from crashlab.published import parse
from tests.conftest import ROOT, run_cli
from tests.gloo_hang.capture import (
    LAGGING,
    PLANTED,
    WORKLOAD,
    WORLD,
    capture,
    gpu_dumps,
    ptrace_refusal,
    py_spy_of,
    python_of,
    start,
    wait_ready,
)
from tests.schema_check import errors

#: the SGLang environment's torch, no server: a group of its own, started with the real-SGLang
#: tier (tests/conftest.py) but on another worker than its servers
pytestmark = pytest.mark.sglang

#: The same skip, planted later: another collective number, the same hang.
RESTART_PLANTED = 9
RAS = ROOT / "fixtures" / "hangs" / "ras"


def _line_of(pattern: str) -> int:
    lines = WORKLOAD.read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if re.search(pattern, text))


@pytest.fixture(scope="module")
def runs(sglang_env, tmp_path_factory) -> dict[str, Path]:
    """The three planted hangs, each captured with 3 host samples and its GPU dumps; no rank
    outlives the fixture."""
    tool = py_spy_of(sglang_env)
    if not tool.is_file():
        pytest.skip(f"no py-spy in the SGLang environment at {tool}")
    root = tmp_path_factory.mktemp("gloo")
    python = python_of(sglang_env)
    hung = {"skip": start(python, "skip", root / "skip" / "processes"),
            "size": start(python, "size", root / "size" / "processes"),
            "restart": start(python, "skip", root / "restart" / "processes", planted=RESTART_PLANTED)}
    pids = [p.pid for run in hung.values() for p in run.processes.values()]
    try:
        for run in hung.values():
            wait_ready(run)
        refusal = ptrace_refusal(tool, hung["skip"].processes[0].pid)
        if refusal:
            pytest.skip(f"py-spy cannot read a process on this machine (ptrace not allowed?): {refusal}")
        for name, run in hung.items():
            run_dir = root / name
            capture(run, run_dir, tool=tool, fr_format="json" if name == "size" else "pickle",
                    gpu_dumps=gpu_dumps(run_dir, list(run.processes)), native=name == "skip")
    finally:
        for run in hung.values():
            run.stop()
    assert not [pid for pid in pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    return {name: root / name for name in hung}


@pytest.fixture(scope="module")
def readings(runs):
    return {name: crashlab.read_hang(run_dir) for name, run_dir in runs.items()}


def _folder(run_dir: Path) -> Path:
    return next((run_dir / CAPTURES).iterdir())


def _copy(run_dir: Path, tmp_path: Path) -> tuple[Path, Path, Capture]:
    """A copy of a capture's run directory to change, its capture folder and its record."""
    copied = tmp_path / run_dir.name
    shutil.copytree(run_dir, copied, ignore=shutil.ignore_patterns("processes"))
    folder = _folder(copied)
    return copied, folder, parse(Capture, (folder / CAPTURE).read_text())


def _rewrite(folder: Path, record: Capture) -> None:
    (folder / CAPTURE).write_text(record.model_dump_json(indent=2))


def test_rank_2_never_entered_the_all_reduce_the_others_wait_in(readings):
    reading = readings["skip"]
    verdict = reading.verdicts[0]
    seq = PLANTED + 1
    assert (verdict.kind, verdict.ranks, verdict.op, verdict.seq, verdict.pg) == \
        ("never-entered", [LAGGING], "all_reduce", seq, "0")
    sleep_line = _line_of(r"time\.sleep")
    assert verdict.line.startswith(f"rank 2 never entered all_reduce #{seq} of pg 0 (default_pg) "
                                   "(ranks 0, 1, 3 wait in it, their warps in a collective wait "
                                   "in cross_device_reduce_1stage); ")
    assert verdict.line.endswith(f"rank 2 is in workload.py:{sleep_line} recv_requests, unchanged "
                                 "over 3 samples")
    assert reading.found
    said = "\n".join(verdict.evidence)
    assert "not completed on ranks 0, 1, 3" in said
    assert f"rank 2's newest collective of pg 0 (default_pg) is all_reduce #{seq - 1}, completed" in said
    assert "GPU dump of rank 2: reverse_tile" in said and "GPU dump of rank 2: wait_for_flag" in said
    assert "rank 2 stuck: main thread's Python stack unchanged over 3 samples" in said


def test_each_rank_says_where_it_stands_and_that_it_does_not_move(readings):
    reading = readings["skip"]
    seq = PLANTED + 1
    by_rank = {rank.rank: rank for rank in reading.ranks}
    assert sorted(by_rank) == [0, 1, 2, 3]
    assert {rank.state for rank in reading.ranks} == {"stuck"}
    assert by_rank[2].where == f"workload.py:{_line_of(r'time.sleep')} recv_requests"
    for number in (0, 1, 3):
        rank = by_rank[number]
        assert rank.where.startswith("torch/distributed/distributed_c10d.py:")
        assert rank.where.endswith(" all_reduce")
        [group] = rank.groups
        assert (group.pg, group.pg_desc, group.last_enqueued.seq, group.last_enqueued.completed,
                group.last_completed) == ("0", "default_pg", seq, False, seq - 1)
        assert group.completed_by_sample == [seq - 1] * 3
        assert group.last_enqueued.input_sizes == [[4]] and group.last_enqueued.input_dtypes == ["Float"]
        # the pickled dump keeps the Python stack; the caller is the workload's loop
        assert any(frame.endswith(f"workload.py:{_line_of(r'dist.all_reduce')} main")
                   for frame in group.last_enqueued.stack)
        assert any("c10d::Work::wait" in native for native in rank.threads[0].native)
    [lagging] = by_rank[2].groups
    assert (lagging.last_enqueued.seq, lagging.last_enqueued.completed) == (seq - 1, True)
    assert [w.kernel for w in by_rank[0].gpu.waits][:1] == ["cross_device_reduce_1stage"]


def test_a_size_mismatch_names_each_side_and_who_waits_where(readings):
    verdict = readings["size"].verdicts[0]
    seq = PLANTED + 1
    assert (verdict.kind, verdict.ranks, verdict.op, verdict.seq) == ("mismatch", [2], "all_reduce", seq)
    assert verdict.line.startswith(
        f"all_reduce #{seq} of pg 0 (default_pg) was entered with different sizes: input [[8]], "
        "output [[8]] on rank 2; input [[4]], output [[4]] on ranks 0, 1, 3; rank 2 waits in "
        f"#{seq} at torch/distributed/distributed_c10d.py:")
    assert verdict.line.endswith(f"ranks 0, 1, 3 completed it and wait in all_reduce #{seq + 1}, "
                                 "which rank 2 never entered")
    group = readings["size"].groups[0]
    assert (group.kind, group.waiting, group.completed) == ("sizes", [2], [0, 1, 3])
    # these dumps came through torch's JSON handler, which keeps no stack
    assert all(not g.last_enqueued.stack for rank in readings["size"].ranks for g in rank.groups)


def test_the_same_hang_after_a_restart_is_one_signature(readings):
    first, again, other = readings["skip"], readings["restart"], readings["size"]
    assert (first.verdicts[0].seq, again.verdicts[0].seq) == (PLANTED + 1, RESTART_PLANTED + 1)
    assert first.signature.kind == "collective-hang"
    assert first.signature.parts == ["never entered", "all_reduce", "default_pg", "recv_requests workload.py"]
    assert again.signature.hash == first.signature.hash
    assert {r.pid for r in again.ranks}.isdisjoint({r.pid for r in first.ranks})
    assert other.signature.hash != first.signature.hash


def test_inspect_prints_the_reading_and_its_json_follows_the_schema(runs):
    seq = PLANTED + 1
    done = run_cli("inspect", runs["skip"])
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert text.splitlines()[0] == f"Hang across 4 ranks: never-entered at all_reduce #{seq}"
    assert "never-entered: rank 2 never entered all_reduce" in text
    assert "recv_requests" in text and "cross_device_reduce_1stage" in text
    done = run_cli("inspect", _folder(runs["size"]), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert errors(data, "hang") == []
    assert data["verdicts"][0]["kind"] == "mismatch"
    refused = run_cli("inspect", runs["skip"], "--markdown")
    assert refused.returncode == 2 and refused.stderr.decode().count("\n") == 1


def test_py_spy_reader_takes_every_frame_line_of_real_dumps(runs):
    for path in sorted(_folder(runs["skip"]).glob("rank-*/sample-*/py-spy.txt")):
        text = path.read_text()
        dump = pyspy.read(text)
        frames = [line for line in text.splitlines() if re.match(r"^    \S", line)]
        assert sum(len(t.frames) for t in dump.threads) == len(frames)
        assert dump.main_thread().name == "MainThread" and dump.pid is not None


def test_cut_real_flight_recorder_dumps_are_salvaged_or_refused_in_one_line(runs):
    for name, suffix in (("skip", ".pkl"), ("size", ".json")):
        data = (_folder(runs[name]) / f"rank-0/sample-0/flight-recorder{suffix}").read_bytes()
        whole = [e.seq for e in flightrecorder.read(data, "whole").entries]
        salvaged = 0
        for cut in range(1, len(data), max(1, len(data) // 300)):
            try:
                record = flightrecorder.read(data[:cut], "cut")
            except BadInput as refusal:
                assert "\n" not in str(refusal)
                continue
            salvaged += 1
            seqs = [e.seq for e in record.entries]
            assert seqs == whole[:len(seqs)] and record.cut
        assert salvaged > 100


def test_a_flight_recorder_file_larger_than_any_dump_is_not_read(runs, tmp_path):
    run_dir, folder, _ = _copy(runs["skip"], tmp_path)
    huge = folder / "rank-0" / "sample-2" / "flight-recorder.pkl"
    with open(huge, "r+b") as file:
        file.truncate(flightrecorder_limit() + 1)  # sparse: nothing is written
    reading = crashlab.read_hang(run_dir)
    [rank0] = [r for r in reading.ranks if r.rank == 0]
    [note] = [n for n in rank0.sources if n.source == "flight-recorder"]
    assert (note.sample, note.status) == (2, "unreadable") and "not read" in note.note
    assert reading.verdicts[0].kind == "never-entered" and reading.verdicts[0].ranks == [2]


def flightrecorder_limit() -> int:
    from crashlab.hangs.evidence import LIMITS

    return LIMITS["flight-recorder"]


def test_a_path_leaving_the_capture_is_never_opened(runs, tmp_path):
    run_dir, folder, record = _copy(runs["skip"], tmp_path)
    outside = tmp_path / "secret.txt"
    outside.write_text("Thread 1 (idle): \"MainThread\"\n    leak (secret.py:1)\n")
    record.sources = [row.model_copy(update={"path": "../../../secret.txt"})
                      if (row.rank, row.sample, row.source) == (1, 2, "py-spy") else row
                      for row in record.sources]
    _rewrite(folder, record)
    reading = crashlab.read_hang(run_dir)
    [rank1] = [r for r in reading.ranks if r.rank == 1]
    assert "secret.py" not in reading.model_dump_json()
    assert any(n.status == "unreadable" and "leaves the folder" in n.note for n in rank1.sources)


def test_a_rank_whose_sources_are_all_missing_is_unknown_and_the_verdict_stands(runs, tmp_path):
    run_dir, folder, record = _copy(runs["skip"], tmp_path)
    record.sources = [row.model_copy(update={"status": "missing", "path": None,
                                             "note": "the process was gone"})
                      if row.rank == 3 else row for row in record.sources]
    _rewrite(folder, record)
    shutil.rmtree(folder / "rank-3")
    reading = crashlab.read_hang(run_dir)
    [rank3] = [r for r in reading.ranks if r.rank == 3]
    assert (rank3.state, rank3.samples, rank3.gpu) == ("unknown", 0, None)
    assert any(w.startswith("rank 3: no source gave evidence") for w in reading.warnings)
    verdict = reading.verdicts[0]
    assert (verdict.kind, verdict.ranks) == ("never-entered", [2])
    assert "(ranks 0, 1 wait in it" in verdict.line
    assert reading.groups[0].unknown == [3]
    assert any("rank 3 of pg 0 (default_pg): no Flight Recorder dump" in e for e in verdict.evidence)


def test_a_gpu_dump_collected_after_the_capture_stopped_waiting_gives_its_rank_a_gpu_side(
        runs, readings, tmp_path):
    """The driver took longer than --dump-timeout: capture.json says each GPU dump timed out, and
    serve collected the dumps later into cores/ under the driver's names (core.HOST.PID.TIME).
    The reading finds each by its rank's pid; rank 3's file, older than its trigger, is not its
    answer; capture.json is left as the capture wrote it."""
    run_dir, folder, record = _copy(runs["skip"], tmp_path)
    pids = {process.rank: process.pid for process in record.ranks}
    asked = time.time()
    late = {}
    for row in record.sources:
        if row.source == "gpu-dump":
            assert row.rank is not None and row.path is not None
            dump = run_dir / row.path
            late[row.rank] = dump.with_name(f"core.gpu-node.example.{pids[row.rank]}.{int(asked)}.nvcudmp")
            dump.rename(late[row.rank])
            stamp = asked - 3600 if row.rank == 3 else asked + 30
            os.utime(late[row.rank], (stamp, stamp))
            row.status, row.path, row.size_bytes = "timeout", None, None
            row.note = "triggered, not collected within 120 s"
            row.taken_at = datetime.fromtimestamp(asked, timezone.utc).isoformat()
    record.gpu_dumps = []
    _rewrite(folder, record)
    written = (folder / CAPTURE).read_bytes()

    reading = crashlab.read_hang(run_dir)
    before = {rank.rank: rank.gpu for rank in readings["skip"].ranks}
    after = {rank.rank: rank.gpu for rank in reading.ranks}
    assert sorted(late) == [0, 1, 2, 3] and after[3] is None
    for rank in (0, 1, 2):
        assert after[rank] is not None and before[rank] is not None
        assert after[rank].dump == late[rank].relative_to(run_dir).as_posix()
        assert (after[rank].kernels, after[rank].waits) == (before[rank].kernels, before[rank].waits)
    rows = {(s.source, s.status): s for s in reading.sources}
    assert rows["gpu-dump", "ok"].ranks == [0, 1, 2]
    assert rows["gpu-dump", "ok"].note.startswith("collected after the capture stopped waiting")
    assert rows["gpu-dump", "timeout"].ranks == [3]
    assert reading.capture.gpu_dumps == 3
    assert (folder / CAPTURE).read_bytes() == written


def test_a_rank_without_a_flight_recorder_dump_is_placed_by_its_stack(runs, tmp_path):
    """Rank 2's Flight Recorder dumps are gone (its pipe refused), its py-spy samples are there:
    Flight Recorder cannot place it (incomplete), and its unchanged stack says it stands outside
    any collective, at the workload's sleep in recv_requests."""
    run_dir, folder, record = _copy(runs["skip"], tmp_path)
    record.sources = [row.model_copy(update={"status": "refused", "path": None,
                                             "note": "the debug pipe refused the dump"})
                      if (row.rank, row.source) == (LAGGING, "flight-recorder") else row
                      for row in record.sources]
    _rewrite(folder, record)
    verdict = crashlab.read_hang(run_dir).verdicts[0]
    sleep_line = _line_of(r"time\.sleep")
    assert (verdict.kind, verdict.ranks) == ("incomplete", [LAGGING])
    assert f"rank {LAGGING} cannot be placed: no Flight Recorder dump that reaches it" in verdict.line
    assert verdict.line.endswith(f"; rank {LAGGING} is not in any collective: it stands in "
                                 f"workload.py:{sleep_line} recv_requests, "
                                 "unchanged over 3 samples (its Python stack)")


def test_ras_that_reports_healthy_communicators_is_said_to_disagree(runs, tmp_path):
    for reply, expected in (("healthy.txt", "sources-disagree"), ("mismatch.txt", None)):
        run_dir, folder, record = _copy(runs["skip"], tmp_path / reply)
        target = folder / "rank-0" / "sample-2" / "nccl-ras.txt"
        shutil.copy(RAS / reply, target)
        record.sources.append(SourceRecord(source="nccl-ras", rank=0, sample=2,
                                           taken_at=record.sources[-1].taken_at, status="ok",
                                           path="rank-0/sample-2/nccl-ras.txt"))
        _rewrite(folder, record)
        reading = crashlab.read_hang(run_dir)
        kinds = [v.kind for v in reading.verdicts]
        if expected:
            assert kinds == ["never-entered", expected]
            assert "NCCL RAS reports every communicator RUNNING" in reading.verdicts[1].line
        else:
            assert kinds == ["never-entered"]
            assert any("MISMATCH #0-0 (27a079b828ff1a75)" in e and "Rank 2 has launched up to "
                       "operation 5" in e for e in reading.verdicts[0].evidence)


def test_a_busy_gpu_with_no_collective_completing_is_spinning(runs, tmp_path):
    run_dir, folder, record = _copy(runs["skip"], tmp_path)
    pid = next(r.pid for r in record.ranks if r.rank == 0)
    for sample in range(3):
        path = f"sample-{sample}/nvml.json"
        (folder / path).parent.mkdir(exist_ok=True)
        (folder / path).write_text(NvmlSample.model_validate({
            "taken_at": record.started_at, "gpus": [
                {"index": 0, "utilization_gpu": 100, "processes": [{"pid": pid}]},
                {"index": 1, "utilization_gpu": 0, "processes": [{"pid": pid + 1}]}]}).model_dump_json())
    record.sources = [row.model_copy(update={"status": "ok", "path": f"sample-{row.sample}/nvml.json"})
                      if row.source == "nvml" else row for row in record.sources]
    _rewrite(folder, record)
    reading = crashlab.read_hang(run_dir)
    by_rank = {r.rank: r for r in reading.ranks}
    assert by_rank[0].state == "spinning"
    assert by_rank[0].gpu.gpus == [0] and by_rank[0].gpu.utilization_by_sample == [100] * 3
    assert by_rank[1].state == "stuck"
    assert not reading.warnings


# Without Flight Recorder: the same real captures with every Flight Recorder row made missing and
# its files removed, as a deployment that never enabled it (or a gloo group, whose dump pipe
# torch 2.14 does not have) leaves them. Only the real py-spy stacks remain.

def _without_flight_recorder(run_dir: Path, tmp_path: Path) -> tuple[Path, Path, Capture]:
    copied, folder, record = _copy(run_dir, tmp_path)
    record.sources = [row.model_copy(update={"status": "missing", "path": None, "size_bytes": None,
                                             "note": "no debug pipe: the process group is gloo"})
                      if row.source == "flight-recorder" else row for row in record.sources]
    _rewrite(folder, record)
    for dumped in folder.glob("rank-*/sample-*/flight-recorder.*"):
        dumped.unlink()
    return copied, folder, record


def _waiting() -> str:
    return ", ".join(str(rank) for rank in range(WORLD) if rank != LAGGING)


def test_without_flight_recorder_the_stacks_name_the_rank_outside_the_all_reduce(runs, tmp_path):
    run_dir, _, _ = _without_flight_recorder(runs["skip"], tmp_path)
    reading = crashlab.read_hang(run_dir)
    [verdict] = reading.verdicts
    assert (verdict.kind, verdict.ranks, verdict.op, verdict.seq, verdict.pg) == \
        ("stack-outside", [LAGGING], "all_reduce", None, None)
    assert verdict.line.startswith(f"ranks {_waiting()} wait in all_reduce (their Python stacks, "
                                   "unchanged over 3 samples, their warps in a collective wait in "
                                   "cross_device_reduce_1stage); ")
    assert (f"; rank {LAGGING} is not in any collective: it stands in workload.py:"
            f"{_line_of(r'time.sleep')} recv_requests, unchanged over 3 samples (") in verdict.line
    assert verdict.line.endswith("(from Python stacks only: no Flight Recorder, so the process "
                                 "group and the collective's number are unknown)")
    assert "never entered" not in verdict.line and "#" not in verdict.line
    said = "\n".join(verdict.evidence)
    # this capture ran py-spy with --native: the waiting ranks' c10d frames are named
    assert f"py-spy --native: ranks {_waiting()}: " in said and "c10d::" in said
    assert f"py-spy: rank {LAGGING}: main thread at workload.py:" in said
    assert "Flight Recorder: no rank has a dump (4 ranks; rank 0: flight-recorder: missing in " \
        "samples 0-2: no debug pipe: the process group is gloo)" in said
    assert reading.found and not reading.groups
    by_rank = {rank.rank: rank for rank in reading.ranks}
    assert [by_rank[r].call for r in range(WORLD)] == \
        ["all_reduce" if r != LAGGING else None for r in range(WORLD)]
    done = run_cli("inspect", run_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[0] == \
        "Hang across 4 ranks: stack-outside in all_reduce (Python stacks only)"


def test_without_flight_recorder_the_same_hang_after_a_restart_is_one_signature(runs, readings, tmp_path):
    first = crashlab.read_hang(_without_flight_recorder(runs["skip"], tmp_path / "a")[0])
    again = crashlab.read_hang(_without_flight_recorder(runs["restart"], tmp_path / "b")[0])
    assert first.signature.kind == "collective-hang"
    assert first.signature.parts == ["not in it by its stack", "all_reduce", "recv_requests workload.py"]
    assert again.signature.hash == first.signature.hash
    assert {r.pid for r in again.ranks}.isdisjoint({r.pid for r in first.ranks})
    # the same hang read with Flight Recorder names its process group: another signature
    assert readings["skip"].signature.hash != first.signature.hash


def test_without_flight_recorder_a_size_mismatch_reads_as_every_rank_in_the_all_reduce(runs, tmp_path):
    reading = crashlab.read_hang(_without_flight_recorder(runs["size"], tmp_path)[0])
    [verdict] = reading.verdicts
    # the workload sends every rank into all_reduce, rank 2 with 8 floats: the stacks cannot tell
    assert (verdict.kind, verdict.ranks, verdict.op) == ("stack-all-waiting", list(range(WORLD)), "all_reduce")
    assert verdict.line.startswith(f"every rank ({', '.join(map(str, range(WORLD)))}) waits in "
                                   "all_reduce (their Python stacks, unchanged over 3 samples")
    assert "a size mismatch looks the same" in verdict.line and "#" not in verdict.line


def test_without_flight_recorder_a_rank_whose_py_spy_was_refused_cannot_be_placed(runs, tmp_path):
    refusal = "Permission Denied (os error 13)"
    for refused in (3, LAGGING):
        run_dir, folder, record = _without_flight_recorder(runs["skip"], tmp_path / str(refused))
        record.sources = [row.model_copy(update={"status": "refused", "path": None,
                                                 "size_bytes": None, "note": refusal})
                          if (row.rank, row.source) == (refused, "py-spy") else row
                          for row in record.sources]
        _rewrite(folder, record)
        for spied in folder.glob(f"rank-{refused}/sample-*/py-spy.txt"):
            spied.unlink()
        reading = crashlab.read_hang(run_dir)
        [verdict] = reading.verdicts
        unplaced = f"rank {refused} cannot be placed: py-spy: refused in samples 0-2: {refusal}"
        assert unplaced in verdict.line
        if refused == LAGGING:  # nothing says where rank 2 stands: no verdict places the hang
            assert (verdict.kind, verdict.ranks) == ("incomplete", [LAGGING])
            assert verdict.line.startswith(f"ranks {_waiting()} wait in all_reduce")
            assert not reading.found and reading.signature is None
            assert run_cli("inspect", run_dir).returncode == 1
        else:
            assert (verdict.kind, verdict.ranks) == ("stack-outside", [LAGGING])
            assert verdict.line.startswith("ranks 0, 1 wait in all_reduce")


def test_flight_recorder_and_a_stack_that_contradict_it_are_said_to_disagree(runs, readings, tmp_path):
    """Rank 2's real stacks replaced by rank 0's (in all_reduce) while its Flight Recorder dumps
    say it completed #5 and enqueued nothing since."""
    run_dir, folder, _ = _copy(runs["skip"], tmp_path)
    for spied in folder.glob("rank-0/sample-*/py-spy.txt"):
        shutil.copy(spied, folder / f"rank-{LAGGING}" / spied.parent.name / spied.name)
    reading = crashlab.read_hang(run_dir)
    first, disagree = reading.verdicts
    before = readings["skip"].verdicts[0]
    assert (first.kind, first.ranks, first.seq) == (before.kind, before.ranks, before.seq)
    assert disagree.kind == "sources-disagree" and disagree.ranks == [LAGGING]
    assert disagree.line == (f"Flight Recorder says rank {LAGGING} never entered all_reduce "
                             f"#{PLANTED + 1} and holds no collective of its own not completed, "
                             "while its Python stack stands in all_reduce, unchanged over 3 "
                             "samples: the sources disagree")
