"""The pexpect driver against real GNU gdb on a real host core: prompt sync, a command that
really hangs (interrupted, or killed and restarted when it ignores the interrupt), gdb killed
mid-command, the pager, a large output, restarts. No test leaves a process behind."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import psutil
import pytest

from crashlab.gdb.driver import MAX_RESTARTS, Debugger, SetupCommand

GDB = shutil.which("gdb")
pytestmark = pytest.mark.skipif(GDB is None, reason="needs GNU gdb (installed by .ci/run)")


def _descendants() -> list[psutil.Process]:
    return psutil.Process(os.getpid()).children(recursive=True)


def _dead(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE and process.ppid() != os.getpid()
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(autouse=True)
def no_process_left():
    before = {p.pid for p in _descendants()}
    yield
    left = []
    for process in _descendants():
        if process.pid in before:
            continue
        try:
            left.append((process.pid, process.name(), process.status()))
        except psutil.NoSuchProcess:
            continue
    assert not left, f"processes left behind (zombies included): {left}"


@pytest.fixture
def gdb(host_crash):
    exe, core = host_crash
    debugger = Debugger(GDB, [str(exe), str(core)], start_timeout=60, interrupt_grace=3)
    yield debugger
    debugger.close()


def test_start_reads_the_core_and_commands_stay_in_step(gdb):
    started = gdb.start()
    assert started.ok, started
    assert "Program terminated with signal SIGSEGV" in started.output
    for i in range(25):
        reply = gdb.run(f"print {i} * 7", timeout=30)
        assert reply.ok and reply.output.strip().endswith(f"= {i * 7}"), reply
        # output that looks like a gdb prompt must not end a read early
        reply = gdb.run('echo (gdb) (cuda-gdb) >>> \\n', timeout=30)
        assert reply.ok and reply.output == "(gdb) (cuda-gdb) >>> \n", reply
    backtrace = gdb.run("bt", timeout=30)
    assert backtrace.ok and "depth (n=0) at " in backtrace.output and "main () at " in backtrace.output


def test_error_output_comes_back_with_the_prompt(gdb):
    gdb.start()
    reply = gdb.run("frobnicate", timeout=30)
    assert reply.ok and 'Undefined command: "frobnicate"' in reply.output
    with pytest.raises(ValueError):
        gdb.run("print 1\nprint 2")


def test_hang_that_yields_to_an_interrupt_keeps_the_session(gdb):
    gdb.start()
    pid = gdb.pid
    reply = gdb.run('python print("before the hang"); import time; time.sleep(1000)', timeout=2)
    assert reply.status == "timeout" and "interrupted, the session goes on" in reply.note
    assert "KeyboardInterrupt" in reply.output
    assert reply.output.count("before the hang") == 1, reply.output  # nothing read twice
    after = gdb.run("print 6 * 7", timeout=30)
    assert after.ok and after.output.strip().endswith("= 42") and not after.restarted
    assert gdb.pid == pid and gdb.restarts == 0


def test_hang_that_ignores_the_interrupt_is_killed_and_the_debugger_restarted(host_crash):
    exe, core = host_crash
    setup = [SetupCommand("set $crashlab_setup = 41", 30)]
    with Debugger(GDB, [str(exe), str(core)], setup=setup, interrupt_grace=2) as gdb:
        assert gdb.start().ok
        old = psutil.Process(gdb.pid)
        # sh and sleep ignore SIGINT; gdb waits for them: a real hang that Ctrl-C does not end
        reply = gdb.run("shell trap '' INT; sleep 1000", timeout=2)
        assert reply.status == "timeout" and "the debugger was killed" in reply.note
        assert not old.is_running()  # killed and reaped: not even a zombie
        assert not [p for p in _descendants() if p.name() in ("sleep", "sh", "gdb")]
        # the next command starts a fresh gdb, which replays the setup first
        again = gdb.run("print $crashlab_setup + 1", timeout=60)
        assert again.ok and again.restarted and again.output.strip().endswith("= 42"), again
        assert gdb.restarts == 1 and gdb.pid != old.pid


def test_debugger_killed_mid_command_is_reported_and_reaped(gdb):
    gdb.start()
    pid = gdb.pid
    started: list[psutil.Process] = []
    names: list[str] = []
    stop = threading.Event()

    def kill_gdb():
        # once the sleep runs (gdb, its shell and the sleep each start slowly on a loaded machine)
        deadline = time.monotonic() + 60
        while not stop.wait(0.05) and time.monotonic() < deadline:
            try:
                named = [(child, child.name()) for child in psutil.Process(pid).children(recursive=True)]
            except psutil.Error:  # one ended between the listing and its name
                continue
            if any(name == "sleep" for _, name in named):
                started.extend(child for child, _ in named)  # sh and sleep, running
                names.extend(name for _, name in named)
                break
        if not stop.is_set():  # the command still runs (without a sleep after 60 s, names says so)
            os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_gdb)
    killer.start()
    try:
        # sh and sleep ignore the SIGHUP a dying session leader sends: only a kill ends them
        reply = gdb.run("shell trap '' HUP; sleep 30", timeout=60)
    finally:
        stop.set()
        killer.join()
    assert reply.status == "died" and "killed by signal 9" in reply.note, reply
    assert reply.seconds < 30
    assert "sleep" in names, names
    # what the dead gdb started is dead too (an orphan's zombie is its new parent's, init's, to reap)
    assert all(_dead(p) for p in started), started
    again = gdb.run("print 1 + 1", timeout=60)
    assert again.ok and again.restarted and again.output.strip().endswith("= 2")


def test_a_debugger_that_keeps_dying_is_given_up(gdb):
    gdb.start()
    suicide = "python import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    for attempt in range(MAX_RESTARTS + 1):
        reply = gdb.run(suicide, timeout=30)
        assert reply.status == "died", (attempt, reply)
    given_up = gdb.run("print 1", timeout=30)
    assert given_up.status == "not-run" and "given up" in given_up.note


def test_pager_prompt_is_answered(gdb):
    gdb.start()
    for setting in ("set height 10", "set pagination on"):
        assert gdb.run(setting, timeout=30).ok
    reply = gdb.run("python for i in range(200): print(i)", timeout=60)
    assert reply.ok, reply
    assert reply.output.split() == [str(i) for i in range(200)]


def test_large_output_arrives_whole_and_in_order(gdb):
    gdb.start()
    lines = 200_000
    reply = gdb.run(f'python for i in range({lines}): print("line %d" % i)', timeout=240)
    assert reply.ok, reply.note
    got = reply.output.splitlines()
    assert len(got) == lines and got[0] == "line 0" and got[-1] == f"line {lines - 1}"
    assert got == [f"line {i}" for i in range(lines)]


def test_close_ends_the_debugger_and_is_idempotent(host_crash):
    exe, core = host_crash
    gdb = Debugger(GDB, [str(exe), str(core)])
    assert gdb.start().ok
    pid = gdb.pid
    gdb.close()
    gdb.close()
    assert not gdb.alive
    assert pid not in {p.pid for p in _descendants()}


def test_a_program_that_cannot_start_is_a_reply_not_an_exception(tmp_path):
    reply = Debugger(str(tmp_path / "no-such-debugger")).start()
    assert reply.status == "died" and "could not start" in reply.note
