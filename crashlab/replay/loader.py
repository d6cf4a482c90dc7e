"""Open a crash-dump file as a stranger's file: one clear refusal for anything that is not one."""

from __future__ import annotations

import os

from ..errors import BadInput
from . import bounds, unpickler
from .unpickler import printable
from .records import CrashDump, crash_dump_from

_GZIP = b"\x1f\x8b"
_PROTO = 0x80


def load(path: str | os.PathLike) -> CrashDump:
    """The typed dump in ``path``, read without running anything it names.

    Raises crashlab.errors.BadInput (exit 2) for a missing, unreadable, hostile, damaged or
    non-SGLang file; the message is one line and names the offending global or byte offset.
    """
    name = printable(os.fspath(path), 500)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        raise BadInput(f"{name}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{name}: is a directory, not a crash-dump .pkl") from None
    except OSError as problem:
        raise BadInput(f"{name}: cannot be read ({problem.strerror or problem})") from None
    if not data:
        raise BadInput(f"{name}: empty file")
    if data[:2] == _GZIP:
        raise BadInput(f"{name}: gzip-compressed; gunzip it first (SGLang writes plain pickles)")
    if data[0] != _PROTO:
        raise BadInput(f"{name}: not a pickle of protocol 2 or later (SGLang writes protocol 4 or 5)")
    root = unpickler.loads(data, name)
    bounds.check(root, len(data), name)
    try:
        return crash_dump_from(root, name, len(data))
    except ValueError as problem:
        raise BadInput(f"{name}: not an SGLang crash dump: {problem}") from None
