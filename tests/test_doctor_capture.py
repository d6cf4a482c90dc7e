"""crashlab doctor's capture checks on a fake /proc (limits, core_pattern, Yama, capabilities in
the kernel's own formats), a real runs folder, and the environment a test hands it."""

from __future__ import annotations

import os

import pytest

from crashlab.env.checks import capture
from tests.doctor_machine import Tree

LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max core file size        {soft:<20} {hard:<20} bytes
Max open files            1048576              1048576              files
"""
#: CapEff of a root shell with every capability, of Docker's default set (no CAP_SYS_PTRACE),
#: and of every capability but CAP_SYS_PTRACE (bit 19)
ALL_CAPS, DOCKER_CAPS, ALL_BUT_PTRACE = "000001ffffffffff", "00000000a80425fb", "000001fffff7ffff"


def _tree(tmp_path, **proc) -> Tree:
    tree = Tree(tmp_path)
    for relative, text in proc.items():
        tree.proc_file(relative.replace("__", "/"), text)
    return tree


@pytest.mark.parametrize("soft, hard, status, fix", [
    ("unlimited", "unlimited", "ok", None),
    ("0", "unlimited", "ok", None),  # serve raises it for the server
    ("0", "0", "finding", "--ulimit core=-1"),
])
def test_core_ulimit(tmp_path, soft, hard, status, fix):
    tree = _tree(tmp_path, self__limits=LIMITS.format(soft=soft, hard=hard))
    outcome = capture.core_ulimit(tree.machine())
    assert outcome.status == status and f"ulimit -c is {soft}" in outcome.message
    assert fix is None or fix in outcome.fix


@pytest.mark.parametrize("pattern, said", [
    ("|/usr/lib/systemd/systemd-coredump %P %u %g %s %t %c %h", "coredumpctl list"),
    ("|/usr/share/apport/apport -p%p -s%s -c%c -d%d -P%P -u%u -g%g -- %E", "/var/crash"),
    ("core.%p", "working directory"),
])
def test_core_patterns_that_keep_cores_say_where(tmp_path, pattern, said):
    tree = _tree(tmp_path, sys__kernel__core_pattern=pattern + "\n")
    outcome = capture.core_pattern(tree.machine())
    assert outcome.status == "ok" and said in outcome.message


def test_a_core_pattern_into_a_missing_folder_is_a_finding(tmp_path):
    missing = tmp_path / "cores"
    tree = _tree(tmp_path, sys__kernel__core_pattern=f"{missing}/core.%e.%p\n")
    outcome = capture.core_pattern(tree.machine())
    assert outcome.status == "finding" and f"mkdir -p {missing}" in outcome.fix
    missing.mkdir()
    assert capture.core_pattern(tree.machine()).status == "ok"


@pytest.mark.parametrize("scope, caps, status", [
    ("0", DOCKER_CAPS, "ok"), ("1", ALL_CAPS, "ok"), ("1", DOCKER_CAPS, "finding"),
    ("2", DOCKER_CAPS, "finding"), ("2", ALL_BUT_PTRACE, "finding"), ("3", ALL_CAPS, "finding"),
])
def test_ptrace(tmp_path, scope, caps, status):
    tree = _tree(tmp_path, sys__kernel__yama__ptrace_scope=f"{scope}\n",
                 self__status=f"Name:\tpython3\nCapInh:\t0000000000000000\nCapEff:\t{caps}\n")
    outcome = capture.ptrace(tree.machine())
    assert outcome.status == status, outcome
    assert f"ptrace_scope {scope}" in outcome.message


def test_no_yama_is_the_classic_same_user_rule(tmp_path):
    outcome = capture.ptrace(_tree(tmp_path).machine())
    assert outcome.status == "ok" and "no Yama" in outcome.message


def test_runs_disk_against_the_gpus_memory(tmp_path):
    runs = tmp_path / "not-yet" / "runs"  # measured on the folder that exists
    tree = Tree(tmp_path)
    small = capture.runs_disk(tree.machine(runs_dir=runs, gpu_memory=(1 << 20,) * 2))
    assert small.status == "ok" and f"free in {tmp_path}" in small.message
    stats = os.statvfs(tmp_path)
    gpus = stats.f_bavail * stats.f_frsize // capture.LIGHTWEIGHT_BYTES_PER_GPU + 1
    huge = capture.runs_disk(tree.machine(runs_dir=runs, gpu_memory=(1 << 40,) * gpus))
    assert huge.status == "finding" and f"{gpus:,} GPUs" in huge.message
    assert capture.runs_disk(tree.machine(runs_dir=runs)).status == "skipped"


def test_runs_disk_with_room_for_lightweight_dumps_only_says_so(tmp_path):
    tree = Tree(tmp_path)
    outcome = capture.runs_disk(tree.machine(runs_dir=tmp_path, gpu_memory=(1 << 60,)))
    assert outcome.status == "ok" and "not for --coredump full" in outcome.message


@pytest.mark.parametrize("environ, status, said", [
    ({}, "ok", "no CUDA coredump variable exported"),
    ({"CUDA_COREDUMP_FILE": "/scratch/core.%h.%p"}, "ok", "defers to these"),
    ({"CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "0"}, "finding", "no GPU coredump is written"),
    ({"CUDA_COREDUMP_FILE": "| gzip > /tmp/x"}, "finding", "piped to a command"),
])
def test_coredump_variables_already_exported(tmp_path, environ, status, said):
    outcome = capture.coredump_variables(Tree(tmp_path, dict(environ)).machine())
    assert outcome.status == status and said in outcome.message
    assert all(name in outcome.message for name in environ)
