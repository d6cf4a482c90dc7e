"""crashlab env on constructed machines: /proc, /etc and a site-packages built here, the stand-in
nvidia-smi (tests/standin_tools) answering or hanging, the real nvcc of this machine, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crashlab.env import capture, load
from crashlab.env.capture import tool_timeout
from crashlab.env.host import Host
from crashlab.env.saved import FILE, UnusableEnvironment
from crashlab.env.views import markdown
from crashlab.errors import BadInput
from tests.conftest import run_cli
from tests.env_machine import STANDIN_TOOLS, machine, site_packages
from tests.schema_check import errors

PYTHON_DIR = str(Path(sys.executable).parent)
#: python3 for the stand-in's shebang, and nothing else
BARE = PYTHON_DIR
WITH_STANDIN = os.pathsep.join([str(STANDIN_TOOLS), PYTHON_DIR])


def packages(env) -> dict[str, tuple[str, str | None]]:
    return {package.name: (package.status, package.version) for package in env.packages}


def test_a_machine_without_gpu_tools_still_says_what_it_is(tmp_path):
    env = capture(machine(tmp_path, path=BARE), timeout=2)
    assert (env.os.name, env.os.id, env.os.version_id) == ("Ubuntu 22.04.4 LTS", "ubuntu", "22.04")
    assert (env.os.kernel, env.os.arch, env.host_name) == ("5.15.0-122-generic", "x86_64", "gpu-node-7")
    assert env.driver.version == "565.57.01" and env.driver.kernel_module.startswith("NVRM version")
    assert env.driver.cuda_version is None  # only nvidia-smi knows it
    assert [gpu.bus_id for gpu in env.gpus] == [f"0000:{bus}:00.0" for bus in
                                                ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")]
    assert {gpu.name for gpu in env.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [gpu.index for gpu in env.gpus] == list(range(8))
    assert all(gpu.sources == ["/proc"] and gpu.vbios == "96.00.74.00.01" for gpu in env.gpus)
    # said missing once, not once per question (nvcc may be found under /usr/local/cuda)
    assert [(probe.tool, probe.status) for probe in env.probes
            if probe.tool.startswith("nvidia-smi")] == [("nvidia-smi", "missing")]
    assert env.topology is None


def test_packages_come_from_metadata_and_torch_build_from_version_py(tmp_path):
    env = capture(machine(tmp_path, path=BARE), timeout=2)
    found = packages(env)
    assert found["torch"] == ("installed", "2.8.0a0+gitba56102")
    assert found["sgl-kernel"] == ("installed", "0.3.9.post2")  # found under its other name
    assert found["flashinfer-python"] == ("installed", "0.4.1")
    assert found["nvidia-nccl-cu12"] == ("installed", "2.27.3")
    # absent ones say so, under every name looked for
    assert found["flashinfer-cubin"] == ("absent", None)
    assert found["nvidia-nvshmem-cu12/nvidia-nvshmem-cu13"] == ("absent", None)
    assert found["vllm"] == found["xformers"] == found["deep-ep"] == ("absent", None)
    assert (env.torch.version, env.torch.cuda, env.torch.git_version, env.torch.debug) == \
        ("2.8.0a0+gitba56102", "12.8", "ba56102387ef21a3b04b357e5b183d48f0afefc7", False)
    assert env.python.asked is False and env.python.site_paths == [str(tmp_path / "site-packages")]


def test_the_standin_nvidia_smi_adds_what_only_it_knows(tmp_path):
    env = capture(machine(tmp_path, path=WITH_STANDIN), timeout=10)
    assert env.driver.cuda_version == "12.7"
    assert len(env.gpus) == 8  # merged by PCI address with /proc's, not doubled
    first = env.gpus[0]
    assert (first.index, first.memory_total_mib, first.compute_capability) == (0, 81559, "9.0")
    assert first.sources == ["/proc", "nvidia-smi"] and first.vbios == "96.00.74.00.01"
    assert env.topology.splitlines()[1].startswith("GPU0\t X \tNV18")
    assert {probe.tool: probe.status for probe in env.probes if probe.tool.startswith("nvidia")} == {
        "nvidia-smi": "ok", "nvidia-smi topo -m": "ok",
        "nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,"
        "compute_cap --format=csv,noheader,nounits": "ok"}


def test_nvidia_smi_alone_describes_the_gpus_when_proc_has_nothing(tmp_path):
    env = capture(machine(tmp_path, gpus=False, path=WITH_STANDIN), timeout=10)
    assert env.driver.version == "565.57.01" and env.driver.kernel_module is None
    assert [gpu.bus_id for gpu in env.gpus][:2] == ["0000:18:00.0", "0000:2a:00.0"]
    assert all(gpu.sources == ["nvidia-smi"] for gpu in env.gpus)


def test_a_hung_nvidia_smi_costs_one_timeout_and_is_said_to_have_timed_out(tmp_path):
    host = machine(tmp_path, path=WITH_STANDIN, CRASHLAB_STANDIN_NVIDIA_SMI="hang")
    started = time.monotonic()
    env = capture(host, timeout=5.0)
    took = time.monotonic() - started
    # three hung nvidia-smi at once, each ignoring SIGTERM: one timeout and a loaded machine's
    # slack (10 s), below the three timeouts they would cost one after another
    assert took < 3 * 5.0
    timed_out = [probe for probe in env.probes if probe.status == "timeout"]
    assert len(timed_out) == 3 and all(p.tool.startswith("nvidia-smi") for p in timed_out)
    assert any(p.describe() == "nvidia-smi topo -m timed out after 5 s" for p in timed_out)
    assert "nvidia-smi timed out after 5 s" in markdown(env)
    # /proc still answers
    assert env.driver.version == "565.57.01" and len(env.gpus) == 8 and env.topology is None


def test_nothing_imports_torch(tmp_path):
    marker = tmp_path / "torch-was-imported"
    host = machine(tmp_path, path=BARE, marker=marker)
    # the marker works: importing this torch writes it
    subprocess.run([sys.executable, "-c", "import torch"], check=True,
                   env={"PYTHONPATH": str(tmp_path / "site-packages")})
    assert marker.exists()
    marker.unlink()
    capture(host, timeout=5)
    capture(host, python=sys.executable, timeout=5)
    assert not marker.exists() and "torch" not in sys.modules


def test_another_interpreters_packages_are_read_from_its_own_path(tmp_path):
    site = site_packages(tmp_path / "venv")
    host = Host(proc=tmp_path / "proc", etc=tmp_path / "etc",
                environ={"PATH": BARE, "PYTHONPATH": str(site)}, site_paths=())
    env = capture(host, python=sys.executable, timeout=10)
    assert env.python.asked and str(site) in env.python.site_paths
    assert env.python.version == sys.version and env.python.executable == sys.executable
    assert packages(env)["sglang"] == ("installed", "0.5.4")
    assert any(probe.tool.endswith("-c <sys.path>") and probe.status == "ok" for probe in env.probes)


def test_an_interpreter_that_does_not_answer_leaves_the_packages_unknown(tmp_path):
    silent = tmp_path / "python3"
    silent.write_text("#!/bin/sh\nexit 7\n")
    silent.chmod(0o755)
    env = capture(machine(tmp_path, path=BARE), python=str(silent), timeout=5)
    assert {package.status for package in env.packages} == {"unknown"}
    assert env.torch is None and env.python.site_paths == [] and env.python.asked
    assert "-c <sys.path>: exit 7" in markdown(env)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_nvcc_is_the_real_one_with_the_version_it_prints(tmp_path):
    env = capture(machine(tmp_path, path=os.environ["PATH"]), timeout=10)
    printed = subprocess.run([env.cuda.nvcc.path, "--version"], capture_output=True, text=True).stdout
    assert f"release {env.cuda.nvcc.release}, V{env.cuda.nvcc.version}" in printed
    assert env.cuda.home_from == "nvcc on PATH"
    assert env.cuda.nvcc.path == str(Path(env.cuda.home) / "bin" / "nvcc")


def test_cuda_home_is_taken_as_torch_takes_it(tmp_path):
    home = tmp_path / "cuda-12.8"
    (home / "bin").mkdir(parents=True)
    env = capture(machine(tmp_path, path=BARE, CUDA_HOME=str(home), CUDA_PATH="/elsewhere"), timeout=5)
    assert (env.cuda.home, env.cuda.home_from, env.cuda.nvcc) == (str(home), "CUDA_HOME", None)


def test_variables_are_the_relevant_ones_with_secrets_masked(tmp_path):
    env = capture(machine(tmp_path, path=BARE, NCCL_DEBUG="INFO", CUDA_VISIBLE_DEVICES="0,1",
                          HF_TOKEN="hf_abcdefghijklmnopqrstuvwx", HOME="/home/someone",
                          SGLANG_CACHE_URL="https://user:hunter22@cache.internal/x",
                          LD_LIBRARY_PATH="/usr/local/cuda/lib64"), timeout=5)
    assert env.variables == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "***",
                             "LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "NCCL_DEBUG": "INFO",
                             "SGLANG_CACHE_URL": "https://user:***@cache.internal/x"}


def test_bytes_that_are_not_utf8_in_a_variable_are_backslash_escaped_not_a_crash(tmp_path):
    """os.environ holds such bytes as surrogate escapes, which JSON cannot encode."""
    weird = os.fsdecode(b"caf\xe9-\xff")
    env = {"CUDA_WEIRD": weird, "HF_" + weird: "x", "CUDA_HOME": str(tmp_path / weird)}
    captured = capture(machine(tmp_path, path=BARE, **env), timeout=5)
    assert captured.variables["CUDA_WEIRD"] == "caf\\xe9-\\xff"
    assert captured.variables["HF_caf\\xe9-\\xff"] == "x"
    assert captured.cuda.home.endswith("/caf\\xe9-\\xff")
    assert json.loads(captured.model_dump_json())["variables"]["CUDA_WEIRD"] == "caf\\xe9-\\xff"
    done = run_cli("env", "--json", "--timeout", "5", env={"NCCL_WEIRD": weird})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["variables"]["NCCL_WEIRD"] == "caf\\xe9-\\xff"


def test_the_markdown_block_reads_like_check_env_and_leaves_out_host_and_uuids(tmp_path):
    env = capture(machine(tmp_path, path=WITH_STANDIN), timeout=10)
    body = markdown(env)
    lines = body.splitlines()
    assert lines[0] == lines[-1] == "```"
    assert "GPU 0,1,2,3,4,5,6,7: NVIDIA H100 80GB HBM3" in lines
    assert "GPU 0,1,2,3,4,5,6,7 Compute Capability: 9.0" in lines
    assert "NVIDIA driver: 565.57.01" in lines and "Driver CUDA version: 12.7" in lines
    assert "PyTorch build: 2.8.0a0+gitba56102 (CUDA 12.8, git ba56102387ef21a3b04b357e5b183d48f0afefc7)" in lines
    assert "sgl-kernel: 0.3.9.post2" in lines and "flashinfer-cubin: absent" in lines
    assert "NVIDIA Topology:" in lines and not any("\t" in line for line in lines)
    assert "gpu-node-7" not in body and "GPU-00000000" not in body


def test_outside_text_is_shown_as_itself(tmp_path):
    host = machine(tmp_path, path=BARE)
    (tmp_path / "etc" / "os-release").write_text('PRETTY_NAME="[bold]x[/bold] \x1b]0;owned\x07 ```"\n')
    env = capture(host, timeout=5)
    body = markdown(env)
    assert "OS: [bold]x[/bold] \\x1b]0;owned\\x07 ``` (x86_64)" in body
    assert body.startswith("````\n")  # a fence longer than the backticks inside


def test_the_cli_prints_json_that_the_published_schema_accepts():
    done = run_cli("env", "--json", "--timeout", "5")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert errors(data, "environment") == []
    assert data["python"]["executable"] == sys.executable and data["schema_version"] == 1


def test_the_cli_asks_the_interpreter_it_is_given(tmp_path):
    site = site_packages(tmp_path)
    # 30 s: a Python start on a loaded machine takes longer than the default 2 s
    done = run_cli("env", "--markdown", "--python", sys.executable, "--timeout", "30",
                   env={"PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    assert "sgl-kernel: 0.3.9.post2" in done.stdout.decode().splitlines()
    terminal = run_cli("env", "--python", sys.executable, env={"PYTHONPATH": str(site),
                                                              "CRASHLAB_TOOL_TIMEOUT": "30"})
    assert "sglang: 0.5.4" in terminal.stdout.decode().splitlines()


@pytest.mark.parametrize("args, fragment", [
    (("--json", "--markdown"), "choose one of --json and --markdown"),
    (("--python", "/no/such/python"), "--python /no/such/python: no such interpreter"),
    (("--python", "/bin/echo"), "--python /bin/echo: not a Python interpreter that answers"),
    (("--timeout", "0"), "--timeout"),
    (("--timeout", "soon"), "--timeout"),
])
def test_bad_input_is_one_line_and_exit_2(args, fragment):
    done = run_cli("env", *args)
    assert done.returncode == 2 and done.stdout == b""
    assert len(done.stderr.splitlines()) == 1 and fragment in done.stderr.decode()


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf", "2 s"])
def test_a_tool_timeout_that_is_not_seconds_above_0_is_refused(value):
    with pytest.raises(BadInput) as refused:
        tool_timeout({"CRASHLAB_TOOL_TIMEOUT": value})
    assert str(refused.value) == f"CRASHLAB_TOOL_TIMEOUT={value}: not a number of seconds above 0"
    assert tool_timeout({"CRASHLAB_TOOL_TIMEOUT": " 0.5 "}) == 0.5 and tool_timeout({}) == 2.0


@pytest.mark.parametrize("verb", ["env", "doctor"])
def test_a_bad_tool_timeout_in_the_environment_is_one_line_and_exit_2(verb):
    done = run_cli(verb, env={"CRASHLAB_TOOL_TIMEOUT": "soon"})
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        "crashlab: CRASHLAB_TOOL_TIMEOUT=soon: not a number of seconds above 0"]


def test_load_reads_back_what_was_written_and_refuses_what_is_not_one(tmp_path):
    assert load(tmp_path) is None
    env = capture(machine(tmp_path, path=BARE), timeout=5)
    (tmp_path / FILE).write_text(env.model_dump_json())
    assert load(tmp_path) == env
    (tmp_path / FILE).write_text('{"schema_version": 1}')
    with pytest.raises(BadInput, match="not an environment crashlab wrote"):
        load(tmp_path)
    # a later crashlab's fields are left out, the rest read as written
    (tmp_path / FILE).write_text(json.dumps({**json.loads(env.model_dump_json()), "later": 1}))
    assert load(tmp_path) == env
    (tmp_path / FILE).write_text(json.dumps({**json.loads(env.model_dump_json()), "schema_version": 2}))
    with pytest.raises(UnusableEnvironment, match="not an environment crashlab wrote"):
        load(tmp_path)


def test_an_interpreter_that_answers_something_else_is_said_so_not_exit_0(tmp_path):
    talker = tmp_path / "python3"
    talker.write_text("#!/bin/sh\necho hello\n")
    talker.chmod(0o755)
    env = capture(machine(tmp_path, path=BARE), python=str(talker), timeout=5)
    assert "-c <sys.path>: answered, but not what was asked" in markdown(env)
