"""crashlab as a user installs it: a wheel built from this tree, installed into a fresh virtual
environment, run from a folder that is not the checkout. The debugger flow must work from it (its
cuda-gdb command files are package data), not only from the source tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT

BUNDLED = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The python of a fresh venv holding only the wheel; its dependencies come from this test
    run's environment through a path entry (not a site dir, so no editable hook of the checkout
    runs there)."""
    work = tmp_path_factory.mktemp("wheel")
    # From a copy of the files git would commit: an in-tree build/ left by an earlier build would
    # hand the wheel files the package declaration no longer ships.
    source = work / "source"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name, follow_symlinks=False)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(work / "dist"), str(source)], check=True, capture_output=True)
    wheel = next((work / "dist").glob("crashlab-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    python = work / "venv" / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _crashlab(python: Path, *args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CRASHLAB_DEBUG")}
    return subprocess.run([str(python), "-m", "crashlab", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env={**environment, **(env or {})}, timeout=300)


def test_the_wheel_is_what_runs_and_it_carries_the_command_files(installed, tmp_path):
    where = subprocess.run([installed, "-c", "import crashlab, importlib.resources as r; print(crashlab.__file__); "
                            "print(sorted(p.name for p in r.files('crashlab').joinpath('gdb_scripts').iterdir()))"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout.splitlines()
    assert str(installed.parent.parent) in where[0] and str(ROOT) not in where[0]
    assert where[1] == str(sorted(p.name for p in (ROOT / "gdb_scripts").glob("*.gdb")))


def test_the_debugger_flow_runs_from_the_installed_wheel(installed, tmp_path, real_cuda_gdb):
    done = _crashlab(installed, "inspect", BUNDLED, "--debugger", "--json", cwd=tmp_path,
                     env={"CRASHLAB_CUDA_GDB": real_cuda_gdb})
    assert done.returncode == 0, done.stderr
    section = json.loads(done.stdout)["debugger"]
    assert section["status"] == "ok", section.get("reason")
    verdicts = {a["field"]: a["verdict"] for a in section["faults"][0]["agreement"]}
    assert verdicts["kernel"] == verdicts["pc"] == "agree"


def test_the_source_trees_command_files_are_the_packaged_ones():
    """gdb_scripts/ at the top of the tree, for use by hand, is the package's own folder."""
    assert (ROOT / "gdb_scripts").resolve() == (ROOT / "crashlab" / "gdb_scripts").resolve()
