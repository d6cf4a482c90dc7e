"""``crashlab list --json`` as a stream: each crash's JSON object is made by the index's database
(SQLite's json_object, PostgreSQL's row_to_json) from the fields store.LISTED names and
written as it is read, a batch at a time, one crash per line. Making 100,000 pydantic Crash
objects to dump them took seconds; the document is the same CrashList (``crashlab schema
crash-list``), which the tests check row by row against the model's own dump."""

from __future__ import annotations

import json
from typing import BinaryIO

from ..version import __version__
from .store import Filters, Index


def write_crash_list(index: Index, filters: Filters, out: BinaryIO) -> None:
    """The CrashList of FILTERS' crashes, newest first, as UTF-8 JSON on OUT."""
    head = json.dumps({"schema_version": 1, "tool": {"name": "crashlab", "version": __version__},
                       "index": index.address})
    out.write(f'{head[:-1]}, "crashes": ['.encode())
    separator = "\n"
    for batch in index.listed(filters, as_json=True):
        out.write((separator + ",\n".join(row[0] for row in batch)).encode())
        separator = ",\n"
    out.write(b"\n]}\n")
