"""Durable file operations: evidence is never half-written, never lost in a page cache.

Every file crashlab writes goes to a temporary name beside its destination, is fsynced, renamed
over the destination (atomic on POSIX) and the directory is fsynced, so a reader (or a machine
that loses power) sees the old version or the new one, never a torn one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

_CHUNK = 1 << 20


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(destination: Path) -> Path:
    return destination.with_name(f".{destination.name}.tmp-{os.getpid()}")


def write_atomic(destination: Path, data: bytes) -> None:
    temporary = _temporary(destination)
    with open(temporary, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, destination)
    fsync_dir(destination.parent)


def write_json(destination: Path, value) -> None:
    write_atomic(destination, (json.dumps(value, indent=2, sort_keys=False) + "\n").encode())


def move_into(source: Path, destination: Path) -> None:
    """Rename a finished file into place (same filesystem), durably on both sides."""
    fsync_file(source)
    os.replace(source, destination)
    fsync_dir(destination.parent)
    fsync_dir(source.parent)


def adopt(source: Path, destination: Path) -> None:
    """Bring a file written outside the run directory in, leaving the original where it is.

    A hard link costs nothing and is atomic; across filesystems the bytes are copied to a
    temporary name, fsynced, then renamed into place.
    """
    fsync_file(source)
    try:
        os.link(source, destination)
    except OSError:
        temporary = _temporary(destination)
        with open(source, "rb") as src, open(temporary, "wb") as out:
            shutil.copyfileobj(src, out, _CHUNK)
            out.flush()
            os.fsync(out.fileno())
        shutil.copystat(source, temporary)
        os.replace(temporary, destination)
    fsync_dir(destination.parent)


def free_name(path: Path) -> Path:
    """PATH, or PATH.2, PATH.3, ...: the first that does not exist, so nothing is overwritten."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.{number}")
    return candidate


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def remove_fifos(folder: Path) -> list[Path]:
    """Delete the named pipes under FOLDER (the driver's user-trigger pipes): they are dead once
    the server ended, and a run directory holding one cannot be copied off a node
    (``shutil.copytree`` and ``cp -r`` block or fail on them)."""
    removed = []
    for path in sorted(folder.rglob("*")):
        if path.is_fifo():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
