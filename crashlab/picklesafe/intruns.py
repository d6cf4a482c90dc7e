"""Runs of integer opcodes (token ids) decoded in one call instead of one opcode at a time.

Token ids are most of a crash dump's bytes: one BININT1/BININT2/BININT opcode per token, a
microsecond each through the Python interpreter. ``run(data, start)`` returns the run at
``start`` as ``TokenIds`` (an ``array('i')``, 4 bytes a token instead of a Python int's 36)
and the offset of the first opcode after it (FRAME opcodes inside
the run are checked and skipped). The C extension ``_intruns`` does it at memory speed; where it
could not be built (no C compiler at install time) the same walk runs here in Python.
"""

from __future__ import annotations

import struct
from array import array

try:
    from ._intruns import run as _compiled_run
except ImportError:  # pragma: no cover - exercised by the fallback test, which forces this path
    _compiled_run = None

_BININT, _BININT1, _BININT2, _FRAME = 0x4A, 0x4B, 0x4D, 0x95
_FORMAT = {_BININT1: ("<B", 1), _BININT2: ("<H", 2), _BININT: ("<i", 4)}


class TokenIds(array):
    """A list (or tuple, ``was_tuple``) of integers from a dump, stored as int32s."""

    __slots__ = ("was_tuple",)
    was_tuple: bool

    def __new__(cls, values=(), was_tuple: bool = False):
        made = super().__new__(cls, "i", values)
        made.was_tuple = was_tuple
        return made

    def __repr__(self) -> str:
        return f"TokenIds({self.tolist()!r})"

    def __eq__(self, other):
        """Equal to a list or tuple of the same integers, as the list it stands for would be."""
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and self.tolist() == list(other)
        return super().__eq__(other)

    __hash__ = None


def python_run(data, start: int) -> tuple[TokenIds, int]:
    """The walk of _intruns.c, in Python (same stops, same FRAME check)."""
    size, at, values = len(data), start, TokenIds()
    while at < size:
        code = data[at]
        if code == _FRAME and at + 9 <= size:
            if struct.unpack_from("<Q", data, at + 1)[0] > size - at - 9:
                break
            at += 9
            continue
        spec = _FORMAT.get(code)
        if spec is None or at + 1 + spec[1] > size:
            break
        values.append(struct.unpack_from(spec[0], data, at + 1)[0])
        at += 1 + spec[1]
    return values, at


def compiled() -> bool:
    return _compiled_run is not None


def run(data, start: int) -> tuple[TokenIds, int]:
    if _compiled_run is None:
        return python_run(data, start)
    raw, end = _compiled_run(data, start)
    values = TokenIds()
    values.frombytes(raw)
    return values, end
