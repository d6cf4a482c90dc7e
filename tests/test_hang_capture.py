"""Hang captures on real parts: a real torch.distributed job of 4 CPU ranks (gloo, the SGLang
environment's torch 2.14.1) under the real ``crashlab serve``, rank 2 planted to never enter an
all_reduce so that ranks 0, 1 and 3 wait in it (tests/hang_job.py, whose stand-ins are labelled
there: the Flight Recorder pipe gloo lacks, /health, a constructed RAS report).

One run serves the module: serve's own capture (``--hang-after``) runs with no py-spy anywhere
it looks (the ranks run an interpreter whose folder has none: a venv over the environment's
packages), then ``crashlab dump-now`` runs with the environment's real py-spy on PATH and the
stand-in nvidia-smi of tests/standin_tools beside it, and ``--attach`` with NVIDIA's real cuda-gdb
where .ci/get-cuda-gdb put it. No GPU here: the GPU dumps are asked and
refused for what this run is (no --user-dumps), the gpu-marked tests take the real ones.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from crashlab.hangs.layout import CAPTURE, Capture, NvmlSample, capture_dirs, source_path
from crashlab.supervise.hangcapture import attach
from crashlab.supervise.hangcapture.run import GPU_DUMP_ENDS_PROCESS
from tests.conftest import REAL_CUDA_GDB, ROOT, free_port, run_cli
from tests.serve_harness import Serve, survivors

WORLD = 4
HANG_RANK = 2
SAMPLES = 2
STANDIN_TOOLS = ROOT / "tests" / "standin_tools"


@dataclass
class HungRun:
    serve: Serve
    manifest: dict
    hang_after: Capture
    hang_after_dir: Path
    dump_now: Capture
    dump_now_dir: Path
    dump_now_said: str
    bounded: Capture
    bounded_dir: Path
    refused: subprocess.CompletedProcess
    py_spy_beside_crashlab: bool
    #: the crash index serve recorded into (the session's)
    index: str
    #: ``info sharedlibrary`` of rank 0 in an attach on the capture's command line ("" without
    #: the real cuda-gdb)
    attach_libraries: str


def _interpreter_without_py_spy(env_root: Path, where: Path) -> Path:
    """A venv whose folder holds no py-spy, over the SGLang environment's packages (a .pth)."""
    subprocess.run([str(env_root / "bin" / "python"), "-m", "venv", "--without-pip", str(where)],
                   check=True)
    site = next((where / "lib").glob("python3*/site-packages"))
    packages = next((env_root / "lib").glob("python3*/site-packages"))
    (site / "sglang_environment.pth").write_text(f"{packages}\n")
    return where / "bin" / "python"


def _capture(folder: Path) -> Capture:
    return Capture.model_validate_json((folder / CAPTURE).read_text())


@pytest.fixture(scope="module")
def hung(sglang_env, tmp_path_factory) -> HungRun:
    tmp = tmp_path_factory.mktemp("hung")
    python = _interpreter_without_py_spy(sglang_env, tmp / "ranks-python")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "TORCH_", "NCCL_"))}
    serve = Serve(tmp, [str(python), str(ROOT / "tests" / "hang_job.py"), "--world", str(WORLD),
                        "--port", str(port), "--master-port", str(free_port()),
                        "--hang-rank", str(HANG_RANK), "--ras"],
                  "--health-url", f"http://127.0.0.1:{port}/health", "--health-interval", "0.5",
                  # a loaded machine stalls the job's loop for seconds before the planted hang:
                  # /health (hang_job.LIVELY) and these bear such a stall, not the hang
                  "--health-timeout", "5", "--hang-after", "10", "--hang-samples", str(SAMPLES),
                  "--hang-interval", "1", "--quiet", env=env)
    try:
        manifest = serve.wait_manifest(
            lambda m: any(c["trigger"] == "hang-after" and c["ended_at"] for c in m["captures"]),
            "serve's own capture of the hang", timeout=240)
        [hang_after_dir] = capture_dirs(serve.run_dir)
        rank_pids = ",".join(map(str, _rank_processes(manifest).values()))
        path = os.pathsep.join([str(sglang_env / "bin"), str(STANDIN_TOOLS), os.environ["PATH"]])
        debugger = {"CRASHLAB_CUDA_GDB": str(REAL_CUDA_GDB)} if os.access(REAL_CUDA_GDB, os.X_OK) else {}
        # four cuda-gdb attach at once in each sample, on a loaded machine: 60 s each at most
        said = run_cli("dump-now", serve.run_dir, "--no-gpu-dump", "--attach", "--samples", str(SAMPLES),
                       "--interval", "0.5", "--source-timeout", "60", env={**os.environ, "PATH": path, **debugger,
                                                 "CRASHLAB_STANDIN_NVIDIA_SMI_APPS": rank_pids},
                       timeout=180)
        assert said.returncode == 0, said.stderr
        libraries = _attach_libraries(_rank_processes(manifest)[0]) if debugger else ""
        bounded = _bounded_capture(serve.run_dir, path)
        refused = run_cli("dump-now", serve.run_dir, "--timeout", "1")
        manifest = serve.wait_manifest(lambda m: len(m["captures"]) == 3 and all(
            c["ended_at"] for c in m["captures"]), "the captures in the manifest")
    finally:
        serve.signal(signal.SIGTERM)
        serve.finish()
    assert not survivors(serve.manifest())
    dump_now_dir = next(d for d in capture_dirs(serve.run_dir) if d not in (hang_after_dir, bounded))
    return HungRun(serve, serve.manifest(), _capture(hang_after_dir), hang_after_dir,
                   _capture(dump_now_dir), dump_now_dir, said.stderr.decode(), _capture(bounded),
                   bounded, refused, (Path(sys.executable).parent / "py-spy").exists(),
                   env["CRASHLAB_DB"], libraries)


def _attach_libraries(pid: int) -> str:
    """What an attach on the capture's command line says of the process's libraries: whose
    symbols it read."""
    return subprocess.run([*attach.argv(str(REAL_CUDA_GDB), pid), "-ex", "info sharedlibrary"],
                          capture_output=True, text=True, timeout=120).stdout


#: the caps of the bounded capture: a py-spy stack of a rank is 7-26 kB, a pickle about 4 kB
FILE_CAP, CAPTURE_CAP = 300, 2500


def _bounded_capture(run_dir: Path, path: str) -> Path:
    """A capture through the Python API, with caps far below what the sources give."""
    from crashlab.supervise.hangcapture import CaptureOptions, take

    before = os.environ["PATH"]
    os.environ["PATH"] = path
    try:
        result = take(run_dir, "dump-now", CaptureOptions(
            samples=1, gpu_dump=False, max_file_bytes=FILE_CAP, max_capture_bytes=CAPTURE_CAP,
            source_timeout=10), lambda line: None)
    finally:
        os.environ["PATH"] = before
    return result.folder


def _rows(capture: Capture, source: str) -> list:
    return [row for row in capture.sources if row.source == source]


def _rank_processes(manifest: dict) -> dict[int, int]:
    """pid by rank, as the job's launcher started them, in order (RANK in each one's environment)."""
    processes = manifest["incarnations"][0]["processes"]
    launcher = next(p["pid"] for p in processes if p["role"] == "server")
    children = [p for p in processes if p["ppid"] == launcher and "--rank-process" in p["cmdline"]]
    return {rank: p["pid"] for rank, p in enumerate(sorted(children, key=lambda p: p["started_at"]))}


def test_serve_captures_the_hang_after_health_stops_answering(hung):
    capture = hung.hang_after
    assert capture.trigger == "hang-after" and capture.samples == SAMPLES and capture.ended_at
    launched = sorted(_rank_processes(hung.manifest).values())
    assert sorted(rank.pid for rank in capture.ranks) == launched
    assert [rank.rank for rank in capture.ranks] == list(range(WORLD))
    assert capture.notes[0] == "ranks from the Flight Recorder pipe each process holds"
    for source in ("py-spy", "flight-recorder"):
        assert {(row.rank, row.sample) for row in _rows(capture, source)} == \
            {(rank, sample) for rank in range(WORLD) for sample in range(SAMPLES)}
    assert len(_rows(capture, "nccl-ras")) == len(_rows(capture, "nvml")) == SAMPLES
    assert "hang: /health has not answered" in hung.serve.stderr


def test_a_missing_py_spy_is_a_missing_row_not_a_failed_capture(hung):
    if hung.py_spy_beside_crashlab:
        pytest.skip("py-spy is installed beside crashlab's own Python: it is not missing here")
    rows = _rows(hung.hang_after, "py-spy")
    assert {row.status for row in rows} == {"missing"} and all(row.path is None for row in rows)
    assert all(row.note.startswith("py-spy not found") for row in rows)
    assert {row.status for row in _rows(hung.hang_after, "flight-recorder")} == {"ok"}


def _last_sequence_ids(sglang_env: Path, paths: list[Path]) -> list[int]:
    """The last collective_seq_id of each Flight Recorder pickle, read by torch's own Python."""
    code = ("import pickle,sys\nfor p in sys.argv[1:]:\n"
            "    print(pickle.load(open(p,'rb'))['entries'][-1]['collective_seq_id'])")
    done = subprocess.run([str(sglang_env / "bin" / "python"), "-c", code, *map(str, paths)],
                          capture_output=True, check=True, timeout=60)
    return [int(line) for line in done.stdout.split()]


def test_flight_recorder_dumps_come_through_the_pipe_and_show_the_rank_that_never_entered(
        hung, sglang_env):
    capture, folder = hung.hang_after, hung.hang_after_dir
    last = [row for row in _rows(capture, "flight-recorder") if row.sample == SAMPLES - 1]
    assert all(row.path == source_path(row.rank, row.sample, "flight-recorder", ".pkl")
               for row in last)
    for row in last:
        assert (folder / row.path).stat().st_size == row.size_bytes > 0
    waiting, planted = [], None
    for row, sequence in zip(last, _last_sequence_ids(sglang_env, [folder / r.path for r in last]),
                             strict=True):
        if row.rank == HANG_RANK:
            planted = sequence
        else:
            waiting.append(sequence)
    assert len(set(waiting)) == 1 and planted == waiting[0] - 1


def test_ras_is_set_up_and_queried_once_per_sample(hung):
    environment = hung.manifest["environment"]
    assert (environment["NCCL_RAS_ENABLE"]["value"], environment["NCCL_RAS_ENABLE"]["set_by"]) \
        == ("1", "crashlab")
    assert environment["NCCL_RAS_ADDR"]["value"].startswith("127.0.0.1:")
    rows = _rows(hung.hang_after, "nccl-ras")
    assert [row.status for row in rows] == ["ok"] * SAMPLES
    assert {row.rank for row in rows} == {0}  # the stand-in listens in rank 0's process
    text = (hung.hang_after_dir / rows[0].path).read_text()
    assert "INCOMPLETE" in text and f"The missing rank: {HANG_RANK}" in text


def test_the_flight_recorder_is_set_up_with_torch_2_14s_names(hung):
    environment = hung.manifest["environment"]
    assert (environment["TORCH_FR_BUFFER_SIZE"]["value"],
            environment["TORCH_FR_BUFFER_SIZE"]["set_by"]) == ("2000", "crashlab")
    assert environment["TORCH_FR_DUMP_TEMP_FILE"]["value"].endswith("/flight-recorder/rank-")
    assert environment["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"]["value"].endswith("/pipes/torch-fr-")
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in environment  # 2.14 would warn it is deprecated
    assert not list((hung.serve.incarnation / "pipes").iterdir())  # a run directory copies


def test_dump_now_takes_py_spy_stacks_of_every_rank(hung):
    rows = _rows(hung.dump_now, "py-spy")
    if {row.status for row in rows} == {"refused"}:
        pytest.skip(f"ptrace is refused here: {rows[0].note}")
    assert {row.status for row in rows} == {"ok"}
    for row in rows:
        stack = (hung.dump_now_dir / row.path).read_text()
        assert f"Process {dict((r.rank, r.pid) for r in hung.dump_now.ranks)[row.rank]}:" in stack
        if row.rank == HANG_RANK:
            assert "wait_for_requests (" in stack and "all_reduce (" not in stack
        else:
            assert "all_reduce (" in stack and "c10d::" in stack  # --native: torch's frames
    assert GPU_DUMP_ENDS_PROCESS not in hung.dump_now_said  # --no-gpu-dump: nothing to warn of


def test_dump_now_attaches_cuda_gdb_to_every_rank_reading_libcudas_symbols_only(hung):
    """Real cuda-gdb attached to each real rank (each has imported torch) in each sample says the
    process has no CUDA kernels, and every rank lives on (the later captures see them). It reads
    no symbols of torch's libraries: loading every library's took 8-9 s a rank here, so each
    attach ran out of the default --source-timeout and read nothing (the fixture gives 60 s:
    four attaches at once on a loaded machine)."""
    if not os.access(REAL_CUDA_GDB, os.X_OK):
        pytest.skip(f"real cuda-gdb not installed at {REAL_CUDA_GDB} (run .ci/get-cuda-gdb)")
    rows = _rows(hung.dump_now, attach.NAME)
    assert sorted((row.rank, row.sample) for row in rows) == \
        [(rank, sample) for rank in range(WORLD) for sample in range(SAMPLES)]
    if {row.status for row in rows} == {"refused"}:
        pytest.skip(f"ptrace is refused here: {rows[0].note}")
    assert {(row.status, row.note) for row in rows} == {("missing", attach.NO_CUDA)}, rows
    for row in rows:
        assert "No CUDA kernels." in (hung.dump_now_dir / row.path).read_text()
    torch_libraries = [line.split() for line in hung.attach_libraries.splitlines()
                       if "libtorch_cpu.so" in line]
    assert torch_libraries and all("No" in line and "Yes" not in line for line in torch_libraries), \
        hung.attach_libraries
    assert {row.status for row in _rows(hung.bounded, "py-spy")} <= {"ok", "skipped", "refused"}


def test_dump_now_reads_the_gpus_activity_through_nvidia_smi(hung):
    rows = _rows(hung.dump_now, "nvml")
    assert [row.status for row in rows] == ["ok"] * SAMPLES
    activity = NvmlSample.model_validate_json((hung.dump_now_dir / rows[0].path).read_text())
    assert len(activity.gpus) == 8 and activity.gpus[0].utilization_gpu == 100
    ranks = {process.pid: process.rank for process in hung.dump_now.ranks}
    assert sorted(ranks[p.pid] for gpu in activity.gpus for p in gpu.processes) == list(range(WORLD))
    assert {row.status for row in _rows(hung.hang_after, "nvml")} == {"missing"}


def test_gpu_dumps_are_asked_last_and_refused_for_a_run_without_user_dumps(hung):
    rows = _rows(hung.hang_after, "gpu-dump")
    assert [row.rank for row in rows] == list(range(WORLD))
    assert all(row.status == "missing" and "--user-dumps" in row.note and row.sample == SAMPLES
               for row in rows)
    assert hung.hang_after.gpu_dumps == []
    assert {row.status for row in _rows(hung.dump_now, "gpu-dump")} == {"skipped"}
    assert hung.refused.returncode == 2 and hung.refused.stderr.count(b"\n") == 1
    assert b"--user-dumps" in hung.refused.stderr and b"--no-gpu-dump" in hung.refused.stderr


def test_every_capture_is_linked_in_the_manifest_with_its_counts_and_size(hung):
    links = {link["path"]: link for link in hung.manifest["captures"]}
    assert len(links) == 3
    for capture, folder in ((hung.hang_after, hung.hang_after_dir), (hung.dump_now, hung.dump_now_dir),
                            (hung.bounded, hung.bounded_dir)):
        link = links[str(folder.relative_to(hung.serve.run_dir))]
        assert link["trigger"] == capture.trigger
        statuses: dict[str, int] = {}
        for row in capture.sources:
            statuses[row.status] = statuses.get(row.status, 0) + 1
        assert link["rows"] == statuses and link["ranks"] == WORLD
        assert link["size_bytes"] == sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        for row in capture.sources:
            if row.path and row.source != "gpu-dump":
                assert (folder / row.path).stat().st_size == row.size_bytes


def test_a_capture_keeps_within_its_file_cap_and_its_budget(hung):
    capture, folder = hung.bounded, hung.bounded_dir
    kept = [row for row in capture.sources if row.status == "ok"]
    spent = [row for row in capture.sources if row.status == "skipped" and row.source != "gpu-dump"]
    assert kept and spent
    assert sum(row.size_bytes for row in kept) <= CAPTURE_CAP
    for row in kept:
        assert (folder / row.path).stat().st_size == row.size_bytes <= FILE_CAP
    cut = [row for row in kept if row.truncated_from]
    assert cut and all(row.truncated_from > FILE_CAP == row.size_bytes for row in cut)
    assert all(row.note == "not kept: the capture's size budget is spent" and row.path is None
               for row in spent)


def test_the_capture_serve_and_dump_now_took_reads_as_the_rank_that_never_entered(hung):
    """The two sides joined: what dump-now captured of the real gloo job (real py-spy, PyTorch's
    own Flight Recorder entries) is read by ``crashlab inspect`` from the capture's folder alone:
    rank HANG_RANK never entered the all_reduce the others wait in, and the RAS reply and NVML
    file the capture wrote are read, not refused."""
    done = run_cli("inspect", hung.dump_now_dir, "--json", timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    reading = json.loads(done.stdout)
    [verdict] = [v for v in reading["verdicts"] if v["kind"] == "never-entered"]
    assert verdict["ranks"] == [HANG_RANK] and verdict["op"] == "all_reduce", verdict
    assert f"rank {HANG_RANK} never entered all_reduce" in verdict["line"]
    refused = [note for rank in reading["ranks"] for note in rank["sources"]
               if note["source"] in ("nvml", "nccl-ras") and note["status"] == "refused"]
    assert refused == []
    assert [r["rank"] for r in reading["ranks"]] == list(range(WORLD))


def test_the_dump_now_capture_without_flight_recorder_is_read_from_its_stacks(hung, tmp_path):
    """dump-now's capture with its Flight Recorder rows made missing and its dumps removed, as a
    deployment without Flight Recorder leaves it: crashlab's own real py-spy stacks alone place
    the planted rank outside the all_reduce the others wait in (no process group, no number)."""
    if {row.status for row in _rows(hung.dump_now, "py-spy")} == {"refused"}:
        pytest.skip("ptrace is refused here: no stacks to read")
    folder = tmp_path / hung.dump_now_dir.name
    shutil.copytree(hung.dump_now_dir, folder)
    record = _capture(folder)
    record.sources = [row.model_copy(update={"status": "missing", "path": None, "size_bytes": None,
                                             "note": "TORCH_FR_BUFFER_SIZE not set"})
                      if row.source == "flight-recorder" else row for row in record.sources]
    (folder / CAPTURE).write_text(record.model_dump_json(indent=2))
    for dumped in folder.glob("rank-*/sample-*/flight-recorder.*"):
        dumped.unlink()
    done = run_cli("inspect", folder, "--json", timeout=180)
    assert done.returncode == 0, done.stderr
    [verdict] = json.loads(done.stdout)["verdicts"]
    waiting = [rank for rank in range(WORLD) if rank != HANG_RANK]
    assert (verdict["kind"], verdict["ranks"], verdict["op"], verdict["seq"]) == \
        ("stack-outside", [HANG_RANK], "all_reduce", None)
    assert verdict["line"].startswith(f"ranks {', '.join(map(str, waiting))} wait in all_reduce "
                                      f"(their Python stacks, unchanged over {SAMPLES} samples")
    sleep = next(n for n, text in enumerate((ROOT / "tests" / "hang_job.py").read_text().splitlines(), 1)
                 if "time.sleep(0.2)" in text)
    assert f"; rank {HANG_RANK} is not in any collective: it stands in " in verdict["line"]
    assert f"hang_job.py:{sleep} wait_for_requests, unchanged over {SAMPLES} samples (" in verdict["line"]


def test_serve_records_its_capture_as_a_hang_in_the_crash_index(hung):
    """Right after its own capture, serve records the hang it shows: a crash of kind hang of
    the run, signed by the collective, its reading kept (show gives each rank's timeline)."""
    done = run_cli("list", "--json", "--db", hung.index)
    assert done.returncode == 0, done.stderr.decode()
    [crash] = [c for c in json.loads(done.stdout)["crashes"]
               if c["run_dir"] == str(hung.serve.run_dir)]
    assert (crash["kind"], crash["recorded_by"], crash["source"]) == \
        ("hang", "serve", str(hung.hang_after_dir))
    assert "never-entered at all_reduce" in crash["summary"]
    shown = run_cli("show", str(crash["id"]), "--json", "--db", hung.index)
    assert shown.returncode == 0, shown.stderr.decode()
    reading = json.loads(shown.stdout)["hang"]
    assert reading["signature"]["kind"] == "collective-hang"
    assert [r["rank"] for r in reading["ranks"]] == list(range(WORLD))
    steps = reading["ranks"][HANG_RANK]["groups"][0]["timeline"]
    assert [s["sample"] for s in steps] == list(range(SAMPLES))


def test_report_of_the_run_tells_its_newest_capture_beside_the_runs_records(hung, tmp_path):
    """``crashlab report RUN`` on the serve run that captured the hang: the run's records and its
    newest capture (the bounded one, taken last, whose 300-byte files place nothing: exit 1, as
    for a run with no crash) are one issue; with dump-now's capture given too, the issue holds
    both hangs, each in a folder of its own, and the one placed makes it exit 0."""
    newest = capture_dirs(hung.serve.run_dir)[-1]
    assert newest == hung.bounded_dir
    done = run_cli("report", hung.serve.run_dir, "--out", tmp_path / "run", "--json", timeout=300)
    assert done.returncode == 1, done.stderr.decode()
    issue = json.loads(done.stdout)
    [hang] = issue["hangs"]
    assert (hang["capture"], hang["found"]) == (str(newest), False)
    assert hang["headline"] == f"Hang capture of {WORLD} ranks: no verdict the evidence carries"
    names = {member["name"] for member in issue["members"]}
    assert {"run/manifest.json", "hang/reading.json", "hang/capture/capture.json"} <= names

    done = run_cli("report", hung.serve.run_dir, hung.dump_now_dir, "--out", tmp_path / "both",
                   "--json", timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    issue = json.loads(done.stdout)
    assert [(h["capture"], h["found"]) for h in issue["hangs"]] == \
        [(str(newest), False), (str(hung.dump_now_dir), True)]
    assert [h["reading"] for h in issue["hangs"]] == ["hang-1/reading.json", "hang-2/reading.json"]
    body = next((tmp_path / "both").glob("crashlab-report-*.md")).read_text()
    assert body.count("### Hang across ranks") == 2
    assert f"rank {HANG_RANK} never entered all_reduce" in body
