"""Start, health-check and stop the server under test from a user's --restart-cmd.

The command runs through /bin/sh in a session of its own, so that stopping it reaches every
process it started (SGLang's schedulers and detokenizer are children of the launcher). Its output
goes to a log file that the oracle watches for fault lines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import requests

from ..errors import EnvironmentProblem

_STOP_WAIT_S = 10.0


def healthy(url: str, timeout: float = 5.0) -> bool:
    try:
        return requests.get(f"{url.rstrip('/')}/health", timeout=timeout).status_code == 200
    except requests.RequestException:
        return False


class ServerDidNotStart(EnvironmentProblem):
    """The command ran but no healthy server came of it: it exited, or /health never answered.
    A bisect skips such a commit; anywhere else it is the missing server of exit code 3."""


class ManagedServer:
    """One server process at a time, from ``command``; ``start()`` returns once /health is 200."""

    def __init__(self, command: str, url: str, log: Path, start_timeout: float = 600.0,
                 env: dict[str, str] | None = None, hint: str = "", name: str = "--restart-cmd"):
        self.command = command
        #: what the messages call the command: the option that gave it, or what runs it
        self.name = name
        self.env = env or {}
        self.hint = hint  # added to the message when the command dies before it is healthy
        self.url = url
        self.log = log
        self.start_timeout = start_timeout
        self.child: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        self.stop()
        if healthy(self.url, timeout=2.0):
            raise EnvironmentProblem(f"something already answers at {self.url} before {self.name} "
                                     "started a server; stop it first")
        with open(self.log, "ab") as log:
            self.child = subprocess.Popen(["/bin/sh", "-c", self.command], stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, env={**os.environ, **self.env})
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.child.poll() is not None:
                raise ServerDidNotStart(f"{self.name} exited with code {self.child.returncode} "
                                        f"before {self.url}/health answered (its output: "
                                        f"{self.log}){self.hint}")
            if healthy(self.url, timeout=2.0):
                return self.child
            time.sleep(0.1)
        self.stop()
        raise ServerDidNotStart(f"{self.url}/health did not answer 200 within "
                                f"{self.start_timeout:g} s of {self.name} (its output: {self.log})")

    def stop(self) -> None:
        """SIGTERM the command's process group, SIGKILL it if it lingers."""
        child, self.child = self.child, None
        if child is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                break
            if _drained(child, _STOP_WAIT_S):
                break
        child.poll()


def _drained(child: subprocess.Popen, wait: float) -> bool:
    """Whether the command and the rest of its group ended within ``wait`` seconds. The shell
    may end at once while what it started (a launcher, crashlab serve) is still stopping its
    own children: a SIGKILL then would leave those behind."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        child.poll()  # reaps the shell: a zombie leader would keep the group alive
        if not _group_alive(child.pid):
            return True
        time.sleep(0.05)
    return False


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
