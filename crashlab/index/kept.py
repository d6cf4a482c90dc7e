"""The readings the index keeps with a crash that has no dump to read again: a hang's
HangReading (column ``hang``) and a kernel-log crash's XidTriage (column ``xid_triage``: the
decoded Xids, its line, kind, fault type and address), each as JSON compressed with zlib (as a
crash's triage is), so that show and the web view give them without the capture or the log,
which may be gone or on another host.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Literal, TypeVar

from .triage import LEVEL, inflated

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .records import NewCrash
    from .store import Index

    Reading = TypeVar("Reading", bound=BaseModel)

#: The columns that hold a kept reading.
Column = Literal["hang", "xid_triage"]


def pack(reading: BaseModel) -> bytes:
    """The reading as the index stores it."""
    return zlib.compress(reading.model_dump_json().encode("utf-8"), LEVEL)


def unpack(blob: bytes, model: type[Reading]) -> Reading | None:
    """A stored reading of MODEL; None for one that is damaged, cut short or too large to
    inflate."""
    from pydantic import ValidationError

    from ..published import parse

    text = inflated(blob)
    try:
        return None if text is None else parse(model, text)
    except (ValidationError, ValueError):
        return None


def stored(index: Index, crash_id: int, column: Column, model: type[Reading]) -> Reading | None:
    """The reading the index keeps in COLUMN of crash CRASH_ID; None where it keeps none (a
    crash of another kind, one recorded before the column was kept) or a damaged one."""
    row = index.backend.execute(f"SELECT {column} FROM crashes WHERE id = ?",  # noqa: S608 - a Column
                                (crash_id,)).fetchone()
    return None if row is None or row[0] is None else unpack(row[0], model)


def replace_hang(index: Index, crash_id: int, crash: NewCrash) -> None:
    """Within the caller's transaction: hang CRASH_ID, recorded before from the same capture,
    keeps CRASH's reading, summary and file sizes from now on, so that a capture recorded before
    its GPU dumps were in it is not left so. Only where CRASH signs the same hang: a crash keeps
    the signature it was recorded under, and the reading that goes with it."""
    if crash.hang is None:
        return
    db = index.backend
    row = db.execute("SELECT signature_hash FROM crashes WHERE id = ? AND kind = 'hang'",
                     (crash_id,)).fetchone()
    if row is None or row[0] != crash.signature.hash:
        return
    db.execute("UPDATE crashes SET hang = ?, summary = ?, total_bytes = ? WHERE id = ?",
               (pack(crash.hang), crash.summary, sum(f.size_bytes for f in crash.files),
                crash_id))
    for item in crash.files:
        db.execute("UPDATE crash_files SET size_bytes = ? WHERE crash_id = ? AND path = ?",
                   (item.size_bytes, crash_id, item.path))
