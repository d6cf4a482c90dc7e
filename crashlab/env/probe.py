"""Run a machine's tool (nvidia-smi, nvcc, gcc) and never wait on it longer than asked.

nvidia-smi on a GPU whose driver is wedged blocks in the kernel, where no signal reaches it
(vllm#9321). The tool runs in its own session; past the timeout the whole session is killed and
the pipes are abandoned to a reaper thread, so even a process that cannot die costs its caller
no more than the timeout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

OUTPUT_LIMIT = 1 << 20

Status = Literal["ok", "failed", "timeout", "missing"]


@dataclass(frozen=True)
class ToolRun:
    status: Status
    output: str = ""
    seconds: float = 0.0
    exit_code: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def run_tool(argv: Sequence[str], *, timeout: float, environ: Mapping[str, str],
             search_path: str | None = None, with_stderr: bool = False) -> ToolRun:
    """Run ``argv`` with ``environ``; its standard output (at most 1 MiB; its standard error mixed
    in WITH_STDERR, for a tool that says there why it failed) when it exits in time."""
    program = shutil.which(argv[0], path=search_path if search_path is not None else environ.get("PATH"))
    if program is None:
        return ToolRun("missing")
    started = time.monotonic()
    try:
        child = subprocess.Popen([program, *argv[1:]], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT if with_stderr else subprocess.DEVNULL,
                                 env=dict(environ), start_new_session=True)
    except OSError:
        return ToolRun("missing")
    output = bytearray()
    reader = threading.Thread(target=_drain, args=(child.stdout, output), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():  # said as the limit it ran into, not as a loaded machine's overshoot
        _kill_session(child)
        threading.Thread(target=child.wait, daemon=True).start()
        return ToolRun("timeout", seconds=timeout)
    try:
        code = child.wait(max(0.0, timeout - (time.monotonic() - started)) + 0.1)
    except subprocess.TimeoutExpired:
        _kill_session(child)
        threading.Thread(target=child.wait, daemon=True).start()
        return ToolRun("timeout", seconds=timeout)
    text = output.decode("utf-8", "replace")
    return ToolRun("ok" if code == 0 else "failed", text, time.monotonic() - started, code)


def _drain(stream, into: bytearray) -> None:
    """Read until the tool closes its output; past the limit, read on but keep nothing more, so
    that a chatty tool is not blocked on a full pipe."""
    with stream:
        while chunk := stream.read(65536):
            if len(into) < OUTPUT_LIMIT:
                into.extend(chunk[:OUTPUT_LIMIT - len(into)])


def _kill_session(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
