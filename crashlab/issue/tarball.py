"""A .tar.gz that never grows past its budget: each member is measured compressed as it is written.

A gzip file may be several gzip members one after the other, read as one stream (RFC 1952
section 2.2; gzip, tar and Python's tarfile all do). Each tar member (its header, its data, its
padding) is written here as a gzip member of its own, straight into the bundle: the compressed
size is known byte by byte as it goes, and the moment a member would pass the room left it is
cut off (the file truncated back to where it started) and reported as not fitting. Nothing is
compressed twice, nothing is guessed, and the file on disk never holds more than the budget.
The bundle is written under a temporary name and renamed into place once closed and
its caller is ready (crashlab report puts the body in place first).
"""

from __future__ import annotations

import io
import os
import tarfile
import time
import zlib
from pathlib import Path

_BLOCK = tarfile.BLOCKSIZE
_CHUNK = 1 << 20
#: gzip at zlib's default level: cores shrink well at it, and level 9 costs several times the time
LEVEL = 6
#: zlib's window bits for a gzip wrapper
_GZIP = 16 + zlib.MAX_WBITS


def _gzip_member(data: bytes) -> bytes:
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, _GZIP)
    return compressor.compress(data) + compressor.flush()


#: The end of a tar archive (two zero blocks), compressed: the room every bundle keeps for it.
END = _gzip_member(bytes(2 * _BLOCK))


class BudgetedTarball:
    def __init__(self, path: Path, budget: int, top: str):
        self.path, self.budget, self.top = path, budget, top
        self._temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        # Open for the tarball's life: written member by member until it is closed.
        self._file = open(self._temporary, "w+b")  # noqa: SIM115
        self._starts: list[int] = []
        self.mtime = int(time.time())

    @property
    def used(self) -> int:
        return self._file.tell()

    def room(self) -> int:
        """Compressed bytes the next member may take."""
        return self.budget - self.used - len(END)

    def add(self, name: str, content: bytes | Path) -> int | None:
        """Append a member; its compressed size, or None (and nothing written) when it does not
        fit in the room left."""
        size = len(content) if isinstance(content, bytes) else content.stat().st_size
        info = tarfile.TarInfo(f"{self.top}/{name}")
        info.size, info.mtime, info.mode = size, self.mtime, 0o644
        start, room = self.used, self.room()
        compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, _GZIP)

        def write(data: bytes, last: bool = False) -> bool:
            out = compressor.compress(data) + (compressor.flush() if last else b"")
            if self.used + len(out) - start > room:
                return False
            self._file.write(out)
            return True

        fits = write(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
        with (io.BytesIO(content) if isinstance(content, bytes) else open(content, "rb")) as source:
            left = size
            while fits and left:
                chunk = source.read(min(_CHUNK, left)) or bytes(min(_CHUNK, left))  # shrank: zeros
                left -= len(chunk)
                fits = write(chunk)
        fits = fits and write(bytes(-size % _BLOCK), last=True)
        if not fits:
            self._cut(start)
            return None
        self._starts.append(start)
        return self.used - start

    def drop_last(self) -> None:
        """Take the last member out again (to make room for one that must be in)."""
        self._cut(self._starts.pop())

    def _cut(self, offset: int) -> None:
        self._file.truncate(offset)
        self._file.seek(offset)

    def close(self) -> int:
        """Write the end of the archive, durably, under the temporary name; its size."""
        self._file.write(END)
        self._file.flush()
        os.fsync(self._file.fileno())
        size = self._file.tell()
        self._file.close()
        return size

    def put_in_place(self) -> None:
        """Rename the closed bundle to its name (once what must be there before it is)."""
        os.replace(self._temporary, self.path)

    def discard(self) -> None:
        self._file.close()
        self._temporary.unlink(missing_ok=True)
