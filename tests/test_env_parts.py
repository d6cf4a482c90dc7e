"""The parts of crashlab env, each on real files and real processes: Host's reads, Distributions'
metadata lookup, torch_build's text reading, run_tool's timeout, the driver's /proc and
nvidia-smi layouts, and which interpreter a launch command runs."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from crashlab.env import nvidia
from crashlab.env.host import Host
from crashlab.env.interpreter import ask, launch_interpreter
from crashlab.env.packages import Distributions, torch_build
from crashlab.env.probe import run_tool
from tests.env_machine import NVRM, site_packages, write
from tests.serve_harness import wait_for

PYTHON_DIR = str(Path(sys.executable).parent)


def executable(path: Path, text: str) -> Path:
    write(path, text).chmod(0o755)
    return path


# -- Host ---------------------------------------------------------------------------------------
def test_host_reads_at_most_the_limit_and_says_none_for_what_is_missing(tmp_path):
    host = Host(proc=tmp_path)
    write(tmp_path / "big", "x" * 5000)
    assert host.read_text(tmp_path / "big", limit=100) == "x" * 100
    assert host.read_text(tmp_path / "absent") is None
    assert host.read_text(tmp_path) is None  # a directory
    assert Host().read_text(Path("/proc/self/status"), limit=10) == Path("/proc/self/status").read_text()[:10]


# -- Distributions --------------------------------------------------------------------------------
def test_the_first_distribution_on_the_path_wins_under_any_spelling(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    write(first / "sgl_kernel-0.3.9.dist-info" / "METADATA", "Name: sgl-kernel\nVersion: 0.3.9\n")
    write(second / "sgl_kernel-0.2.0.dist-info" / "METADATA", "Name: sgl-kernel\nVersion: 0.2.0\n")
    write(second / "Flash_Infer.egg-info" / "PKG-INFO", "Name: Flash-Infer\nVersion: 0.1\n")
    found = Distributions([str(first), str(second), str(tmp_path / "absent")])
    assert found.version("SGL.Kernel") == found.version("sgl_kernel") == "0.3.9"
    assert found.get("sgl-kernel").location == first
    assert found.version("flash-infer") == "0.1"
    assert found.version("torch") is None
    assert found.names() == ["flash-infer", "sgl-kernel"]


def test_metadata_without_a_name_is_no_distribution(tmp_path):
    write(tmp_path / "broken-1.0.dist-info" / "METADATA", "Version: 1.0\n")
    assert Distributions([str(tmp_path)]).get("broken") is None


def test_requires_dist_is_read(tmp_path):
    site = site_packages(tmp_path)
    assert Distributions([str(site)]).get("sglang").requires == ("torch==2.8.0",)


def test_torch_build_is_read_as_text_and_survives_a_broken_file(tmp_path):
    site = site_packages(tmp_path)
    build = torch_build(Distributions([str(site)]))
    assert (build.version, build.cuda, build.hip, build.debug) == ("2.8.0a0+gitba56102", "12.8", None, False)
    (site / "torch" / "version.py").write_text("__version__ = (\n")
    assert torch_build(Distributions([str(site)])) is None
    (site / "torch" / "version.py").write_text("cuda = compute()\n__version__ = '2.9.0'\n")
    build = torch_build(Distributions([str(site)]))
    assert (build.version, build.cuda) == ("2.9.0", None)


# -- run_tool -----------------------------------------------------------------------------------
def test_run_tool_statuses(tmp_path):
    environ = {"PATH": PYTHON_DIR}
    assert run_tool(["no-such-tool"], timeout=1, environ=environ).status == "missing"
    ok = run_tool([sys.executable, "-c", "print('hi')"], timeout=10, environ=environ)
    assert (ok.status, ok.output, ok.exit_code) == ("ok", "hi\n", 0)
    failed = run_tool([sys.executable, "-c", "raise SystemExit(3)"], timeout=10, environ=environ)
    assert (failed.status, failed.exit_code) == ("failed", 3)


def test_a_tool_ignoring_sigterm_and_its_children_are_killed_at_the_timeout(tmp_path):
    pids = tmp_path / "pids"
    # a shell, not a Python: it has started its child and written both pids within milliseconds,
    # long before the timeout, where a Python start on a loaded machine can take seconds
    stubborn = executable(tmp_path / "stubborn", f"""#!/bin/sh
trap '' TERM
/bin/sleep 60 &
echo $$ $! > {str(pids)!r}
wait
""")
    started = time.monotonic()
    done = run_tool([str(stubborn)], timeout=3.0, environ={"PATH": PYTHON_DIR})
    assert done.status == "timeout" and time.monotonic() - started < 3.0 + 10.0
    started_pids = [int(pid) for pid in pids.read_text().split()]
    assert len(started_pids) == 2
    wait_for(lambda: not any(_alive(pid) for pid in started_pids),
             f"the stubborn tool's processes {started_pids} to end", 30)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: neither gone nor a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_output_beyond_the_limit_is_drained_not_kept(tmp_path):
    done = run_tool([sys.executable, "-c", "import sys; sys.stdout.write('y' * (3 << 20))"],
                    timeout=20, environ={"PATH": PYTHON_DIR})
    assert done.ok and len(done.output) == 1 << 20


# -- the driver's layouts ---------------------------------------------------------------------------
@pytest.mark.parametrize("banner, version", [
    (NVRM, "565.57.01"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023", "535.104.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build", "580.95.05"),
    ("something else", None),
])
def test_the_driver_version_is_read_from_the_nvrm_banner(tmp_path, banner, version):
    write(tmp_path / "driver" / "nvidia" / "version", banner + "\nGCC version:  gcc 12\n")
    driver = nvidia.driver_from_proc(Host(proc=tmp_path))
    assert driver.version == version


@pytest.mark.parametrize("given, key", [("00000000:18:00.0", "0000:18:00.0"),
                                        ("0000:2A:00.0", "0000:2a:00.0"),
                                        ("00000001:DB:00.0", "0001:db:00.0"),
                                        ("garbage", "garbage")])
def test_bus_ids_of_both_sources_meet(given, key):
    assert nvidia.bus_key(given) == key


def test_query_rows_with_missing_fields_are_skipped_and_na_is_none():
    rows = ("0, NVIDIA H100 80GB HBM3, GPU-1, 00000000:18:00.0, 565.57.01, 81559, 9.0\n"
            "1, NVIDIA H100 80GB HBM3, GPU-2, 00000000:2A:00.0, 565.57.01, [N/A], [N/A]\n"
            "garbage\n")
    gpus = nvidia.gpus_from_query(rows)
    assert [(g.index, g.memory_total_mib, g.compute_capability) for g in gpus] == [(0, 81559, "9.0"), (1, None, None)]
    assert nvidia.query_driver_version(rows) == "565.57.01"
    assert nvidia.query_driver_version(rows.replace("565.57.01, [N/A]", "570.1, [N/A]")) is None


def test_the_cuda_version_comes_from_the_banner_or_the_long_listing():
    assert nvidia.cuda_version("| NVIDIA-SMI 570.211.01  Driver Version: 570.211.01  CUDA Version: 12.8  |") == "12.8"
    assert nvidia.cuda_version("Driver Version : 566.36\nCUDA Version   : 12.7\n") == "12.7"
    assert nvidia.cuda_version("No devices were found") is None


# -- which interpreter ----------------------------------------------------------------------------
def test_the_launch_interpreter_is_argv0_a_shebang_or_crashlabs_own(tmp_path):
    venv = tmp_path / "venv" / "bin"
    python = executable(venv / "python3.11", "#!/bin/sh\n")
    environ = {"PATH": f"{venv}{os.pathsep}{PYTHON_DIR}"}
    assert launch_interpreter(["python3.11", "-m", "sglang.launch_server"], environ) == str(python)
    console = executable(venv / "sglang", f"#!{python}\nfrom sglang.cli import main\n")
    assert launch_interpreter(["sglang", "serve"], environ) == str(python)
    via_env = executable(venv / "torchrun", "#!/usr/bin/env python3.11\n")
    assert launch_interpreter([str(via_env)], environ) == str(python)
    long_path = executable(venv / "vllm", f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n")
    assert launch_interpreter([str(long_path)], environ) == str(python)
    shell = executable(venv / "start.sh", "#!/bin/bash\nexec python3 -m sglang.launch_server\n")
    assert launch_interpreter([str(shell)], environ) == sys.executable
    assert launch_interpreter(["not-on-path"], environ) == sys.executable
    assert console.exists()


def test_an_interpreter_is_asked_with_its_own_environment(tmp_path):
    answer = ask(sys.executable, {"PATH": PYTHON_DIR, "PYTHONPATH": str(tmp_path)}, timeout=10)
    assert answer.run.ok and answer.executable == sys.executable and str(tmp_path) in answer.path
    lying = executable(tmp_path / "python3", "#!/bin/sh\necho '{\"not\": \"a list\"}'\n")
    assert ask(str(lying), {"PATH": PYTHON_DIR}, timeout=10).run.status == "failed"
