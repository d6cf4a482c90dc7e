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
