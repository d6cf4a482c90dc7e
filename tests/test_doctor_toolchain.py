"""crashlab doctor's toolchain checks on a constructed toolkit (its include/crt/host_config.h in
the toolkit's own words, a stand-in nvcc) found as crashlab env finds it, and the real gcc."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from crashlab.env.capture import capture
from crashlab.env.checks import toolchain
from crashlab.env.doctor import machine_from
from crashlab.env.hostcompiler import host_limits
from tests.doctor_machine import Tree, torch

GCC_MAJOR = int(subprocess.run(["gcc", "-dumpversion"], capture_output=True, text=True,
                               check=True).stdout.split(".")[0])


def _captured(tree: Tree, **options):
    """The Machine crashlab doctor makes of this tree: through crashlab env's capture()."""
    host = tree.host()
    return machine_from(capture(host, timeout=5), host, **options)


def _tree(tmp_path, **environ) -> Tree:
    return Tree(tmp_path, {"PATH": f"/usr/bin{os.pathsep}/bin", **environ})


def test_nvcc_and_torch_of_one_cuda_major_are_ok(tmp_path):
    tree = _tree(tmp_path)
    tree.environ["CUDA_HOME"] = str(tree.toolkit(release="12.4"))
    torch(tree.site, "2.8.0+cu128", cuda="12.8")
    outcome = toolchain.nvcc_torch_cuda(_captured(tree))
    assert outcome.status == "ok" and "minor versions differ" in outcome.message


def test_nvcc_of_another_cuda_major_than_torch_is_a_finding(tmp_path):
    tree = _tree(tmp_path)
    tree.environ["CUDA_HOME"] = str(tree.toolkit(release="13.0"))
    torch(tree.site, "2.8.0+cu128", cuda="12.8")
    outcome = toolchain.nvcc_torch_cuda(_captured(tree))
    assert outcome.status == "finding"
    assert "The detected CUDA version (13.0) mismatches the version that was used to compile " \
           "PyTorch (12.8)" in outcome.message


def test_torch_and_nvcc_against_the_drivers_cuda(tmp_path):
    tree = _tree(tmp_path)
    home = tree.toolkit(release="13.0")
    torch(tree.site, "2.8.0+cu128", cuda="12.8")
    machine = tree.machine(driver_cuda="12.4", cuda_home=home, cuda_home_from="CUDA_HOME",
                           nvcc=home / "bin" / "nvcc", nvcc_release="13.0")
    minor = toolchain.torch_cuda_driver(machine)
    assert minor.status == "ok" and "minor version compatibility" in minor.message
    major = toolchain.nvcc_driver(machine)
    assert major.status == "finding"
    assert "CUDA driver version is insufficient for CUDA runtime version" in major.message
    machine.driver_cuda = "13.0"
    assert toolchain.nvcc_driver(machine).status == "ok"


def test_a_cuda_home_without_headers_names_the_toolkit_nvcc_belongs_to(tmp_path):
    tree = _tree(tmp_path)
    home = tree.toolkit()
    (tmp_path / "local").mkdir()
    tree.environ.update(CUDA_HOME=str(tmp_path / "local"),
                        PATH=f"{home / 'bin'}{os.pathsep}{tree.environ['PATH']}")
    outcome = toolchain.cuda_home(_captured(tree))
    assert outcome.status == "finding", outcome
    assert f"belongs to {home}" in outcome.message and outcome.fix == f"export CUDA_HOME={home}"
    tree.environ["CUDA_HOME"] = str(home)
    assert toolchain.cuda_home(_captured(tree)).status == "ok"


def test_cmake_naming_another_toolkit_is_a_finding(tmp_path):
    tree = _tree(tmp_path)
    home, other = tree.toolkit(name="cuda-12.8"), tree.toolkit(name="cuda-12.4")
    tree.environ["CUDA_HOME"] = str(home)
    cache = tmp_path / "build" / "CMakeCache.txt"
    cache.parent.mkdir()
    cache.write_text(f"CMAKE_CUDA_ARCHITECTURES:STRING=90a\nCMAKE_CUDA_COMPILER:FILEPATH={other}/bin/nvcc\n")
    outcome = toolchain.cmake_cuda_compiler(_captured(tree, cmake_cache=cache))
    assert outcome.status == "finding"
    assert f"{cache} = {other}/bin/nvcc" in outcome.message and str(home) in outcome.fix
    tree.environ["CMAKE_CUDA_COMPILER"] = f"{home}/bin/nvcc"
    assert toolchain.cmake_cuda_compiler(_captured(tree)).status == "ok"


def test_a_gcc_newer_than_host_config_allows_is_a_finding(tmp_path):
    tree = _tree(tmp_path)
    tree.environ["CUDA_HOME"] = str(tree.toolkit(gcc_limit=GCC_MAJOR - 1))
    outcome = toolchain.host_compiler(_captured(tree))
    assert outcome.status == "finding"
    assert f"gcc versions later than {GCC_MAJOR - 1} are not supported" in outcome.message
    assert "CUDAHOSTCXX" in outcome.fix


def test_a_gcc_host_config_accepts_is_ok_and_the_override_flag_is_honoured(tmp_path):
    tree = _tree(tmp_path)
    tree.environ["CUDA_HOME"] = str(tree.toolkit(gcc_limit=GCC_MAJOR))
    assert toolchain.host_compiler(_captured(tree)).status == "ok"
    older = _tree(tmp_path / "older")
    older.environ.update(CUDA_HOME=str(older.toolkit(gcc_limit=GCC_MAJOR - 1)),
                         NVCC_APPEND_FLAGS="-allow-unsupported-compiler")
    outcome = toolchain.host_compiler(_captured(older))
    assert outcome.status == "ok" and "overridden by -allow-unsupported-compiler" in outcome.message


def test_the_real_cuda_13_toolkit_limit_is_read_from_its_own_header():
    real = Path("/usr/local/cuda-13.0")
    if not real.is_dir():
        pytest.skip("no CUDA 13.0 toolkit at /usr/local/cuda-13.0")
    assert str(host_limits(real).gcc_later_than) == "15"
