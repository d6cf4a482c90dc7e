"""The hardened replay for real, on a GPU (marker ``gpu``; skipped with a reason elsewhere).

The stand-in server, started by --restart-cmd under ``--harden sanitizer``, runs a planted-fault
program from fixtures/kernels when the culprit request arrives: NVIDIA's compute-sanitizer (not
the stand-in of tests/standin_tools) must catch its out-of-bounds write, name the kernel in the
server's output, and the replay's verdict must compare that kernel with the expected one.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.replay_support import FAST_WATCH, free_port, server_command, synthetic

pytestmark = pytest.mark.gpu
KERNELS = ROOT / "fixtures" / "kernels"


@pytest.mark.parametrize("kernel, verdict", [("write_past_end", "reproduced"),
                                             ("rms_norm_kernel", "different crash")])
def test_compute_sanitizer_names_the_kernel_of_the_first_bad_write(tmp_path, kernel, verdict):
    if shutil.which("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not on PATH")
    exe = tmp_path / "illegal_address"
    subprocess.run(["nvcc", "-arch=sm_90", "-lineinfo", "-o", str(exe),
                    str(KERNELS / "illegal_address.cu")], check=True, cwd=KERNELS)
    port = free_port()
    command = server_command(port, "--die-on", "1002", "--die-how", "run", "--run", str(exe))
    result = run_cli("replay", synthetic(tmp_path, 4), "--url", f"http://127.0.0.1:{port}",
                     "--restart-cmd", command, "--harden", "sanitizer", "--expect-kernel", kernel,
                     "--start-timeout", "120", "--json", *FAST_WATCH, timeout=600)
    logs = [Path(p.decode()).read_text(errors="replace")[-3000:] for p in re.findall(rb"its output: (\S+?)\)",
                                                                           result.stderr)]
    assert result.stdout, (result.returncode, result.stderr, logs)
    data = json.loads(result.stdout)
    attempt = data["attempts"][0]
    assert "write_past_end" in attempt["observed"]["kernels"], attempt["observed"]
    assert "illegal-address" in attempt["observed"]["classes"]
    assert attempt["verdict"] == verdict
    assert result.returncode == (0 if verdict == "reproduced" else 1)
