"""``crashlab debug``: the command line it builds, its refusals (exit 2, exit 3), and the
interactive path through a pty, with GNU gdb standing in for cuda-gdb (it refuses the CUDA
commands, which shows they were passed; the session stays the user's)."""

from __future__ import annotations

import gzip
import os
import shlex
import shutil
import sys

import pexpect
import psutil
import pytest

from tests import scenarios
from tests.conftest import ROOT, run_cli

GDB = shutil.which("gdb")


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    from tests.coredump_builder import write

    scenario = scenarios.fault()
    return write(scenario.spec, tmp_path_factory.mktemp("debug") / "core.nvcudmp").path, scenario.planted


def _one_line(done, code: int, fragment: str) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crashlab: ") and fragment in lines[0], lines


@pytest.mark.skipif(GDB is None, reason="needs GNU gdb (installed by .ci/run)")
def test_command_line_loads_the_dump_and_focuses_on_the_first_fault(dump, host_crash):
    path, planted = dump
    done = run_cli("debug", path, "--print", env={"CRASHLAB_CUDA_GDB": GDB})
    assert done.returncode == 0, done.stderr
    focus = f"cuda device {planted.device} sm {planted.sm} warp {planted.warp} lane {planted.lane}"
    assert shlex.split(done.stdout.decode()) == [GDB, "-q", "-ex", f"target cudacore {path.resolve()}",
                                                 "-ex", focus]
    exe, host = host_crash
    both = run_cli("debug", path, "--exe", exe, "--host-core", host, "--print", env={"CRASHLAB_CUDA_GDB": GDB})
    assert shlex.split(both.stdout.decode()) == [GDB, "-q", str(exe), "-ex",
                                                 f"target core {host} {path.resolve()}", "-ex", focus]


def test_no_cuda_gdb_is_exit_3(dump, no_cuda_gdb):
    path, _ = dump
    done = run_cli("debug", path, **no_cuda_gdb)
    _one_line(done, 3, "cuda-gdb not found")
    assert "CRASHLAB_CUDA_GDB=PATH names one" in done.stderr.decode()  # a wheel: no checkout to fetch into


def test_a_checkout_without_cuda_gdb_says_how_to_fetch_it(dump, no_cuda_gdb):
    """Run from a checkout where .ci/get-cuda-gdb has not run: where it looked includes the
    checkout's .cuda-gdb/bin, and the line says what fills it."""
    checkout = no_cuda_gdb["cwd"]
    (checkout / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "get-cuda-gdb", checkout / ".ci" / "get-cuda-gdb")
    done = run_cli("debug", dump[0], **no_cuda_gdb)
    _one_line(done, 3, f"and in {checkout / '.cuda-gdb' / 'bin'}); `bash .ci/get-cuda-gdb` puts NVIDIA's there")


@pytest.mark.skipif(GDB is None, reason="needs GNU gdb (installed by .ci/run)")
def test_bad_input_is_exit_2(dump, tmp_path, host_crash):
    path, _ = dump
    exe, host = host_crash
    env = {"CRASHLAB_CUDA_GDB": GDB}
    _one_line(run_cli("debug", tmp_path / "missing.nvcudmp", env=env), 2, "no such file")
    _one_line(run_cli("debug", exe, env=env), 2, "not a CUDA coredump")
    _one_line(run_cli("debug", path, "--host-core", host, env=env), 2, "--host-core needs --exe")
    _one_line(run_cli("debug", path, "--exe", tmp_path / "nope", env=env), 2, "--exe")
    packed = tmp_path / "core.nvcudmp.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    _one_line(run_cli("debug", packed, env=env), 2, "gzip")
    spaced = tmp_path / "a dir"
    spaced.mkdir()
    shutil.copy(path, spaced / "core.nvcudmp")
    _one_line(run_cli("debug", spaced / "core.nvcudmp", "--exe", exe, "--host-core", host, env=env),
              2, "space")


@pytest.mark.skipif(GDB is None, reason="needs GNU gdb (installed by .ci/run)")
def test_interactive_session_through_a_pty(dump, host_crash):
    """crashlab becomes the debugger (exec: same pid), which ran the commands and waits for the user."""
    path, _ = dump
    exe, _ = host_crash
    env = {**os.environ, "CRASHLAB_CUDA_GDB": GDB, "TERM": "dumb", "HOME": str(exe.parent)}
    env.pop("DEBUGINFOD_URLS", None)
    session = pexpect.spawn(sys.executable, ["-m", "crashlab", "debug", str(path), "--exe", str(exe)],
                            cwd=str(ROOT), env=env, encoding="utf-8", timeout=120)
    try:
        session.expect_exact("(gdb) ")
        seen = session.before
        assert psutil.Process(session.pid).exe() == os.path.realpath(GDB)
        # GNU gdb has no 'target cudacore' nor 'cuda': its refusals show both were passed, in order
        assert seen.index('Undefined target command: "cudacore') < seen.index('Undefined command: "cuda"')
        session.sendline("info symbol main")
        session.expect_exact("(gdb) ")
        assert "main in section .text" in session.before
        session.sendline("quit")
        session.expect(pexpect.EOF)
    finally:
        session.close(force=True)
    assert session.exitstatus == 0
