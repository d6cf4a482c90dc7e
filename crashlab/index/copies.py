"""``inspect --record --copy``: the index takes a copy of a user's dump into its own folder
(location.copies_folder), so that the crash outlives the user's file and gc may delete the copy,
which crashlab owns, when it is past the retention. The user's file is never touched."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
from pathlib import Path

from .location import copies_folder

#: Bytes read at a time while a dump's contents are hashed: a multi-gigabyte dump is streamed,
#: never held.
CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    """The SHA-256 of the file's contents, hex, read a chunk at a time: what makes a dump and
    its copies one crash. A file unchanged since it was hashed (its place, size and time) is
    not read again: crashlab report asks twice, for the fleet's facets and for recording."""
    found = os.stat(path)
    return _hashed(os.path.realpath(path), found.st_size, found.st_mtime_ns, found.st_ino)


@functools.lru_cache(maxsize=64)
def _hashed(path: str, size: int, mtime_ns: int, inode: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def take(path: Path, address: str, digest: str) -> tuple[Path, bool]:
    """The copy of PATH (whose contents' SHA-256 is DIGEST) for the index at ADDRESS, and
    whether this call made it. One dump's contents have one copy, whatever its name or place:
    taken again, the one already there is used. Written under a temporary name and renamed, so
    that a copy is never seen half written."""
    path = Path(path).absolute()
    folder = copies_folder(address)
    copy = folder / f"{digest[:16]}-{path.name}"
    same = sorted(folder.glob(f"{digest[:16]}-*")) if folder.is_dir() else []
    if same:
        return same[0], False
    folder.mkdir(parents=True, exist_ok=True)
    partial = copy.with_name(f".{copy.name}.partial")
    shutil.copyfile(path, partial)
    os.replace(partial, copy)
    return copy, True


def drop(copy: Path) -> None:
    """Remove a copy the index did not keep, and its folder where that leaves it empty: a dump
    recorded before gets no copy, and leaves nothing of crashlab's behind."""
    copy.unlink()
    with contextlib.suppress(OSError):
        copy.parent.rmdir()
