"""STAND-IN for the CUDA driver's coredump writer (not a driver; see tests/standin/README.md).

It behaves as NVIDIA's CUDA-GDB documentation describes the real one: it reads
CUDA_ENABLE_COREDUMP_ON_EXCEPTION, CUDA_COREDUMP_FILE (%h, %p, %t; %t fixed at "CUDA init"),
CUDA_COREDUMP_SHOW_PROGRESS, CUDA_ENABLE_USER_TRIGGERED_COREDUMP and CUDA_COREDUMP_PIPE; on an
"exception" it prints the `coredump:` progress lines on stderr while it writes the dump (slowly,
keeping the file open), then aborts the process; a write into the user-trigger pipe makes it
write a dump with no exception and carry on. The bytes it writes are a SYNTHETIC coredump from
fixtures/synthetic/, so crashlab's triage has a real file to read.

STANDIN_DUMP_HOLD names a file: while it exists, the writing pauses after its first chunk (up
to 120 s), so a test can act while a dump is certainly being written, then remove the file.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

INIT_TIME = int(time.time())
CHUNKS = 8


def _expand(template: str) -> str:
    return (template.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
            .replace("%t", str(INIT_TIME)))


def _say(line: str) -> None:
    if os.environ.get("CUDA_COREDUMP_SHOW_PROGRESS") == "1":
        print(f"coredump: {line}", file=sys.stderr, flush=True)


def _hold() -> None:
    """Wait while STANDIN_DUMP_HOLD's file exists."""
    hold = os.environ.get("STANDIN_DUMP_HOLD")
    deadline = time.monotonic() + 120
    while hold and os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)


def write_dump(source: str, seconds: float, exception: tuple[str, int] | None) -> str:
    """Write `source` where CUDA_COREDUMP_FILE says, in CHUNKS pieces over `seconds`."""
    template = os.environ.get("CUDA_COREDUMP_FILE") or "core_%t_%h_%p.nvcudmp"
    path = _expand(template)
    if exception is None:
        _say("Starting GPU coredump generation (user-triggered)")
    else:
        name, code = exception
        _say(f"Detected an exception of type {name} ({code})")
        for line in ("  - Device: 0", "  - SM: 17", "  - Warp: 5", "  - PC 0x7fff3a000210"):
            _say(line)
    _say("SM 1/132 has finished state collection")
    _say("Device 1/1 has finished state collection")
    _say("Calculating ELF file layout")
    _say(f"Writing ELF file to {path}")
    with open(source, "rb") as f:
        data = f.read()
    step = -(-len(data) // CHUNKS)
    started = time.monotonic()
    with open(path, "wb") as out:
        for number, offset in enumerate(range(0, len(data), step), 1):
            out.write(data[offset:offset + step])
            out.flush()
            _say(f"{100 * number // CHUNKS}%...")
            _hold()
            time.sleep(seconds / CHUNKS)
    _say("Writing out device table")
    _say("Finalizing")
    _say("Writing done")
    _say(f"All done (took {int(time.monotonic() - started):02d}s)")
    return path


def device_exception(source: str, seconds: float, name: str, code: int) -> None:
    """A kernel faulted: dump (when enabled) and abort, as the driver does."""
    if os.environ.get("CUDA_ENABLE_COREDUMP_ON_EXCEPTION") == "1":
        write_dump(source, seconds, (name, code))
    os.abort()


def listen_for_user_trigger(source: str, seconds: float) -> None:
    """Open the user-trigger pipe; each write into it makes a dump (the process carries on)."""
    if os.environ.get("CUDA_ENABLE_USER_TRIGGERED_COREDUMP") != "1":
        return
    pipe = _expand(os.environ.get("CUDA_COREDUMP_PIPE") or "/tmp/corepipe.cuda.%h.%p")
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDWR)  # read and write: never sees end-of-file while it waits

    def serve_pipe() -> None:
        while os.read(fd, 4096):
            write_dump(source, seconds, None)

    threading.Thread(target=serve_pipe, daemon=True).start()
