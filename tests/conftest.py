"""Shared test helpers: build synthetic dumps into tmp_path, run the real crashlab CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import coredump_builder

#: The real SGLang server's fixtures (tests marked ``sglang``).
pytest_plugins = ["tests.real_sglang.fixtures", "tests.index_fixtures"]

ROOT = Path(__file__).resolve().parent.parent
#: The stand-in SGLang package (server and classes) the serve and replay tests put on PYTHONPATH.
STANDIN = ROOT / "tests" / "standin"


@pytest.fixture(autouse=True)
def xdg_data_home(tmp_path_factory, monkeypatch) -> Path:
    """Each test's own XDG data folder: crashlab's default index (and the copies it takes) never
    land in the real home, and no test sees another's."""
    folder = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(folder))
    return folder


@pytest.fixture(scope="session")
def shared_sass_cache(tmp_path_factory) -> Path:
    """One SASS listing cache for the whole run, every worker's: an entry is keyed by the cubin's
    contents and named by nvdisasm's version, so what another test left there is what this
    test's nvdisasm would print, and a real dump's cubin is disassembled once a run, not once a
    test (the cold listing of a 5 MB PyTorch dump costs seconds)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-sass-cache"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def xdg_cache_home(tmp_path_factory, monkeypatch, shared_sass_cache) -> Path:
    """Each test's own XDG cache folder (bisect's environments, nvdisasm's remembered version),
    with the run's shared SASS listings (crashlab.sass.cache) linked in at crashlab/sass; a test of that cache itself
    takes ``empty_sass_cache``."""
    folder = tmp_path_factory.mktemp("xdg-cache")
    (folder / "crashlab").mkdir()
    (folder / "crashlab" / "sass").symlink_to(shared_sass_cache, target_is_directory=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


@pytest.fixture
def empty_sass_cache(xdg_cache_home) -> Path:
    """The test's XDG cache folder with a SASS cache of its own, empty: for the tests that count
    nvdisasm's runs or damage an entry."""
    sass = xdg_cache_home / "crashlab" / "sass"
    sass.unlink()
    sass.mkdir()
    return xdg_cache_home


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on (for stand-in servers)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def build(tmp_path):
    """build(scenario_or_spec, name="core.nvcudmp", **write_options) -> Built"""
    def _build(what, name="core.nvcudmp", **options):
        spec = getattr(what, "spec", what)
        return coredump_builder.write(spec, tmp_path / name, **options)
    return _build


def run_cli(*args, stdin=None, env=None, timeout=120, cwd=ROOT) -> subprocess.CompletedProcess:
    """The real command, as a user runs it (python -m crashlab), in its own process."""
    environment = {**os.environ, **(env or {})}
    environment.pop("CRASHLAB_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "crashlab", *map(str, args)], input=stdin,
                          capture_output=True, timeout=timeout, env=environment, cwd=cwd)


def imported_modules(*args: str) -> set[str]:
    """The modules a fresh `python -X importtime -m crashlab ARGS` process imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "crashlab", *map(str, args)],
                          capture_output=True, cwd=ROOT, timeout=120)
    rows = [line.removeprefix("import time:").split("|") for line in done.stderr.decode().splitlines()
            if line.startswith("import time:")]
    return {row[-1].strip() for row in rows if row[0].strip().isdigit()}  # not the header row


@pytest.fixture
def no_cuda_gdb(tmp_path_factory) -> dict:
    """run_cli's keywords for a crashlab that finds no cuda-gdb anywhere it looks: no
    CRASHLAB_CUDA_GDB, none on PATH or under CUDA_HOME/CUDA_PATH, and run from a folder holding
    only a link to the package, so that, like a wheel, it runs from no checkout and the checkout's
    .cuda-gdb (.ci/get-cuda-gdb) is not looked in either."""
    if Path("/usr/local/cuda/bin/cuda-gdb").exists():
        pytest.skip("this machine has cuda-gdb in /usr/local/cuda")
    folder = tmp_path_factory.mktemp("no-checkout")
    (folder / "crashlab").symlink_to(ROOT / "crashlab", target_is_directory=True)
    empty = folder / "empty"
    empty.mkdir()
    return {"cwd": folder, "env": {"CRASHLAB_CUDA_GDB": "", "PATH": str(Path(sys.executable).parent),
                                   "CUDA_HOME": str(empty), "CUDA_PATH": str(empty)}}


def _gpu_present() -> str | None:
    """None when a CUDA GPU and nvcc are usable here, else why not."""
    import shutil

    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi: no NVIDIA GPU on this machine"
    probe = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    if probe.returncode != 0 or "GPU" not in probe.stdout:
        return "nvidia-smi lists no GPU"
    if shutil.which("nvcc") is None:
        return "no nvcc to build the planted-fault programs"
    return None


#: Where .ci/get-cuda-gdb puts NVIDIA's real cuda-gdb 12.4 (it reads coredumps on CPU).
REAL_CUDA_GDB = Path(os.environ.get("CRASHLAB_TEST_CUDA_GDB") or ROOT / ".cuda-gdb" / "bin" / "cuda-gdb")


@pytest.fixture(scope="session")
def real_cuda_gdb() -> str:
    """NVIDIA's real cuda-gdb (no GPU needed for `target cudacore`); the test skips without it."""
    if not os.access(REAL_CUDA_GDB, os.X_OK):
        pytest.skip(f"real cuda-gdb not installed at {REAL_CUDA_GDB} (run .ci/get-cuda-gdb)")
    return str(REAL_CUDA_GDB)


def pytest_configure(config):
    # pytest-xdist hands out groups largest first (by their number of tests) unless told not to:
    # the real-SGLang tier, the longest, must start first (see below), and a module of hundreds
    # of quick tests would go before it.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    # The real-SGLang tier goes first: its servers in two xdist groups (the bisect's, and the
    # others', each 5-8 minutes of server starts) on two workers under `-n 3 --dist loadgroup`,
    # while the third runs the modules that only borrow its environment (the gloo hangs: groups
    # of their own), then everything else.
    items.sort(key=lambda item: ("sglang" not in item.keywords,
                                 item.get_closest_marker("xdist_group") is None))
    # Every other test module is a group of its own: its module fixtures (a bisect, a hung job,
    # a built wheel, a Chromium) are made once, not once on each worker its tests land on.
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    why = _gpu_present()
    if why:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"gpu test: {why}"))


# -- the cuda-gdb driver: a real host program and its core, for tests that drive GNU gdb --
HOST_PROGRAM = r"""
#include <signal.h>
#include <stdio.h>
int depth(int n) { if (n == 0) { raise(SIGSEGV); } return depth(n - 1) + 1; }
int main(void) { printf("%d\n", depth(3)); return 0; }
"""


@pytest.fixture(scope="session")
def host_crash(tmp_path_factory):
    """(executable, core): a small C program built by gcc and cored by GNU gdb's generate-core-file."""
    import shutil

    if not (shutil.which("gcc") and shutil.which("gdb")):
        pytest.skip("needs gcc and gdb (installed by .ci/run)")
    work = tmp_path_factory.mktemp("host-crash")
    (work / "crash.c").write_text(HOST_PROGRAM.lstrip("\n"))  # depth() on line 3, main() on 4
    exe, core = work / "crash", work / "crash.core"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(exe), str(work / "crash.c")], check=True)
    subprocess.run(["gdb", "-nx", "-batch", "-ex", "run", "-ex", f"generate-core-file {core}", str(exe)],
                   check=True, capture_output=True, timeout=120)
    assert core.is_file()
    return exe, core


@pytest.fixture(autouse=True, scope="session")
def _temporary_files_stay_in_pytests_folder(tmp_path_factory):
    """What crashlab and the processes the tests start write to $TMPDIR (server logs kept as
    evidence, unpacked dumps) lands in pytest's own temporary folder, not the machine's /tmp."""
    import tempfile

    folder = tmp_path_factory.mktemp("tmpdir")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None
    yield
    if before is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before
    tempfile.tempdir = None


@pytest.fixture(autouse=True, scope="session")
def _home_is_an_empty_folder(tmp_path_factory):
    """The tests run with HOME an empty folder, as on a fresh machine: a test that reads a file of
    this machine's home (a cache, a configuration, what an earlier run left) fails here, not first
    on another person's clone. The XDG folders follow HOME unless a test sets its own (the
    function fixtures above do). What the tests may reach outside the clone is declared here: the
    real SGLang environment .ci/get-sglang caches (CRASHLAB_SGLANG_CACHE, resolved from the real
    home first), and pip's user configuration (PIP_CONFIG_FILE), which says where this machine's
    packages come from when tests/test_wheel.py builds a wheel."""
    from tests.real_sglang import env as sglang_env

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CRASHLAB_SGLANG_CACHE", str(sglang_env.cache_root()))
        pip_config = _pip_user_config()
        if pip_config is not None and "PIP_CONFIG_FILE" not in os.environ:
            patch.setenv("PIP_CONFIG_FILE", str(pip_config))
        for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            patch.delenv(name, raising=False)
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        yield


def _pip_user_config() -> Path | None:
    """pip's user configuration file, in the two places pip reads one from, if there is one."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return next((path for path in (config / "pip" / "pip.conf", Path.home() / ".pip" / "pip.conf")
                 if path.is_file()), None)
