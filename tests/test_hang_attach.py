"""--attach: real cuda-gdb attached to a live process, and its tables read into motion evidence.

The printouts the parser reads are real: NVIDIA's cuda-gdb 12.4 opening real H200 dumps with
``target cudacore`` runs the very commands of a live attach (crashlab's attach.COMMANDS: the
kernels and warps tables, then for each warp slot its lanes and one lane's registers) and prints
what a live attach prints. They stand in for a live GPU, which this machine lacks; the live
attach here is to a real CPU process, and the gpu-marked test runs the same commands live.
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
from crashlab.hangs.model import GpuWait, RankGpu
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


def test_each_warps_lanes_and_one_lanes_registers_are_read_from_real_cuda_gdb(real_cuda_gdb):
    """The warp-slot commands of a real dump: every warp of the SM in focus (2 here) has its 32
    lanes, at its PC, and its first lane's general registers (R0-R254; R255, RZ, is
    "<unavailable>")."""
    snapshot = reading.parse(_tables_of_dump(real_cuda_gdb, "hang.explain"))
    keys = [(w.device, w.sm, w.warp) for w in snapshot.warps]
    assert sorted(snapshot.registers) == sorted(snapshot.lanes) == keys
    for warp in snapshot.warps:
        lanes = snapshot.lanes[(warp.device, warp.sm, warp.warp)]
        assert [lane.lane for lane in lanes] == list(range(32))
        assert {(lane.state, lane.pc, lane.exception) for lane in lanes} == \
            {("active", warp.pc, "None")}
        read = snapshot.registers[(warp.device, warp.sm, warp.warp)]
        assert read.lane == 0 and all(f"R{n}" in read.values for n in range(255))
        assert "R255" not in read.values


def _dump_waits(case: str) -> list[GpuWait]:
    """The real dump's wait classes, as a rank's reading keeps them."""
    from crashlab.api import inspect
    from crashlab.hangs.rank import _dump_view

    [dump] = (H200 / case).glob("*.nvcudmp")
    gpu = RankGpu()
    _dump_view(gpu, inspect(dump))
    return gpu.waits


def _with_register(snapshot: reading.Snapshot, warp: int, name: str,
                   value: int) -> reading.Snapshot:
    """SNAPSHOT with one register of WARP's lane set to VALUE (the next snapshot, changed)."""
    registers = {key: reading.LaneRegisters(read.lane, dict(read.values))
                 for key, read in snapshot.registers.items()}
    [key] = [key for key in registers if key[2] == warp]
    registers[key].values[name] = value
    return replace(snapshot, registers=registers)


def test_a_polled_value_that_never_changes_reads_spinning(real_cuda_gdb):
    """The real dump's reader says wait_for_flag's loop polls its flag through LDG into R0; two
    snapshots of real registers hold R0 = 0 in both warps: spinning, the address and the value
    said. Memory is not read: the real H200 dumps hold no global memory (cuda-gdb: "Cannot
    access memory at address"), the loop's own register holds what it read."""
    waits = _dump_waits("hang.explain")
    [polling] = [w for w in waits if w.kind == "polling-memory"]
    assert polling.value_registers == ["R0"] and polling.address
    snapshot = reading.parse(_tables_of_dump(real_cuda_gdb, "hang.explain"))
    read = reading.motion([snapshot, snapshot, snapshot], waits)
    assert read.motion == "spinning"
    assert read.evidence == (f"wait_for_flag polls {polling.address} whose value (R0) stayed 0x0 "
                             "over 3 snapshots (2 warps read), at the same PCs")


def test_a_polled_value_that_changed_reads_progressing(real_cuda_gdb):
    """The same real snapshots, the flag's value in warp 1's R0 become 1 in the second."""
    waits = _dump_waits("hang.explain")
    snapshot = reading.parse(_tables_of_dump(real_cuda_gdb, "hang.explain"))
    read = reading.motion([snapshot, _with_register(snapshot, 1, "R0", 1)], waits)
    assert read.motion == "progressing"
    assert "the value it read (R0) changed between snapshots: 0x0, 0x1" in read.evidence


def test_the_same_pcs_with_a_changed_register_read_progressing_and_same_ones_stuck(real_cuda_gdb):
    """A kernel the dump does not read as polling (a barrier): same PCs and registers is stuck,
    a register that changed between snapshots is not."""
    waits = _dump_waits("barrier_exit.explain")
    snapshot = reading.parse(_tables_of_dump(real_cuda_gdb, "barrier_exit.explain"))
    still = reading.motion([snapshot, snapshot], waits)
    assert still.motion == "stuck" and "at the same PCs and registers (4 lanes read)" in \
        still.evidence
    ran = reading.motion([snapshot, _with_register(snapshot, 2, "R5", 0x1234)], waits)
    assert ran.motion == "progressing"
    assert "registers changed between snapshots (device 0 SM 126 warp 2 lane 0: R5" in ran.evidence


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
def test_attach_snapshots_of_a_live_spinning_kernel_read_its_registers_and_spinning(tmp_path):
    """hang.cu's kernel spins on a flag: three attaches (libcuda's symbols only, the capture's
    command line) each see it, its warps' lanes and one lane's registers, and the process lives
    on after each detach; then its GPU dump through the driver's pipe names the loop's polled
    address and value register, and the snapshots read as spinning on it. Never yet run on a
    GPU."""
    from crashlab.api import inspect
    from crashlab.gdb.driver import find_cuda_gdb
    from crashlab.hangs.rank import _dump_view
    from crashlab.supervise.dumpnow import _trigger, live_pipes

    cuda_gdb, why = find_cuda_gdb()
    assert cuda_gdb, why
    exe = tmp_path / "hang"
    subprocess.run(["nvcc", "-arch=sm_90", "-lineinfo", "-o", str(exe),
                    str(ROOT / "fixtures" / "kernels" / "hang.cu")],
                   check=True, cwd=ROOT / "fixtures" / "kernels")
    environ = {**os.environ, "CUDA_ENABLE_USER_TRIGGERED_COREDUMP": "1",
               "CUDA_COREDUMP_PIPE": str(tmp_path / "corepipe.%p"),
               "CUDA_COREDUMP_FILE": str(tmp_path / "core.%p.nvcudmp")}
    child = subprocess.Popen([str(exe)], env=environ)
    try:
        time.sleep(3.0)  # the kernel is launched and spinning
        rows = [attach.snapshot(cuda_gdb, why, child.pid, 0,
                                Slot(tmp_path, k, "2026-01-01T00:00:00Z",
                                     Budget(1 << 20, 1 << 24), 120.0), os.environ)
                for k in range(3)]
        assert [row.status for row in rows] == ["ok"] * 3, rows
        snapshots = [reading.parse((tmp_path / str(row.path)).read_text()) for row in rows]
        assert all("wait_for_flag" in s.kernels[0].invocation and s.warps for s in snapshots)
        for snapshot in snapshots:
            assert snapshot.registers and set(snapshot.registers) <= set(snapshot.lanes)
            assert all(read.values.get("R0") is not None for read in snapshot.registers.values())
        assert child.poll() is None
        assert _trigger(live_pipes(str(tmp_path / "corepipe.*"))), "no pipe to trigger the dump"
        child.wait(timeout=120)
        [dump] = tmp_path.glob("core.*.nvcudmp")
        gpu = RankGpu()
        _dump_view(gpu, inspect(dump))
        read = reading.motion(snapshots, gpu.waits)
        assert read.motion == "spinning", read
        assert "wait_for_flag polls 0x" in read.evidence and "(R0) stayed 0x0" in read.evidence
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        child.wait()


def _snapshot_rows(folder, text: str, samples: int) -> list:
    """Rank 0's attach rows of SAMPLES samples, each file holding TEXT, written under FOLDER."""
    from crashlab.hangs.layout import SourceRecord, source_path

    rows = []
    for sample in range(samples):
        path = source_path(0, sample, attach.NAME)
        (folder / path).parent.mkdir(parents=True)
        (folder / path).write_text(text)
        rows.append(SourceRecord(source=attach.NAME, rank=0, sample=sample, status="ok",
                                 taken_at="2026-01-01T00:00:00Z", path=path))
    return rows


def test_a_captures_attach_snapshots_are_read_into_the_ranks_evidence(real_cuda_gdb, tmp_path):
    """capture.json rows naming two real cuda-gdb printouts of one rank: the rank's reading says
    its warps stood still, kernel and PC; a refused attach of another rank is its note."""
    from crashlab.hangs.evidence import gather
    from crashlab.hangs.layout import Capture, RankProcess, SourceRecord
    from crashlab.hangs.rank import read_rank

    text = _tables_of_dump(real_cuda_gdb, "hang.explain")
    rows = _snapshot_rows(tmp_path, text, 2)
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


def test_a_ranks_snapshots_and_its_gpu_dump_read_as_spinning_on_the_polled_value(real_cuda_gdb,
                                                                                 tmp_path):
    """capture.json naming three real cuda-gdb printouts of one rank and its real GPU dump: the
    rank's evidence says its kernel spins on the address the dump names, the value unchanged."""
    import shutil

    from crashlab.api import inspect
    from crashlab.hangs.evidence import gather
    from crashlab.hangs.layout import Capture, RankProcess, SourceRecord
    from crashlab.hangs.rank import read_rank

    [dump] = (H200 / "hang.explain").glob("*.nvcudmp")
    shutil.copy(dump, tmp_path / "rank0.nvcudmp")
    text = _tables_of_dump(real_cuda_gdb, "hang.explain")
    rows = [SourceRecord(source="gpu-dump", rank=0, sample=3, status="ok",
                         taken_at="2026-01-01T00:00:01Z", path="rank0.nvcudmp")]
    rows += _snapshot_rows(tmp_path, text, 3)
    capture = Capture(started_at="2026-01-01T00:00:00Z", trigger="dump-now", samples=3,
                      interval_s=1, ranks=[RankProcess(rank=0, pid=10)], sources=rows)
    found = gather(capture, tmp_path, tmp_path, inspect)
    reading_of_rank = read_rank(found.ranks[0], {})
    [said] = [line for line in reading_of_rank.state_evidence if "cuda-gdb" in line]
    assert reading_of_rank.gpu is not None
    [polling] = [w for w in reading_of_rank.gpu.waits if w.kind == "polling-memory"]
    assert said.startswith(f"cuda-gdb attached (3 snapshots): spinning, wait_for_flag polls "
                           f"{polling.address} whose value (R0) stayed 0x0 over 3 snapshots")
