"""Collecting a crashed process's host core into the run directory, for each kind of
kernel.core_pattern (crashlab.supervise.hostcore): a real core of a real SIGSEGV where this
machine's pattern keeps one, files across filesystems, and a coredumpctl on PATH."""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from crashlab.env.hostcore import destination, read_destination, uses_pid
from crashlab.gdb.hostcore import dumped_pid
from crashlab.supervise.hostcore import collect_core


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cores_on():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def test_the_real_core_of_a_sigsegv_is_moved_into_the_run_directory(tmp_path):
    where = read_destination()
    if where is None or where.program is not None or where.folder is not None:
        pytest.skip(f"kernel.core_pattern {where and where.pattern!r} keeps no core in the cwd")
    cwd, run = tmp_path / "server", tmp_path / "run" / "cores"
    cwd.mkdir()
    started = time.time()
    crasher = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), "
                                "signal.SIGSEGV)"], cwd=cwd, preexec_fn=_cores_on)
    assert crasher.wait() == -signal.SIGSEGV
    [left] = list(cwd.iterdir())
    digest = _digest(left)
    assert dumped_pid(left) == crasher.pid
    # a plain "core" names no pid: another process's crash is not taken for this one
    other = collect_core(where, crasher.pid + 1, cwd, started, run, uses_pid=uses_pid())
    assert other.path is None and f"no core of pid {crasher.pid + 1}" in other.note and left.exists()
    found = collect_core(where, crasher.pid, cwd, started, run, uses_pid=uses_pid())
    assert found.path is not None and found.path.parent == run, found.note
    assert _digest(found.path) == digest and not left.exists()
    assert str(left) in found.note


def test_a_pattern_with_specifiers_across_filesystems_is_copied_synced_and_renamed(tmp_path):
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        folder = Path(shm)
        if os.stat(folder).st_dev == os.stat(tmp_path).st_dev:
            pytest.skip("/dev/shm is on the same filesystem as the test's folder here")
        where = destination(f"{folder}/core.%e.%p.%t")
        core = folder / "core.python3.4242.1700000000"
        other = folder / "core.python3.4243.1700000000"  # another process's core stays
        core.write_bytes(b"\x7fELF core of 4242" * 1000)
        other.write_bytes(b"\x7fELF core of 4243")
        digest = _digest(core)
        found = collect_core(where, 4242, tmp_path, time.time() - 60, tmp_path / "cores",
                             uses_pid=False)
        assert found.path == tmp_path / "cores" / core.name
        assert _digest(found.path) == digest and not core.exists() and other.exists()
        assert not [p for p in found.path.parent.iterdir() if p.name.startswith(".")]


def test_a_core_from_before_the_incarnation_or_of_another_pid_is_not_taken(tmp_path):
    old = tmp_path / "core.7"
    old.write_bytes(b"old")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    found = collect_core(destination("core"), 7, tmp_path, time.time() - 60, tmp_path / "cores",
                         uses_pid=True)
    assert found.path is None and "no core of pid 7 matching" in found.note and old.exists()
    missing = collect_core(destination("/no/such/folder/core.%p"), 7, tmp_path, 0, tmp_path / "c",
                           uses_pid=False)
    assert missing.path is None and "/no/such/folder does not exist" in missing.note


def test_a_pipe_says_where_the_core_went(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    apport = collect_core(destination("|/usr/share/apport/apport -p%p -s%s"), 7, tmp_path, 0,
                          tmp_path / "cores", uses_pid=False)
    assert apport.path is None and "/var/crash" in apport.note
    journal = collect_core(destination("|/usr/lib/systemd/systemd-coredump %P %u %g %s %t"), 7,
                           tmp_path, 0, tmp_path / "cores", uses_pid=False)
    assert journal.path is None and "coredumpctl dump 7" in journal.note
    assert collect_core(None, 7, tmp_path, 0, tmp_path / "cores", uses_pid=False).path is None


#: A coredumpctl standing in for systemd's: the journal has the core only from the second ask on,
#: as when systemd-coredump is still compressing it.
COREDUMPCTL = """#!/bin/sh
asked="$(dirname "$0")/asked"
if [ ! -e "$asked" ]; then : > "$asked"; echo "No coredumps found." >&2; exit 1; fi
[ "$1 $2 $3 $4" = "--no-pager dump 4242 -o" ] || { echo "bad arguments: $*" >&2; exit 2; }
printf 'ELF core of 4242' > "$5"
"""


def test_systemd_coredump_is_read_back_with_coredumpctl_once_it_has_the_core(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "coredumpctl").write_text(COREDUMPCTL)
    (tools / "coredumpctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    found = collect_core(destination("|/usr/lib/systemd/systemd-coredump %P"), 4242, tmp_path, 0,
                         tmp_path / "cores", uses_pid=False, timeout=30)
    assert found.path == tmp_path / "cores" / "core.4242", found.note
    assert found.path.read_bytes() == b"ELF core of 4242" and "coredumpctl dump 4242" in found.note


def test_coredumpctl_that_never_has_it_gives_a_reason_within_the_timeout(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "coredumpctl").write_text("#!/bin/sh\necho 'No coredumps found.' >&2\nexit 1\n")
    (tools / "coredumpctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    found = collect_core(destination("|/lib/systemd/systemd-coredump %P"), 9, tmp_path, 0,
                         tmp_path / "cores", uses_pid=False, timeout=1.5)
    assert found.path is None and "No coredumps found." in found.note
    assert list((tmp_path / "cores").iterdir()) == []
