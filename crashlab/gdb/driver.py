"""A gdb-family debugger (cuda-gdb, or GNU gdb for host cores) driven one command at a time.

The debugger runs on a pty, as it would for a person, because that is the mode every cuda-gdb
release supports; what would make a pty session fragile is handled here once:
- a prompt of our own (a random token) marks the end of each command's output, so output that
  happens to contain "(gdb)" or "(cuda-gdb)" cannot end a read early;
- line editing and the pty's echo are off, so what comes back is only the debugger's output;
- the pager is off, and if something turns it back on, its prompt is answered;
- a command that does not come back in time is interrupted (Ctrl-C on the pty); if the prompt
  still does not come back, the debugger's whole process group is killed, reaped, and the next
  command starts a fresh debugger that first replays the setup commands (e.g. loading the dump);
- a debugger that dies (EOF) is reaped and reported, never left as a zombie.
Every command's fate is a Reply; nothing here raises for what a debugger does.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from typing import Literal

import pexpect
import psutil

from ..toolpath import checkout_tool, checkout_tools, find_cuda_tool
from . import command_files

#: The pager's prompt (GDB 9 and later, then older releases) and the answer that lets it go on.
PAGER_PROMPTS = {
    "--Type <RET> for more, q to quit, c to continue without paging--": "c",
    "---Type <return> to continue, or q <return> to quit---": "",
}
#: How often a wait looks whether the debugger process itself is still there, in seconds.
POLL_S = 0.5
#: Restarts allowed in one session: a debugger that keeps hanging is given up, not fed forever.
MAX_RESTARTS = 3


@dataclass
class Reply:
    """What came of one command. ``ok`` means the prompt came back (the debugger may still have
    printed an error: that is the caller's to read)."""

    command: str
    output: str
    status: Literal["ok", "timeout", "died", "not-run"]
    seconds: float
    note: str = ""
    restarted: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class SetupCommand:
    """A command that makes a fresh debugger equivalent to the one before it, e.g. loading a dump."""

    command: str
    timeout: float


def find_cuda_gdb() -> tuple[str | None, str]:
    """Path of cuda-gdb, or None and a sentence saying where it was looked for. After the
    toolkit's places, the one .ci/get-cuda-gdb fills in the checkout crashlab runs from (NVIDIA's
    12.4, which reads dumps on CPU): a checkout's own tests and a developer find it unasked."""
    found, problem = find_cuda_tool("cuda-gdb", "CRASHLAB_CUDA_GDB")
    if found or problem:
        return found, problem
    found = checkout_tool("cuda-gdb")
    if found:
        return found, ""
    tools = checkout_tools()
    where = f", and in {tools}" if tools else ""
    fetch = ("`bash .ci/get-cuda-gdb` puts NVIDIA's there" if tools else
             "it ships with the CUDA toolkit; CRASHLAB_CUDA_GDB=PATH names one")
    return None, ("cuda-gdb not found (looked at CRASHLAB_CUDA_GDB, on PATH, under CUDA_HOME, "
                  f"CUDA_PATH and /usr/local/cuda{where}); {fetch}")


@dataclass
class Debugger:
    """One debugger process at a time, restarted on demand after a hang or a death.

    ``program`` and ``args`` start it; ``setup`` commands are replayed after every restart.
    Use as a context manager, or call close(): that is what guarantees no process is left.
    """

    program: str
    args: list[str] = field(default_factory=list)
    setup: list[SetupCommand] = field(default_factory=list)
    start_timeout: float = 60.0
    interrupt_grace: float = 5.0
    env: dict[str, str] | None = None
    restarts: int = 0
    _child: pexpect.spawn | None = field(default=None, repr=False)
    _prompt: str = field(default="", repr=False)
    _given_up: str = field(default="", repr=False)

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> Reply:
        """Spawn the debugger and wait for its first prompt; the reply holds its banner."""
        self._prompt = f"<crashlab-{secrets.token_hex(6)}>"
        argv = ["-nx", "-q", "-iex", "set editing off"]
        for setting in command_files.commands(command_files.SESSION):
            argv += ["-iex", setting]
        argv += ["-iex", f"set prompt {self._prompt}", *self.args]
        environment = {**os.environ, **(self.env or {}), "TERM": "dumb", "LC_ALL": "C"}
        environment.pop("DEBUGINFOD_URLS", None)  # GDB 13 would ask whether to download
        began = time.monotonic()
        try:
            self._child = pexpect.spawn(self.program, argv, echo=False, encoding="utf-8",
                                        codec_errors="replace", env=environment, maxread=65536,
                                        dimensions=(24, 512))
            # pexpect sleeps 50 ms before every send for programs that turn echo off late; the
            # pty's echo is off before the debugger starts, so that sleep would only cost time
            self._child.delaybeforesend = None
        except (pexpect.ExceptionPexpect, OSError) as exc:
            return Reply("(start)", "", "died", time.monotonic() - began,
                         note=f"could not start {self.program}: {exc}")
        return self._read("(start)", self.start_timeout, began)

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.isalive()

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def close(self) -> None:
        """Ask the debugger to quit; kill its process group if it does not. Idempotent."""
        child = self._child
        if child is None:
            return
        if child.isalive():
            try:
                child.sendline("quit")
                child.expect(pexpect.EOF, timeout=5)
            except (pexpect.ExceptionPexpect, OSError):
                pass
        self._kill()

    def __enter__(self) -> Debugger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def _spawned(self) -> pexpect.spawn:
        """The debugger's process, from the first start() on."""
        if self._child is None:
            raise RuntimeError("the debugger was never started")
        return self._child

    # -- commands --------------------------------------------------------------------------
    def run(self, command: str, timeout: float = 60.0) -> Reply:
        """Send one command, return its output once the prompt is back (or why it is not)."""
        if "\n" in command or "\r" in command:
            raise ValueError("one command at a time: no newline in a command")
        restarted = False
        if not self.alive:
            if self._given_up:
                return Reply(command, "", "not-run", 0.0, note=self._given_up)
            restarted, problem = self._restart()
            if problem is not None:
                return Reply(command, problem.output, "not-run", 0.0,
                             note=f"the debugger could not be restarted: {problem.note}")
        began = time.monotonic()
        self._spawned.sendline(command)
        reply = self._read(command, timeout, began)
        reply.restarted = restarted
        return reply

    def _restart(self) -> tuple[bool, Reply | None]:
        started = self._child is not None
        if started:
            if self.restarts >= MAX_RESTARTS:
                self._given_up = f"given up after {MAX_RESTARTS} restarts"
                return True, Reply("(restart)", "", "not-run", 0.0, note=self._given_up)
            self.restarts += 1
            self._kill()
        first = self.start()
        if not first.ok:
            return started, first
        for step in self.setup:
            began = time.monotonic()
            self._spawned.sendline(step.command)
            reply = self._read(step.command, step.timeout, began)
            if not reply.ok:
                return started, reply
        return started, None

    def _read(self, command: str, timeout: float, began: float) -> Reply:
        """Collect output until the prompt, answering the pager; on timeout interrupt, then kill.

        The wait is cut into short slices to notice a debugger that died while what it started
        still holds the pty open (then no EOF comes until they end)."""
        child = self._spawned
        patterns: list[str | type[pexpect.EOF] | type[pexpect.TIMEOUT]] = [
            self._prompt, *PAGER_PROMPTS, pexpect.EOF, pexpect.TIMEOUT]
        chunks: list[str] = []
        deadline = began + timeout
        while True:
            wait = max(0.0, min(deadline - time.monotonic(), POLL_S))
            index = child.expect_exact(patterns, timeout=wait)
            if patterns[index] is pexpect.TIMEOUT:
                # pexpect keeps what came so far and hands it over with the next match
                if self._exited():
                    chunks.append(child.before or "")  # None only before any expect
                    return self._died(command, chunks, began)
                if time.monotonic() < deadline:
                    continue
                return self._interrupt(command, chunks, began, timeout)
            chunks.append(child.before or "")
            if index == 0:
                return Reply(command, _clean(chunks), "ok", time.monotonic() - began)
            if 0 < index <= len(PAGER_PROMPTS):
                child.sendline(list(PAGER_PROMPTS.values())[index - 1])
                continue
            return self._died(command, chunks, began)

    def _exited(self) -> bool:
        """The debugger itself is gone (a zombie not yet reaped counts), without reaping it."""
        try:
            return psutil.Process(self._spawned.pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    def _died(self, command: str, chunks: list[str], began: float) -> Reply:
        child = self._spawned
        self._kill()  # before reaping: what the dead debugger started may still run
        how = (f"killed by signal {child.signalstatus}" if child.signalstatus
               else f"exit status {child.exitstatus}")
        return Reply(command, _clean(chunks), "died", time.monotonic() - began,
                     note=f"the debugger died ({how})")

    def _interrupt(self, command: str, chunks: list[str], began: float, timeout: float) -> Reply:
        child = self._spawned
        child.sendintr()
        index = child.expect_exact([self._prompt, pexpect.EOF, pexpect.TIMEOUT],
                                   timeout=self.interrupt_grace)
        chunks.append(child.before or "")
        if index == 0:
            return Reply(command, _clean(chunks), "timeout", time.monotonic() - began,
                         note=f"no answer in {timeout:g} s; interrupted, the session goes on")
        self._kill()
        return Reply(command, _clean(chunks), "timeout", time.monotonic() - began,
                     note=f"no answer in {timeout:g} s, nor {self.interrupt_grace:g} s after an "
                          "interrupt; the debugger was killed")

    def _kill(self) -> None:
        """SIGKILL the debugger's process group and any child that left it, then reap. Never
        after reaping: the pid could then belong to another process."""
        child = self._child
        if child is None or child.closed or child.pid is None:  # pid: set by the spawn
            return
        try:
            family = psutil.Process(child.pid).children(recursive=True)
        except psutil.Error:
            family = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)  # pexpect made the debugger a session leader
        for process in family:
            with contextlib.suppress(psutil.Error):
                process.kill()
        with contextlib.suppress(pexpect.ExceptionPexpect, OSError):
            child.close(force=True)
        psutil.wait_procs(family, timeout=5)


def _clean(chunks: list[str]) -> str:
    return "".join(chunks).replace("\r\n", "\n").replace("\r", "")
