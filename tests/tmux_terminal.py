"""A real terminal for the view tests: a command run in a detached tmux pane of a chosen size,
and what a person would see in it.

Rich asks the terminal its size, as it does for a user, so the layout under test is the one a
person gets at that width. The capture joins the lines tmux wrapped (``capture-pane -J``): a line
the view printed wider than the pane comes back whole and too long, not hidden by the wrap.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

DONE = "--crashlab-pane-done--"
_SGR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Screen:
    lines: list[str]
    exit_code: int


def available() -> str | None:
    """None when tmux can be run here, else why not."""
    return None if shutil.which("tmux") else "tmux is not installed"


def run_in_pane(args: list[str], columns: int, cwd: Path, rows: int = 400, timeout: float = 60,
                colour: bool = False, environ: dict[str, str] | None = None) -> Screen:
    """Run ``python -m crashlab ARGS`` in a fresh tmux server with one pane COLUMNS wide; with
    ``colour`` the lines keep their escape sequences (``capture-pane -e``); ``environ`` adds to
    the test's environment."""
    socket = f"crashlab-test-{uuid.uuid4().hex[:8]}"
    command = shlex.join([sys.executable, "-m", "crashlab", *map(str, args)])
    script = f"{command}; code=$?; echo; echo {DONE} $code; sleep 600"
    tmux = ["tmux", "-L", socket, "-f", os.devnull]
    env = {**os.environ, **(environ or {}), "TERM": "xterm-256color"}
    for name in ("COLUMNS", "LINES", "CRASHLAB_DEBUG"):
        env.pop(name, None)
    subprocess.run([*tmux, "new-session", "-d", "-x", str(columns), "-y", str(rows), "-c", str(cwd),
                    "bash", "--norc", "--noprofile", "-c", script], check=True, env=env)
    try:
        deadline = time.monotonic() + timeout
        while True:
            captured = subprocess.run([*tmux, "capture-pane", "-p", "-J", *(["-e"] if colour else []),
                                       "-S", "-", "-E", "-"],
                                      capture_output=True, text=True, check=True).stdout
            lines = captured.splitlines()
            ends = [n for n, line in enumerate(lines) if _SGR.sub("", line).startswith(DONE)]
            if ends:
                shown = lines[:ends[0]]
                while shown and not _SGR.sub("", shown[-1]).strip():
                    shown.pop()
                return Screen(shown, int(_SGR.sub("", lines[ends[0]]).split()[-1]))
            if time.monotonic() > deadline:
                raise TimeoutError(f"{command} did not finish in the pane:\n{captured}")
            time.sleep(0.2)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
