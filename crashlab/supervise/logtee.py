"""Draining the server's stdout and stderr: to a log file, to the terminal, through the scanner.

One thread per pipe reads whatever is there (up to 64 KiB at a time) and writes it, unchanged,
to the log file, masked to the terminal, then hands it to the scanner. Nothing is parsed on the
way to the file, so no line is lost or reordered however fast the server writes; if the terminal
goes away, the log goes on. A thread that stopped draining would block the server on a full pipe,
so nothing raised by the terminal or the scanner is allowed to stop it.

The terminal gets whole lines (and a progress bar's redraws, up to their carriage return),
masked like everything else crashlab says: SGLang prints its ``server_args=ServerArgs(...
api_key='...')`` at launch. A line still being written is held until its end comes, or until the
pipe has been quiet for ECHO_QUIET seconds (a prompt, a "Loading..." without a newline).
"""

from __future__ import annotations

import fcntl
import os
import select
import threading
from pathlib import Path
from typing import BinaryIO, Callable

from .logscan import StreamScanner

CHUNK = 1 << 16
#: A line held back from the terminal longer than this is echoed as it is so far.
ECHO_HOLD = 1 << 16
ECHO_QUIET = 0.2
#: A pipe holds 64 KiB by default: ~600 log lines, a few milliseconds of a flood. A bigger one
#: lets crashlab be descheduled for a while on a busy machine without the server blocking.
PIPE_SIZE = 1 << 20


class StreamTee:
    def __init__(self, pipe: BinaryIO, log_path: Path, echo: BinaryIO | None,
                 scanner: StreamScanner, redact: Callable[[str], str]):
        self.log_path = log_path
        self.bytes = 0
        self.problems: list[str] = []
        self._pipe = pipe
        self._echo = echo
        self._redact = redact
        self._held = b""  # the start of a line the terminal has not been given yet
        self._scanner: StreamScanner | None = scanner
        self._thread = threading.Thread(target=self._run, name=f"crashlab-{scanner.stream}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for end of stream (every writer gone); False if it has not come in time."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        fd = self._pipe.fileno()
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except (OSError, AttributeError):
            pass  # not Linux, or above /proc/sys/fs/pipe-max-size: the default pipe still works
        with open(self.log_path, "ab") as log:
            while True:
                if self._held and not select.select([fd], [], [], ECHO_QUIET)[0]:
                    self._to_terminal(b"", whole=True)  # quiet: show the line begun so far
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    break
                log.write(chunk)
                log.flush()
                self.bytes += len(chunk)
                self._to_terminal(chunk)
                self._to_scanner(chunk)
            self._to_terminal(b"", whole=True)
            if self._scanner is not None:
                self._scanner.close()
            os.fsync(log.fileno())
        self._pipe.close()

    def _to_terminal(self, chunk: bytes, whole: bool = False) -> None:
        """Echo the lines ``chunk`` completes, masked; ``whole``: what is held back too."""
        if self._echo is None:
            return
        data = self._held + chunk
        end = len(data) if whole else max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if len(data) - end > ECHO_HOLD:
            end = len(data)
        self._held = data[end:]
        if not end:
            return
        try:
            text = self._redact(data[:end].decode("utf-8", "surrogateescape"))
            self._echo.write(text.encode("utf-8", "surrogateescape"))
            self._echo.flush()
        except Exception as exc:  # a closed terminal, or a masking bug: never echo unmasked
            self.problems.append(f"stopped echoing {self.log_path.name} to the terminal: {exc}")
            self._echo = None

    def _to_scanner(self, chunk: bytes) -> None:
        if self._scanner is None:
            return
        try:
            self._scanner.feed(chunk)
        except Exception as exc:  # a scanner bug must not block the server on a full pipe
            self.problems.append(f"log scanning of {self.log_path.name} stopped "
                                 f"(crashlab bug: {type(exc).__name__}: {exc})")
            self._scanner = None
