"""A hang capture's files opened as a stranger's: capture.json and the files its rows name.

Everything in a capture came from another machine's processes, and capture.json names the files:
a path that leaves the capture's folder (``../``, an absolute path, a link out of it), a folder,
a device or a file larger than its source ever writes is refused with one line, never opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pydantic import ValidationError

from ..errors import BadInput
from ..escape import printable
from ..published import parse
from .layout import CAPTURE, Capture, capture_dirs

#: capture.json lists a few rows per rank and sample: far below this.
CAPTURE_LIMIT = 16 << 20


class Unreadable(BadInput):
    """A source file the reading cannot use: one line, which becomes a note on its rank."""


def capture_folder(path: Path) -> Path | None:
    """The capture a path names: itself where it holds capture.json, the newest capture of a run
    directory, else None (not a hang capture)."""
    if (path / CAPTURE).is_file():
        return path
    found = capture_dirs(path) if path.is_dir() else []
    return found[-1] if found else None


def run_folder(capture: Path) -> Path:
    """The run directory a capture lies in (``<run>/captures/<stamp>``); the capture's own folder
    where it was copied out of one."""
    parent = capture.parent
    return parent.parent if parent.name == "captures" else capture


def load_capture(folder: Path) -> Capture:
    data = read_within(folder, CAPTURE, CAPTURE_LIMIT)
    try:
        return parse(Capture, data)
    except ValidationError as problem:
        first = problem.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "its top"
        raise BadInput(f"{printable(str(folder / CAPTURE))}: not a hang capture record "
                       f"({where}: {printable(first['msg'], 120)})") from None


def resolved_within(base: Path, relative: str) -> Path:
    """``relative`` under ``base``, links followed; Unreadable where it leaves ``base``."""
    shown = printable(relative, 200)
    if not relative or os.path.isabs(relative):
        raise Unreadable(f"{shown}: not a path inside the capture")
    root = base.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise Unreadable(f"{shown}: leaves the folder it must lie in; not opened")
    return target


def read_within(base: Path, relative: str, limit: int) -> bytes:
    """The bytes of ``relative`` under ``base``; Unreadable where it leaves ``base``, is not a
    regular file, is larger than ``limit`` or cannot be read."""
    shown = printable(relative, 200)
    target = resolved_within(base, relative)
    try:
        info = target.stat()
    except FileNotFoundError:
        raise Unreadable(f"{shown}: no such file") from None
    except OSError as problem:
        raise Unreadable(f"{shown}: cannot be read ({problem.strerror or problem})") from None
    if not stat.S_ISREG(info.st_mode):
        raise Unreadable(f"{shown}: not a regular file")
    if info.st_size > limit:
        raise Unreadable(f"{shown}: {info.st_size:,} bytes, more than the {limit:,} this source "
                         "ever writes; not read")
    try:
        with open(target, "rb") as file:
            return file.read(limit + 1)
    except OSError as problem:
        raise Unreadable(f"{shown}: cannot be read ({problem.strerror or problem})") from None
