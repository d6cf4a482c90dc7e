"""Runs of integer opcodes (token ids) decoded in one call instead of one opcode at a time.

Token ids are most of a crash dump's bytes: one BININT1/BININT2/BININT opcode per token, a
microsecond each through the Python interpreter. ``run(data, start)`` returns the run at
``start`` as ``TokenIds`` and the offset of the first opcode after it (FRAME opcodes inside
the run are checked and skipped). ``TokenIds`` is an array of the narrowest type that holds
the run: 2 bytes a token where every id is below 65,536 (a vocabulary of 32k or 64k ids: the
file spends 3 bytes on each), else 4 (a Python int would take 36). The C extension
``_intruns`` does it at memory speed; where it could not be built (no C compiler at install
time) the same walk runs here in Python.
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


#: The array types of TokenIds: unsigned 16-bit where every value fits, else signed 32-bit.
NARROW, WIDE = "H", "i"


def _typecode(values) -> str:
    """The narrowest of NARROW and WIDE that holds ``values``."""
    if isinstance(values, array):
        if values.typecode == NARROW or not len(values):
            return NARROW
    elif not values:
        return NARROW
    return NARROW if min(values) >= 0 and max(values) <= 0xFFFF else WIDE


class TokenIds(array):
    """A list (or tuple, ``was_tuple``) of integers from a dump, stored as uint16s where every
    one fits (typecode NARROW), else as int32s (WIDE)."""

    __slots__ = ("was_tuple",)
    was_tuple: bool

    def __new__(cls, values=(), was_tuple: bool = False, typecode: str | None = None):
        made = super().__new__(cls, typecode or _typecode(values), values)
        made.was_tuple = was_tuple
        return made

    @classmethod
    def joined(cls, parts: list[TokenIds]) -> TokenIds:
        """One run read in parts (APPENDS batches): NARROW only if every part is."""
        if len(parts) == 1:
            return parts[0]
        typecode = WIDE if any(part.typecode == WIDE for part in parts) else NARROW
        joined = cls(typecode=typecode)
        for part in parts:
            joined.extend(part if part.typecode == typecode else array(typecode, part))
        return joined

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
    size, at, values = len(data), start, []
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
    return TokenIds(values), at


def compiled() -> bool:
    return _compiled_run is not None


def run(data, start: int) -> tuple[TokenIds, int]:
    if _compiled_run is None:
        return python_run(data, start)
    found = _compiled_run(data, start)
    # a helper built from an older _intruns.c (an editable install not rebuilt) gives int32s
    raw, end, wide = found if len(found) == 3 else (*found, True)
    values = TokenIds(typecode=WIDE if wide else NARROW)
    values.frombytes(raw)
    return values, end
