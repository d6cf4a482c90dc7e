"""The host stacks of a crash: faulthandler's Python stack from a real crashing interpreter's
stderr, and real GNU gdb's native stack from its real core (crashlab.report.hoststacks,
crashlab.gdb.hostcore)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.gdb.hostcore import executable_in, native_stack
from crashlab.report.hoststacks import faulthandler_stacks

CRASHER = """\
import os, signal, threading, time

def inner():
    os.kill(os.getpid(), signal.SIGSEGV)

def outer():
    inner()

threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
outer()
"""


def _cores_on():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """A Python that SIGSEGVs with faulthandler on, in a folder of its own: (folder, stderr)."""
    folder = tmp_path_factory.mktemp("crash")
    (folder / "crasher.py").write_text(CRASHER)
    done = subprocess.run([sys.executable, "crasher.py"], cwd=folder, capture_output=True,
                          env={**os.environ, "PYTHONFAULTHANDLER": "1"}, preexec_fn=_cores_on)
    assert done.returncode == -signal.SIGSEGV
    return folder, done.stderr.decode()


def test_faulthandler_gives_the_crashing_threads_python_frames(crashed):
    folder, stderr = crashed
    [stack] = faulthandler_stacks("server starting\n" + stderr + "a later line\n")
    assert stack.error == "Segmentation fault"
    assert stack.thread is not None and stack.other_threads == 1
    crasher = str(folder / "crasher.py")
    assert [(f.file, f.line, f.function) for f in stack.frames] == [
        (crasher, 4, "inner"), (crasher, 7, "outer"), (crasher, 10, "<module>")]


def test_every_block_of_several_processes_is_read_and_the_rest_of_the_log_is_not():
    log = ("INFO scheduler ready\n"
           "Fatal Python error: Aborted\n\n"
           "Stack (most recent call first):\n"
           '  File "/srv/a.py", line ??? in run\n'
           "  ...\n\n"
           "Extension modules: torch._C (total: 1)\n"
           '  File "/srv/not_faulthandler.py", line 9 in f\n'
           "Fatal Python error: Segmentation fault\n\n"
           "Current thread 0x00007f00 (most recent call first):\n"
           '  File "/srv/b.py", line 12 in step\n'
           "ERROR the server says something\n"
           '  File "/srv/traceback_of_another_error.py", line 1 in g\n')
    first, second = faulthandler_stacks(log)
    assert (first.error, first.thread, [(f.file, f.line) for f in first.frames]) == \
        ("Aborted", None, [("/srv/a.py", None)])
    assert (second.error, second.thread, [(f.file, f.line, f.function) for f in second.frames]) == \
        ("Segmentation fault", "0x00007f00", [("/srv/b.py", 12, "step")])
    assert faulthandler_stacks("Traceback (most recent call last):\n  File \"x\", line 1 in f\n") == []


@pytest.mark.skipif(shutil.which("gdb") is None, reason="GNU gdb is not installed")
def test_gdb_reads_the_native_stack_of_the_real_core(crashed):
    folder, _ = crashed
    cores = sorted(p for p in folder.iterdir() if p.name.startswith("core"))
    if not cores:
        pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
        pytest.skip(f"kernel.core_pattern {pattern!r} keeps no core in the process's folder")
    real = os.path.realpath(sys.executable)
    # the core names the interpreter itself; a shim or a retitled process's name would not do
    assert os.path.samefile(executable_in(cores[0]), real)
    for given in (real, None, "sglang::scheduler_TP0"):
        stack = native_stack(cores[0], given, shown_as="core")
        assert stack.unavailable_reason is None and stack.core == "core"
        assert stack.signal.startswith("SIGSEGV")
        functions = [frame.function for frame in stack.frames]
        assert "<signal handler called>" in functions
        assert any(name and "kill" in name for name in functions)


def test_a_missing_gdb_or_an_unreadable_core_is_a_reason(tmp_path):
    missing = native_stack(tmp_path / "core", sys.executable, gdb=None if shutil.which("gdb") is None
                           else str(tmp_path / "no-gdb"))
    assert missing.frames == [] and missing.unavailable_reason
    if shutil.which("gdb") is not None:
        (tmp_path / "core").write_bytes(b"not a core\n")
        unreadable = native_stack(tmp_path / "core", sys.executable)
        assert unreadable.frames == [] and unreadable.unavailable_reason
        assert executable_in(tmp_path / "core") is None
        assert executable_in(Path(os.path.realpath(sys.executable))) is None  # not a core
        nameless = native_stack(tmp_path / "core", None)
        assert nameless.frames == [] and "names no executable" in nameless.unavailable_reason
