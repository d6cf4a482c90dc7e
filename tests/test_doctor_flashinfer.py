"""crashlab doctor's FlashInfer checks on a constructed site-packages (its jit/env.py holding the
import FlashInfer's holds) and a constructed JIT cache in FlashInfer's layout."""

from __future__ import annotations

import os
import time

from crashlab.env.checks import flashinfer
from tests.doctor_machine import Tree, distribution, torch

#: what flashinfer/jit/env.py does for its NVSHMEM kernels (flashinfer 0.2.7 to 0.6)
NVSHMEM_IMPORT = """def get_nvshmem_include_dirs():
    paths = os.environ.get("NVSHMEM_INCLUDE_PATH")
    if paths is not None:
        return [pathlib.Path(p) for p in paths.split(os.pathsep) if p]

    import nvidia.nvshmem
"""


def _flashinfer(tree: Tree, version: str = "0.6.12") -> None:
    distribution(tree.site, "flashinfer-python", version)
    (tree.site / "flashinfer" / "jit").mkdir(parents=True)
    (tree.site / "flashinfer" / "jit" / "env.py").write_text(NVSHMEM_IMPORT)


def test_nvshmem_missing_for_flashinfer_is_a_finding_with_the_wheel_of_torchs_cuda(tmp_path):
    tree = Tree(tmp_path)
    _flashinfer(tree)
    torch(tree.site, "2.9.0+cu130", cuda="13.0")
    outcome = flashinfer.optional_modules(tree.machine())
    assert outcome.status == "finding"
    assert "No module named 'nvidia.nvshmem'" in outcome.message
    assert outcome.fix.startswith("pip install nvidia-nvshmem-cu13")


def test_nvshmem_present_or_named_by_its_variables_is_ok(tmp_path):
    tree = Tree(tmp_path)
    _flashinfer(tree)
    (tree.site / "nvidia" / "nvshmem" / "lib").mkdir(parents=True)
    assert flashinfer.optional_modules(tree.machine()).status == "ok"
    bare = Tree(tmp_path / "system", {"NVSHMEM_INCLUDE_PATH": "/opt/nvshmem/include",
                                      "NVSHMEM_LIBRARY_PATH": "/opt/nvshmem/lib"})
    _flashinfer(bare)
    outcome = flashinfer.optional_modules(bare.machine())
    assert outcome.status == "ok" and "NVSHMEM_INCLUDE_PATH" in outcome.message


def test_companion_wheels_of_another_version_are_a_finding(tmp_path):
    tree = Tree(tmp_path)
    _flashinfer(tree)
    distribution(tree.site, "flashinfer-cubin", "0.6.11")
    outcome = flashinfer.companions(tree.machine())
    assert outcome.status == "finding"
    assert "flashinfer-cubin 0.6.11" in outcome.message and "does not match" in outcome.message


def test_companion_wheels_of_flashinfers_version_are_ok(tmp_path):
    tree = Tree(tmp_path)
    _flashinfer(tree)
    distribution(tree.site, "flashinfer-cubin", "0.6.12")
    distribution(tree.site, "flashinfer-jit-cache", "0.6.12+cu129")
    assert flashinfer.companions(tree.machine()).status == "ok"


def _jit_module(tree: Tree, name: str, built_at: float) -> None:
    module = tree.root / "home" / ".cache" / "flashinfer" / "0.6.12" / "90a" / "cached_ops" / name
    module.mkdir(parents=True)
    (module / "build.ninja").write_text("ninja_required_version = 1.3\n")
    (module / f"{name}.so").write_bytes(b"\x7fELF")
    os.utime(module / f"{name}.so", (built_at, built_at))


def test_jit_modules_built_before_the_install_of_the_same_version_are_a_finding(tmp_path):
    tree = Tree(tmp_path)
    _flashinfer(tree)
    _jit_module(tree, "fused_moe_120", time.time() - 3600)  # from the previous install
    _jit_module(tree, "norm", time.time() + 60)
    outcome = flashinfer.jit_cache(tree.machine())
    assert outcome.status == "finding"
    assert "1 of 2 JIT modules" in outcome.message and "fused_moe_120" in outcome.message
    assert "flashinfer#4489" in outcome.message
    assert outcome.fix.startswith(f"rm -rf {tree.root / 'home' / '.cache' / 'flashinfer' / '0.6.12'}")


def test_jit_modules_built_after_the_install_are_ok(tmp_path):
    tree = Tree(tmp_path)
    _flashinfer(tree)
    _jit_module(tree, "norm", time.time() + 60)
    outcome = flashinfer.jit_cache(tree.machine())
    assert outcome.status == "ok" and "all built after" in outcome.message


def test_the_cache_follows_flashinfer_workspace_base(tmp_path):
    tree = Tree(tmp_path, {"FLASHINFER_WORKSPACE_BASE": str(tmp_path / "home")})
    tree.environ["HOME"] = str(tmp_path / "elsewhere")
    _flashinfer(tree)
    _jit_module(tree, "fused_moe_120", time.time() - 3600)
    assert flashinfer.jit_cache(tree.machine()).status == "finding"


def test_no_flashinfer_skips_its_checks(tmp_path):
    machine = Tree(tmp_path).machine()
    for check in (flashinfer.optional_modules, flashinfer.companions, flashinfer.jit_cache):
        assert check(machine).status == "skipped"
