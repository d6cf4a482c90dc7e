"""Text kept from a capture's files: as it was written, but never longer than one line of a
report needs (a stranger's name or path may be a megabyte)."""

from __future__ import annotations

#: Longest text kept from a source file (a function, a file, a line): longer is cut, never refused.
TEXT_LIMIT = 300


def clipped(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "…"
