"""--attach: real cuda-gdb attached to a live process, and its tables read into motion evidence.

The printouts the parser reads are real: NVIDIA's cuda-gdb 12.4 opening real H200 dumps with
``target cudacore`` prints the same ``info cuda kernels`` / ``info cuda warps`` tables that a
live attach prints. The live attach here is to a real CPU process (this machine has no GPU).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from crashlab.hangs import attach as reading
from crashlab.supervise.hangcapture import attach
from crashlab.supervise.hangcapture.bounded import Budget
from crashlab.supervise.hangcapture.slot import Slot
from tests.coredump_builder import ROOT

H200 = ROOT / "fixtures" / "gpu" / "h200"


def _tables_of_dump(cuda_gdb: str, case: str) -> str:
    [dump] = (H200 / case).glob("*.nvcudmp")
    return subprocess.run([cuda_gdb, "-nx", "-batch", "-ex", f"target cudacore {dump}",
                           *[arg for line in attach.COMMANDS for arg in ("-ex", line)]],
                          capture_output=True, text=True, timeout=300, cwd=ROOT).stdout


def test_the_tables_of_a_real_h200_hang_dump_name_its_kernel_and_warps(real_cuda_gdb):
    """Real cuda-gdb output (from a dump, the same printout as a live attach)."""
    snapshot = reading.parse(_tables_of_dump(real_cuda_gdb, "hang.explain"))
    [kernel] = snapshot.kernels
    assert (kernel.invocation, kernel.status, kernel.grid_dim, kernel.block_dim) == \
        ("wait_for_flag()", "Active", "(8,1,1)", "(64,1,1)")
    assert [(w.sm, w.warp, w.block, w.active_mask) for w in snapshot.warps] == \
        [(124, 0, "(4,0,0)", 0xFFFFFFFF), (124, 1, "(4,0,0)", 0xFFFFFFFF)]
    assert len({w.pc for w in snapshot.warps}) == 1 and not snapshot.no_kernels


def test_the_same_pcs_in_every_snapshot_read_stuck_and_name_the_kernels_pcs(real_cuda_gdb):
    """Two snapshots of one real dump: the same warps at the same PCs."""
    snapshot = reading.parse(_tables_of_dump(real_cuda_gdb, "hang.explain"))
    read = reading.motion([snapshot, snapshot])
    assert read.motion == "stuck" and "same 2 warps" in read.evidence
    [(name, pcs)] = read.pcs_by_kernel.items()
    assert name == "wait_for_flag()" and list(pcs.values()) == [2]


def test_warps_that_changed_pc_read_progressing(real_cuda_gdb):
    """Real tables of one dump, the second snapshot's first warp moved on by one instruction."""
    first = reading.parse(_tables_of_dump(real_cuda_gdb, "barrier_exit.explain"))
    moved = reading.Snapshot(first.kernels, [replace(first.warps[0], pc=first.warps[0].pc + 16),
                                             *first.warps[1:]])
    read = reading.motion([first, moved])
    assert read.motion == "progressing" and "1 warp changed PC" in read.evidence
    assert reading.motion([first]).motion == "unknown"


def test_real_cuda_gdb_attached_to_a_live_cpu_process_says_no_cuda(real_cuda_gdb, tmp_path):
    """A real attach (ptrace) to a real process with no CUDA context: the row says so, the file
    keeps cuda-gdb's words, and the process lives on after the detach. Where ptrace is refused
    the row is "refused" and says so instead."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        time.sleep(0.5)
        slot = Slot(tmp_path, 0, "2026-01-01T00:00:00Z", Budget(1 << 20, 1 << 24), 60.0)
        row = attach.snapshot(real_cuda_gdb, "", child.pid, 3, slot, os.environ)
        if row.status == "refused":
            assert "ptrace refused" in (row.note or "")
        else:
            assert (row.status, row.note, row.path) == ("missing", attach.NO_CUDA,
                                                        "rank-3/sample-0/cuda-gdb.txt")
            text = (tmp_path / row.path).read_text()
            assert "No CUDA kernels." in text and reading.parse(text).no_kernels
        assert child.poll() is None, "the attached process did not survive the detach"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()


def test_no_cuda_gdb_is_a_missing_row(tmp_path):
    slot = Slot(tmp_path, 1, "2026-01-01T00:00:00Z", Budget(1 << 20, 1 << 24), 5.0)
    row = attach.snapshot(None, "cuda-gdb not found", os.getpid(), 0, slot, os.environ)
    assert (row.status, row.note, row.sample) == ("missing", "cuda-gdb not found", 1)


@pytest.mark.gpu
def test_attach_snapshots_of_a_live_spinning_kernel_see_its_warps_and_leave_it_running(tmp_path):
    """hang.cu's kernel spins on a flag: three attaches each see it and its warps, and the
    process lives on after each detach. Never yet run on a GPU."""
    from crashlab.gdb.driver import find_cuda_gdb

    cuda_gdb, why = find_cuda_gdb()
    assert cuda_gdb, why
    exe = tmp_path / "hang"
    subprocess.run(["nvcc", "-arch=sm_90", "-lineinfo", "-o", str(exe),
                    str(ROOT / "fixtures" / "kernels" / "hang.cu")],
                   check=True, cwd=ROOT / "fixtures" / "kernels")
    child = subprocess.Popen([str(exe)])
    try:
        time.sleep(3.0)  # the kernel is launched and spinning
        rows = [attach.snapshot(cuda_gdb, why, child.pid, 0,
                                Slot(tmp_path, k, "2026-01-01T00:00:00Z",
                                     Budget(1 << 20, 1 << 24), 120.0), os.environ)
                for k in range(3)]
        assert [row.status for row in rows] == ["ok"] * 3, rows
        snapshots = [reading.parse((tmp_path / str(row.path)).read_text()) for row in rows]
        assert all("wait_for_flag" in s.kernels[0].invocation and s.warps for s in snapshots)
        assert reading.motion(snapshots).motion in {"stuck", "progressing"}
        assert child.poll() is None
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()


def test_a_captures_attach_snapshots_are_read_into_the_ranks_evidence(real_cuda_gdb, tmp_path):
    """capture.json rows naming two real cuda-gdb printouts of one rank: the rank's reading says
    its warps stood still, kernel and PC; a refused attach of another rank is its note."""
    from crashlab.hangs.evidence import gather
    from crashlab.hangs.layout import Capture, RankProcess, SourceRecord, source_path
    from crashlab.hangs.rank import read_rank

    text = _tables_of_dump(real_cuda_gdb, "hang.explain")
    rows = []
    for sample in range(2):
        path = source_path(0, sample, attach.NAME)
        (tmp_path / path).parent.mkdir(parents=True)
        (tmp_path / path).write_text(text)
        rows.append(SourceRecord(source=attach.NAME, rank=0, sample=sample, status="ok",
                                 taken_at="2026-01-01T00:00:00Z", path=path))
    rows.append(SourceRecord(source=attach.NAME, rank=1, sample=0, status="refused",
                             taken_at="2026-01-01T00:00:00Z", note="ptrace refused"))
    capture = Capture(started_at="2026-01-01T00:00:00Z", trigger="dump-now", samples=2,
                      interval_s=1, ranks=[RankProcess(rank=0, pid=10), RankProcess(rank=1, pid=11)],
                      sources=rows)
    found = gather(capture, tmp_path, tmp_path, None)
    [said] = [line for line in read_rank(found.ranks[0], {}).state_evidence if "cuda-gdb" in line]
    assert said.startswith("cuda-gdb attached (2 snapshots): stuck, the same 2 warps")
    assert "wait_for_flag(): 2 at 0x" in said
    assert [(n.source, n.status) for n in found.ranks[1].notes] == [(attach.NAME, "refused")]
    assert not [line for line in read_rank(found.ranks[1], {}).state_evidence if "cuda-gdb" in line]
