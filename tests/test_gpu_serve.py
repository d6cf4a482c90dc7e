"""crashlab serve around a real CUDA program that faults (marker ``gpu``; skipped elsewhere).

The real counterpart of the stand-in driver in tests/standin: nvcc builds the planted
null-argument program, ``crashlab serve`` runs it with its coredump environment, the real
driver writes the dump into cores/incoming/ with its progress lines, crashlab moves it into
cores/ once finished and triages it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import run_cli
from tests.coredump_builder import ROOT, markers
from tests.serve_harness import Serve, wait_for

pytestmark = pytest.mark.gpu


def test_a_real_gpu_fault_under_serve_is_collected_and_triaged(tmp_path):
    exe = tmp_path / "null_argument"
    subprocess.run(["nvcc", "-arch=sm_90", "-lineinfo", "-o", str(exe),
                    str(ROOT / "fixtures" / "kernels" / "null_argument.cu")],
                   check=True, cwd=ROOT / "fixtures" / "kernels")
    done = subprocess.run([sys.executable, "-m", "crashlab", "serve", "--runs-dir", str(tmp_path / "runs"),
                           "--", str(exe)], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    [run_dir] = (tmp_path / "runs").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    incarnation = manifest["incarnations"][0]
    assert incarnation["incident"] == "crash"
    assert any(f["kind"] == "coredump" and "Detected an exception" in f["text"]
               for f in incarnation["findings"]), incarnation["findings"]
    dumps = [f for f in manifest["files"] if f["kind"] == "coredump"]
    assert len(dumps) == 1 and dumps[0]["complete"] and dumps[0]["path"].startswith("incarnation-1/cores/core.")
    assert not list((run_dir / "incarnation-1" / "cores" / "incoming").iterdir())
    report = json.loads((run_dir / "report.json").read_text())
    [dump] = report["incidents"][0]["dumps"]
    assert dump["label"] == "FAULT"
    fault = dump["report"]["faults"][0]
    assert fault["kernel"]["mangled"] == "_Z10scale_rowsPKfPfi"
    assert fault["exception"]["name"] in {"CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS",
                                          "CUDBG_EXCEPTION_LANE_ILLEGAL_ADDRESS"}
    marker = markers()["null_argument.sm_90.cubin:null-argument"]
    lines = [f"{s['file'].rsplit('/', 1)[-1]}:{s['line']}" for s in fault["sass"]["source"]]
    assert f"{marker.source}:{marker.line}" in lines
    assert "FAULT" in done.stderr and "report.md" in done.stderr


def test_a_real_hang_is_dumped_through_the_drivers_pipe_by_dump_now(tmp_path):
    """serve --user-dumps around the spinning kernel of fixtures/kernels/hang.cu: dump-now writes
    to the pipe the real driver made, the driver dumps the GPU, and the dump is a COLLATERAL one
    whose resident warps are in wait_for_flag."""
    exe = tmp_path / "hang"
    subprocess.run(["nvcc", "-arch=sm_90", "-lineinfo", "-o", str(exe),
                    str(ROOT / "fixtures" / "kernels" / "hang.cu")],
                   check=True, cwd=ROOT / "fixtures" / "kernels")
    serve = Serve(tmp_path, [str(exe)], "--user-dumps", "--grace", "5", env=dict(os.environ))
    wait_for(lambda: list((serve.incarnation / "pipes").glob("corepipe.*")), "the driver's pipe", 120)
    time.sleep(2.0)  # the kernel is launched and spinning
    done = run_cli("dump-now", serve.run_dir, "--timeout", "120", timeout=200)
    assert done.returncode == 0, done.stderr
    serve.signal(signal.SIGTERM)
    serve.finish()
    incident = serve.report()["incidents"][0]
    [dump] = incident["dumps"]
    assert dump["label"] == "COLLATERAL", dump
    assert "wait_for_flag" in json.dumps(dump["report"]), dump["report"]


def test_a_capture_samples_a_real_spinning_kernel_and_its_gpu_dump_ends_the_process(tmp_path):
    """dump-now's capture of hang.cu's spinning kernel: NVML (the real nvidia-smi or
    nvidia-ml-py) sees the process's GPU busy and its memory, then the GPU dump is taken last,
    and the process ends right after it (SIGABRT, which hang.cu never raises): what the capture
    warns of, checked on this driver. Not yet run on a GPU (README counts the ones that were)."""
    exe = tmp_path / "hang"
    subprocess.run(["nvcc", "-arch=sm_90", "-lineinfo", "-o", str(exe),
                    str(ROOT / "fixtures" / "kernels" / "hang.cu")],
                   check=True, cwd=ROOT / "fixtures" / "kernels")
    serve = Serve(tmp_path, [str(exe)], "--user-dumps", "--grace", "5", env=dict(os.environ))
    wait_for(lambda: list((serve.incarnation / "pipes").glob("corepipe.*")), "the driver's pipe", 120)
    time.sleep(2.0)  # the kernel is launched and spinning
    done = run_cli("dump-now", serve.run_dir, "--samples", "2", "--interval", "1", "--timeout",
                   "120", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "ends the process it dumps" in done.stderr.decode().splitlines()[0]
    [ended] = [p for p in serve.wait_manifest(
        lambda m: any(p["exit"] for p in m["incarnations"][0]["processes"]),
        "the dumped process to end", 120)["incarnations"][0]["processes"] if p["exit"]]
    assert ended["exit"]["signal_name"] == "SIGABRT", ended
    serve.signal(signal.SIGTERM)
    serve.finish()
    [link] = serve.manifest()["captures"]
    capture = json.loads((serve.run_dir / link["path"] / "capture.json").read_text())
    [gpu_row] = [row for row in capture["sources"] if row["source"] == "gpu-dump"]
    assert gpu_row["status"] == "ok" and link["gpu_dumps"]
    nvml = [row for row in capture["sources"] if row["source"] == "nvml"]
    assert [row["status"] for row in nvml] == ["ok", "ok"], nvml
    activity = json.loads((serve.run_dir / link["path"] / nvml[-1]["path"]).read_text())
    [(gpu, process)] = [(gpu, p) for gpu in activity["gpus"] for p in gpu["processes"]
                        if p["pid"] == ended["pid"]]
    assert process["used_memory_bytes"] > 0 and gpu["utilization_gpu"] > 50, activity
