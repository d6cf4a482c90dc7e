"""crashlab doctor as a whole: the real command's exit codes and JSON (validated against what
crashlab schema doctor publishes), the runner, the terminal view, and doctor on the constructed
8-GPU machine crashlab env's tests describe (its GPU facts from the stand-in nvidia-smi)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

from crashlab.console import ViewConsole
from crashlab.env.checks import ALL
from crashlab.env.checks.base import Check, ok
from crashlab.env.doctor import machine_for, run_checks
from crashlab.env.doctor_view import render
from tests import env_machine
from tests.conftest import ROOT, run_cli
from tests.doctor_machine import Tree
from tests.schema_check import errors


def _doctor(tmp_path, *args, env=None, ulimit="unlimited", hard=False):
    """The real command with a core limit of its own (the shell's is the machine's business);
    HARD: the hard limit too."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("CUDA_") and key != "CRASHLAB_DEBUG"}
    environment.update(env or {})
    command = f"ulimit -{'H' if hard else 'S'} -c {ulimit}; exec \"$0\" -m crashlab doctor \"$@\""
    return subprocess.run(["sh", "-c", command, sys.executable, "--runs-dir", str(tmp_path), *args],
                          capture_output=True, text=True, env=environment, cwd=ROOT, timeout=120)


def test_json_validates_and_a_finding_exits_1(tmp_path):
    done = _doctor(tmp_path, "--json", env={"CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "0"})
    report = json.loads(done.stdout)
    assert errors(report, "doctor") == []
    assert [c["id"] for c in report["checks"]] == [check.id for check in ALL]
    by_id = {c["id"]: c for c in report["checks"]}
    assert by_id["coredump-env"]["status"] == "finding" and by_id["coredump-env"]["fix"]
    assert done.returncode == 1, done.stderr


def test_a_machine_with_nothing_to_fix_exits_0(tmp_path):
    # no nvcc on PATH (the toolkit is the one at /usr/local/cuda), no coredump variable,
    # ulimit -c unlimited, crashlab's own Python (no torch, no flashinfer)
    done = _doctor(tmp_path, "--json", env={"PATH": f"/usr/bin{os.pathsep}/bin"})
    findings = [c for c in json.loads(done.stdout)["checks"] if c["status"] == "finding"]
    assert findings == [] and done.returncode == 0, findings


def test_the_terminal_view_prints_each_finding_with_its_fix(tmp_path):
    done = _doctor(tmp_path, ulimit="0", hard=True)  # a soft 0 alone serve raises: no finding
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    row = next(i for i, text in enumerate(lines) if text.startswith("finding") and "core-ulimit" in text)
    assert "fix: raise the hard limit as root" in next(text for text in lines[row + 1:] if "fix:" in text)
    assert "finding" in lines[-1] and "skipped" in lines[-1]


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for args, said in ((["--python", str(tmp_path / "nope")], "no such interpreter"),
                       (["--python", "/bin/true"], "not a Python interpreter that answers"),
                       (["--cmake-cache", str(tmp_path / "CMakeCache.txt")], "no such file")):
        done = run_cli("doctor", *args)
        lines = done.stderr.decode().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and said in lines[0], lines


def test_a_check_that_raises_is_skipped_as_a_bug_and_the_others_run(tmp_path):
    def broken(machine):
        raise ValueError("unexpected layout")

    checks = (Check("broken", "capture", "raises", broken),
              Check("fine", "capture", "works", lambda machine: ok("fine")))
    report = run_checks(Tree(tmp_path).machine(), checks)
    assert [(c.id, c.status) for c in report.checks] == [("broken", "skipped"), ("fine", "ok")]
    assert "ValueError: unexpected layout" in report.checks[0].message
    assert "crashlab bug" in report.checks[0].message and report.findings == []


def test_outside_text_in_the_view_is_never_markup(tmp_path):
    checks = (Check("odd", "builds", "markup", lambda machine: ok("[red]torch[/red] :smile: [/bold]")),)
    out = io.StringIO()
    render(run_checks(Tree(tmp_path).machine(), checks), ViewConsole(file=out, width=120))
    assert "[red]torch[/red] :smile: [/bold]" in out.getvalue()


def test_doctor_on_the_constructed_eight_gpu_machine(tmp_path):
    marker = tmp_path / "torch-imported"
    host = env_machine.machine(tmp_path, path=env_machine.standin_path(), marker=marker)
    report = run_checks(machine_for(tmp_path / "runs", None, None, host=host, timeout=10))
    by_id = {check.id: check for check in report.checks}
    assert "8 GPUs: full dumps up to 637.2 GiB" in by_id["runs-disk"].message
    assert by_id["torch-pins"].status == "finding"
    assert "torch 2.8.0a0+gitba56102 (a source build" in by_id["torch-pins"].message
    assert by_id["torch-cuda-driver"].status == "ok", by_id["torch-cuda-driver"]
    assert not marker.exists()  # torch was read, never imported
