"""Draining the server's stdout and stderr: to a log file, to the terminal, through the scanner.

One thread per pipe reads whatever is there (up to 64 KiB at a time) and writes it, unchanged,
to the log file, masked to the terminal, then hands it to the scanner. Nothing is parsed on the
way to the file, so no line is lost or reordered however fast the server writes; if the terminal
goes away, the log goes on. A thread that stopped draining would block the server on a full pipe,
so nothing raised by the terminal or the scanner is allowed to stop it.

The terminal gets whole lines (and a progress bar's redraws, up to their carriage return),
masked like everything else crashlab says: SGLang prints its ``server_args=ServerArgs(...
api_key='...')`` at launch. A line still being written is held until its end comes; when the
pipe has been quiet for ECHO_QUIET seconds (a prompt, a "Loading..." without a newline) the
line so far is shown without its last word, which may be the first half of a secret whose second
half is still to come. When the line ends it is masked whole, and what the terminal was shown
of it is completed, or redrawn from the line's start where masking the whole changed it
(``password=hun`` then ``ter2``: the terminal never sees ``hun``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, BinaryIO

from .logscan import StreamScanner

CHUNK = 1 << 16
#: A line held back from the terminal longer than this is echoed as it is so far.
ECHO_HOLD = 1 << 16
ECHO_QUIET = 0.2
#: A pipe holds 64 KiB by default: ~600 log lines, a few milliseconds of a flood. A bigger one
#: lets crashlab be descheduled for a while on a busy machine without the server blocking.
PIPE_SIZE = 1 << 20
_LAST_WORD = re.compile(r"\S*\Z")


class StreamTee:
    def __init__(self, pipe: IO[bytes], log_path: Path, echo: BinaryIO | None,
                 scanner: StreamScanner, redact: Callable[[str], str]):
        self.log_path = log_path
        self.bytes = 0
        self.problems: list[str] = []
        self._pipe = pipe
        self._echo = echo
        self._redact = redact
        self._held = b""  # the start of a line the terminal has not been given whole yet
        self._shown = ""  # what the terminal was shown of it, masked
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
        # Not Linux, or above /proc/sys/fs/pipe-max-size: the default pipe still works.
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        with open(self.log_path, "ab") as log:
            while True:
                if self._held and not select.select([fd], [], [], ECHO_QUIET)[0]:
                    self._show_held()  # quiet: show the line begun so far
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
        if end:
            self._echo_masked(self._echo, data[:end].decode("utf-8", "surrogateescape"))
            self._shown = ""

    def _show_held(self) -> None:
        """The held line so far, without its last word (it may be a secret's first half)."""
        if self._echo is not None:
            text = _LAST_WORD.sub("", self._held.decode("utf-8", "surrogateescape"))
            self._shown = self._echo_masked(self._echo, text)

    def _echo_masked(self, echo: BinaryIO, text: str) -> str:
        """Write ``text`` masked, as the continuation of what the terminal shows of the held
        line, or as its redraw where masking changed that; return it masked."""
        try:
            masked = self._redact(text)
            # Where masking changed what is shown: back to the line's start, a progress bar's redraw.
            out = (masked[len(self._shown):] if masked.startswith(self._shown)
                   else "\r" + masked)
            echo.write(out.encode("utf-8", "surrogateescape"))
            echo.flush()
            return masked
        except Exception as exc:  # a closed terminal, or a masking bug: never echo unmasked
            self.problems.append(f"stopped echoing {self.log_path.name} to the terminal: {exc}")
            self._echo = None
            return ""

    def _to_scanner(self, chunk: bytes) -> None:
        if self._scanner is None:
            return
        try:
            self._scanner.feed(chunk)
        except Exception as exc:  # a scanner bug must not block the server on a full pipe
            self.problems.append(f"log scanning of {self.log_path.name} stopped "
                                 f"(crashlab bug: {type(exc).__name__}: {exc})")
            self._scanner = None
