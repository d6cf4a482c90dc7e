"""A real hang, captured the way crashlab/hangs/layout.py lays a capture out.

``start`` runs workload.py's ranks (4 unless told) (real torch.distributed, gloo, on CPU) with the SGLang
environment's Python; ``capture`` takes k host samples of every live rank: ``py-spy dump
--native --pid`` (the environment's own py-spy) and its Flight Recorder dump through PyTorch's
debug pipe (the rank's WorkerServer: torch's ``fr_trace_json`` handler, or the workload's
``fr_trace_pickle``, which answers ``_dump_fr_trace()``). Both are the real tools on the real
processes; the capture record around them is written here, as the capture side will.

What is not real: the GPU side. There is no GPU here, so NVML is recorded as missing and each
rank's GPU dump is a SYNTHETIC builder dump (tests/coredump_builder.py, tests/scenarios.py):
ranks waiting in the collective get cross_device_reduce's peer wait (custom_allreduce.cu), rank 2
the barrier and flag-polling kernels of barrier_exit.cu and hang.cu.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from crashlab.hangs.layout import CAPTURE, CAPTURES, Capture, RankProcess, SourceRecord, source_path

WORKLOAD = Path(__file__).with_name("workload.py")
WORLD = 4
#: The rank the workload plants the hang in.
LAGGING = 2
#: The step the workload plants the hang at by default; its collective is the next number.
PLANTED = 5


@dataclass
class GlooRun:
    mode: str
    folder: Path
    processes: dict[int, subprocess.Popen]
    planted: int = PLANTED

    @property
    def planted_seq(self) -> int:
        """The number of the collective the planted step enqueues."""
        return self.planted + 1

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
        for process in self.processes.values():
            process.wait(timeout=30)

    def socket(self, rank: int) -> Path:
        return self.folder / f"rank-{rank}.sock"


def start(python: Path, mode: str, folder: Path, planted: int = PLANTED, world: int = WORLD) -> GlooRun:
    """The 4 ranks, each running a copy of workload.py from ``folder`` by its relative name (the
    stacks then name ``workload.py``, not this checkout's path)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / WORKLOAD.name).write_bytes(WORKLOAD.read_bytes())
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "2000", "PYTHONUNBUFFERED": "1",
           "GLOO_HANG_PLANTED": str(planted)}
    processes = {}
    for rank in range(world):
        log = open(folder / f"rank-{rank}.log", "wb")  # noqa: SIM115 (the child holds it)
        processes[rank] = subprocess.Popen(
            [str(python), WORKLOAD.name, str(rank), str(world), mode, "."],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder)
        log.close()
    return GlooRun(mode, folder, processes, planted)


def wait_ready(run: GlooRun, timeout: float = 240) -> None:
    """Until every rank reached the planted step and the waiting ranks sit in their collective
    (their dump shows it enqueued), or a rank died (AssertionError with its log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rank, process in run.processes.items():
            if process.poll() is not None:
                log = (run.folder / f"rank-{rank}.log").read_text(errors="replace")[-2000:]
                raise AssertionError(f"rank {rank} ended ({process.returncode}): {log}")
        if all((run.folder / f"rank-{rank}.ready").exists() for rank in run.processes) and \
                all(_enqueued(run, rank) >= run.planted_seq
                    for rank in run.processes if rank != LAGGING):
            return
        time.sleep(0.3)
    raise AssertionError(f"the {run.mode} ranks did not reach the planted step in {timeout} s")


def _enqueued(run: GlooRun, rank: int) -> int:
    try:
        dump = json.loads(fetch(run.socket(rank), "fr_trace_json"))
    except (OSError, ValueError, http.client.HTTPException):
        return -1
    return max((e["collective_seq_id"] for e in dump.get("entries", [])), default=-1)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def fetch(path: Path, handler: str, timeout: float = 30) -> bytes:
    """A WorkerServer handler's answer (it serves POST /handler/NAME)."""
    connection = _UnixConnection(path, timeout)
    try:
        connection.request("POST", f"/handler/{handler}", body=b"")
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    if response.status != 200:
        raise OSError(f"{handler}: HTTP {response.status}: {body[:200]!r}")
    return body


def py_spy(tool: Path, pid: int, native: bool = True) -> subprocess.CompletedProcess:
    """``py-spy dump [--native] --pid PID``; --native costs about a CPU second a process here
    (libtorch's symbols), so the tests ask it of one capture only."""
    return subprocess.run([str(tool), "dump", *(["--native"] if native else []), "--pid", str(pid)],
                          capture_output=True, text=True, timeout=60)


def ptrace_refusal(tool: Path, pid: int) -> str | None:
    """Why py-spy cannot read a process here (ptrace not allowed), or None where it can."""
    done = py_spy(tool, pid)
    if done.returncode == 0 and "Thread" in done.stdout:
        return None
    return (done.stderr or done.stdout).strip().splitlines()[-1] if (done.stderr or done.stdout) \
        else f"py-spy exited {done.returncode}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def capture(run: GlooRun, run_dir: Path, *, tool: Path, samples: int = 3, interval: float = 0.3,
            fr_format: str = "pickle", gpu_dumps: dict[int, Path] | None = None,
            native: bool = True, stamp: str = "20261206T080000Z") -> Path:
    """Writes ``run_dir/captures/STAMP``: ``samples`` host samples of every rank, then each
    rank's GPU dump (already written, under the run directory) named in the record."""
    folder = run_dir / CAPTURES / stamp
    folder.mkdir(parents=True)
    started = _now()
    rows: list[SourceRecord] = []
    for sample in range(samples):
        if sample:
            time.sleep(interval)
        with ThreadPoolExecutor(len(run.processes)) as pool:
            spied = dict(zip(run.processes, pool.map(
                lambda rank: (_now(), py_spy(tool, run.processes[rank].pid, native)), run.processes),
                strict=True))
        for rank in run.processes:
            rows.append(_flight(run, folder, rank, sample, fr_format))
            rows.append(_write(folder, rank, sample, "py-spy", "", *spied[rank]))
        rows.append(SourceRecord(source="nvml", sample=sample, taken_at=_now(), status="missing",
                                 note="no NVML: this machine has no GPU"))
    for rank, dump in (gpu_dumps or {}).items():
        relative = dump.relative_to(run_dir).as_posix()
        rows.append(SourceRecord(source="gpu-dump", rank=rank, sample=samples, taken_at=_now(),
                                 status="ok", path=relative, size_bytes=dump.stat().st_size))
    record = Capture(started_at=started, ended_at=_now(), trigger="dump-now", samples=samples,
                     interval_s=interval,
                     ranks=[RankProcess(rank=r, pid=p.pid, role="scheduler")
                            for r, p in run.processes.items()],
                     sources=rows,
                     gpu_dumps=[d.relative_to(run_dir).as_posix() for d in (gpu_dumps or {}).values()])
    (folder / CAPTURE).write_text(record.model_dump_json(indent=2))
    return folder


def _flight(run: GlooRun, folder: Path, rank: int, sample: int, fr_format: str) -> SourceRecord:
    handler, suffix = ("fr_trace_pickle", ".pkl") if fr_format == "pickle" else ("fr_trace_json", ".json")
    taken = _now()
    try:
        data = fetch(run.socket(rank), handler)
    except (OSError, http.client.HTTPException) as problem:
        return SourceRecord(source="flight-recorder", rank=rank, sample=sample, taken_at=taken,
                            status="failed", note=str(problem)[:200])
    path = source_path(rank, sample, "flight-recorder", suffix)
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    (folder / path).write_bytes(data)
    return SourceRecord(source="flight-recorder", rank=rank, sample=sample, taken_at=taken,
                        status="ok", path=path, size_bytes=len(data))


def _write(folder: Path, rank: int, sample: int, source: str, suffix: str, taken: str,
           done: subprocess.CompletedProcess) -> SourceRecord:
    if done.returncode != 0:
        return SourceRecord(source=source, rank=rank, sample=sample, taken_at=taken,
                            status="failed", note=(done.stderr or done.stdout).strip()[-200:])
    path = source_path(rank, sample, source, suffix)
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    (folder / path).write_text(done.stdout)
    return SourceRecord(source=source, rank=rank, sample=sample, taken_at=taken, status="ok",
                        path=path, size_bytes=len(done.stdout.encode()))


def gpu_dumps(run_dir: Path, ranks: list[int]) -> dict[int, Path]:
    """Each rank's GPU dump, SYNTHETIC (tests/coredump_builder.py), where serve collects dumps:
    the lagging rank's warps at a barrier and polling a flag (barrier_exit.cu, hang.cu), the
    others' in cross_device_reduce's wait on a peer (custom_allreduce.cu)."""
    from tests import scenarios
    from tests.coredump_builder import write

    cores = run_dir / "incarnation-0" / "cores"
    cores.mkdir(parents=True, exist_ok=True)
    made = {}
    for rank in ranks:
        scenario = scenarios.barrier_after_exit() if rank == LAGGING else scenarios.peer_wait()
        made[rank] = write(scenario.spec, cores / f"core_rank{rank}.nvcudmp").path
    return made


def python_of(env: Path) -> Path:
    return env / "bin" / "python"


def py_spy_of(env: Path) -> Path:
    return env / "bin" / "py-spy"


if __name__ == "__main__":  # by hand: python -m tests.gloo_hang.capture ENV MODE RUN_DIR
    environment, mode, target = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    hung = start(python_of(environment), mode, target / "processes")
    try:
        wait_ready(hung)
        print(capture(hung, target, tool=py_spy_of(environment),
                      gpu_dumps=gpu_dumps(target, list(hung.processes))))
    finally:
        hung.stop()
