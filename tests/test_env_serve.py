"""crashlab serve keeps the environment of its launch: environment.json, taken before the server
starts, for the interpreter the command runs, listed in the manifest, secrets masked; a hung
nvidia-smi delays the launch by one timeout at most. The server is the stand-in SGLang
(tests/standin), nvidia-smi the stand-in of tests/standin_tools."""

from __future__ import annotations

import os
import sys
from datetime import datetime

import psutil

from crashlab.env import load
from crashlab.supervise import envcapture
from tests.env_machine import STANDIN_TOOLS
from tests.serve_harness import FAST, Serve, environment, free_port, sglang, survivors

SECRET = "hf_serveEnvironmentSecret0123456789"
#: The tool timeout of the hung-nvidia-smi run: one timeout and a loaded machine's slack stay
#: below the three timeouts the questions would cost one after another.
HUNG_TIMEOUT = 5


def standin_environment(**more: str) -> dict[str, str]:
    env = environment(crash="abort", crash_on="start")
    env.update(PATH=os.pathsep.join([str(STANDIN_TOOLS), env["PATH"]]), HF_TOKEN=SECRET,
               NCCL_DEBUG="INFO", **more)
    return env


def seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def test_serve_writes_the_environment_of_its_launch(tmp_path):
    # each tool answers, on a loaded machine too: the stand-in nvidia-smi and the Python asked
    # for its sys.path are Python starts, which can take longer than the default 2 s there
    serve = Serve(tmp_path, sglang(free_port()), *FAST,
                  env=standin_environment(CRASHLAB_TOOL_TIMEOUT="30"))
    assert serve.finish() == 0, serve.stderr
    manifest = serve.manifest()
    assert survivors(manifest) == []
    listed = [record for record in manifest["files"] if record["kind"] == "environment"]
    assert [record["path"] for record in listed] == ["environment.json"]
    text = (serve.run_dir / "environment.json").read_text()
    assert SECRET not in text
    env = load(serve.run_dir)
    assert env.python.asked and env.python.executable == sys.executable  # argv[0] is a python
    assert env.variables["HF_TOKEN"] == "***" and env.variables["NCCL_DEBUG"] == "INFO"
    assert env.driver.cuda_version == "12.7" and env.topology  # the stand-in nvidia-smi answered
    # taken before the server: none of its tools is counted as one of the server's processes
    processes = [p["cmdline"] for i in manifest["incarnations"] for p in i["processes"]]
    assert not [cmdline for cmdline in processes if "nvidia-smi" in cmdline or "<sys.path>" in cmdline]


def test_a_hung_nvidia_smi_delays_the_launch_by_one_timeout_at_most(tmp_path):
    serve = Serve(tmp_path, sglang(free_port()), *FAST,
                  env=standin_environment(CRASHLAB_STANDIN_NVIDIA_SMI="hang",
                                          CRASHLAB_TEST_MARK=str(tmp_path),
                                          CRASHLAB_TOOL_TIMEOUT=str(HUNG_TIMEOUT)))
    assert serve.finish() == 0, serve.stderr
    manifest = serve.manifest()
    started = seconds(manifest["incarnations"][0]["started_at"])
    # nvidia-smi is asked three things; one after another they would cost three timeouts. The
    # bound is one timeout plus the loaded machine's slack, and stays below three.
    assert started - seconds(manifest["created_at"]) < 3 * HUNG_TIMEOUT
    env = load(serve.run_dir)
    assert {p.status for p in env.probes if p.tool.startswith("nvidia-smi")} == {"timeout"}
    assert f"environment: nvidia-smi topo -m timed out after {HUNG_TIMEOUT} s" in serve.stderr
    assert _left_running(str(tmp_path)) == []  # killed with their session at the timeout


def _left_running(mark: str) -> list[psutil.Process]:
    """Processes still running with CRASHLAB_TEST_MARK=mark in their environment."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("CRASHLAB_TEST_MARK") == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_a_variable_with_bytes_that_are_not_utf8_is_kept_escaped_and_the_server_launches(tmp_path):
    serve = Serve(tmp_path, sglang(free_port()), *FAST,
                  env=standin_environment(CUDA_WEIRD=os.fsdecode(b"caf\xe9")))
    assert serve.finish() == 0, serve.stderr
    assert "crashlab bug" not in serve.stderr
    assert serve.manifest()["incarnations"], serve.stderr  # the server was launched
    assert load(serve.run_dir).variables["CUDA_WEIRD"] == "caf\\xe9"


def test_a_capture_that_fails_is_one_warning_and_never_stops_the_launch(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the capture broke\nacross lines")

    monkeypatch.setattr(envcapture, "capture", broken)
    warnings: list[str] = []
    envcapture.write_environment(tmp_path, [sys.executable, "-c", "pass"], dict(os.environ),
                                 None, None, warnings.append)
    assert warnings == ["environment.json not written: the environment capture failed "
                        "(RuntimeError: the capture broke\\nacross lines); this is a crashlab bug"]
    assert not (tmp_path / "environment.json").exists()


def test_a_bad_tool_timeout_is_one_warning_and_never_stops_the_launch(tmp_path):
    warnings: list[str] = []
    envcapture.write_environment(tmp_path, [sys.executable, "-c", "pass"],
                                 {**os.environ, "CRASHLAB_TOOL_TIMEOUT": "soon"}, None, None,
                                 warnings.append)
    assert warnings == ["environment.json not written: CRASHLAB_TOOL_TIMEOUT=soon: not a number "
                        "of seconds above 0"]
    assert not (tmp_path / "environment.json").exists()
