"""The kernel log, where the NVIDIA driver reports GPU faults as ``NVRM: Xid`` lines.

Xid 13 (graphics engine exception), 31 (MMU fault), 43, 79 (fallen off the bus) ... tell a
software fault from a hardware one, and they are printed by the kernel module, not by the
server. They are "visible" where crashlab may read /dev/kmsg (root, or dmesg_restrict=0);
elsewhere the manifest says they were not watched. Only records written after the server
started are read, and only Xid lines are kept: the kernel log is the whole machine's.
"""

from __future__ import annotations

import contextlib
import errno
import os

from .logscan import StreamScanner

KMSG = "/dev/kmsg"
_READ_SIZE = 8192  # /dev/kmsg returns one record per read and refuses a buffer too small for it


class KernelLog:
    def __init__(self, scanner: StreamScanner, path: str = KMSG):
        self.scanner = scanner
        self.unavailable: str | None = None
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            self._fd = None
            self.unavailable = f"{path} is not readable ({exc.strerror}): Xid lines are not watched"
            return
        # Only what happens from now on; one not seekable (a pipe standing in for it) has
        # nothing old to skip.
        with contextlib.suppress(OSError):
            os.lseek(self._fd, 0, os.SEEK_END)

    def poll(self) -> None:
        while self._fd is not None:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten before we read them
                    continue
                return
            if not data:
                return
            self.scanner.feed(_messages(data))

    def close(self) -> None:
        if self._fd is not None:
            self.poll()
            self.scanner.close()
            os.close(self._fd)
            self._fd = None


def _messages(data: bytes) -> bytes:
    """``6,339,5140900,-;NVRM: Xid ...`` -> ``NVRM: Xid ...``; continuation lines dropped."""
    out = []
    for line in data.split(b"\n"):
        if not line or line.startswith(b" "):
            continue
        _, _, message = line.partition(b";")
        out.append(message)
    return b"\n".join(out) + b"\n" if out else b""
