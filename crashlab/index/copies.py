"""``inspect --record --copy``: the index takes a copy of a user's dump into its own folder
(location.copies_folder), so that the crash outlives the user's file and gc may delete the copy,
which crashlab owns, when it is past the retention. The user's file is never touched."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

from .location import copies_folder


def take(path: Path, address: str) -> tuple[Path, bool]:
    """The copy of PATH for the index at ADDRESS, and whether this call made it. One dump (its
    place, size and time) has one copy: taken again, the one already there is used. Written
    under a temporary name and renamed, so that a copy is never seen half written."""
    path = Path(path).absolute()
    stat = path.stat()
    identity = f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()
    folder = copies_folder(address)
    copy = folder / f"{hashlib.sha256(identity).hexdigest()[:16]}-{path.name}"
    if copy.is_file():
        return copy, False
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
