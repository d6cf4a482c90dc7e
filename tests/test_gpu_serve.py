"""crashlab serve around a real CUDA program that faults (marker ``gpu``; skipped elsewhere).

The real counterpart of the stand-in driver in tests/standin: nvcc builds the planted
illegal-address program, ``crashlab serve`` runs it with its coredump environment, the real
driver writes the dump into cores/incoming/ with its progress lines, crashlab moves it into
cores/ once finished and triages it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.coredump_builder import ROOT, markers

pytestmark = pytest.mark.gpu


def test_a_real_gpu_fault_under_serve_is_collected_and_triaged(tmp_path):
    exe = tmp_path / "illegal_address"
    subprocess.run(["nvcc", "-arch=sm_90", "-lineinfo", "-o", str(exe),
                    str(ROOT / "fixtures" / "kernels" / "illegal_address.cu")],
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
    assert fault["kernel"]["mangled"] == "_Z14write_past_endPii"
    assert fault["exception"]["name"] in {"CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS",
                                          "CUDBG_EXCEPTION_LANE_ILLEGAL_ADDRESS"}
    marker = markers()["illegal_address.sm_90.cubin:illegal-address"]
    lines = [f"{s['file'].rsplit('/', 1)[-1]}:{s['line']}" for s in fault["sass"]["source"]]
    assert f"{marker.source}:{marker.line}" in lines
    assert "FAULT" in done.stderr and "report.md" in done.stderr
