"""Text from outside crashlab (a dump, a pickle, a log, a prompt) made fit to show.

Every view passes such text through :func:`escape`: a control character (C0, DEL, C1), a byte
that was not UTF-8 (read with ``surrogateescape``), a bidirectional control (U+202A-202E,
U+2066-2069, U+200E, U+200F, U+061C) or any other character that does not print is written as
its backslash escape (``\\x1b``, ``\\u202e``), so that no stranger's text moves the cursor,
retitles the terminal, breaks a line, hides itself or reverses the text around it. Printable
text, non-ASCII included, is left as it is. The web view keeps line breaks and tabs
(:func:`escape_keeping_lines`).
:func:`surrogates_escaped` escapes the undecodable bytes alone, for text kept as it is otherwise;
:func:`cut_at_word` shortens a message without cutting a word.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: surrogateescape maps the undecodable byte 0xXY to U+DCXY (0x80 <= 0xXY <= 0xFF)
_SURROGATE_ESCAPES = range(0xDC80, 0xDD00)


def _escaped(char: str) -> str:
    if char.isprintable():
        return char
    code = ord(char)
    if code in _SURROGATE_ESCAPES:
        return f"\\x{code - 0xDC00:02x}"
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape(text: str) -> str:
    """``text`` on one line with every character that does not print escaped."""
    return text if text.isprintable() else "".join(map(_escaped, text))


def escape_keeping_lines(text: str) -> str:
    """``text`` with every character that does not print escaped as :func:`escape` does, but
    its line breaks (``\\n``) and tabs kept: for a web page, which lays them out as space (a
    ``<pre>`` as lines) and where, as on a terminal, a bidirectional control (U+202E) would
    reorder the page's own text and ESC or BEL hide in it."""
    if text.isprintable():
        return text
    return "".join(char if char in "\n\t" else _escaped(char) for char in text)


def printable(text: str, limit: int = 200) -> str:
    """Outside text fit for a one-line message: escaped, and cut at ``limit``."""
    shown = escape(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}…"


def cut_at_word(text: str, limit: int) -> str:
    """``text`` as it is where it has ``limit`` characters or fewer, else cut at the last space
    before ``limit`` (never inside a word; a first word longer than ``limit`` is cut at it) and
    ended with ``…``."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return f"{text[:cut].rstrip()} …" if cut > 0 else f"{text[:limit]}…"


def surrogates_escaped(text: str) -> str:
    """``text`` with each byte that was not UTF-8 (a surrogate escape) written as ``\\xNN`` and
    everything else kept, line breaks included: text that must stay valid Unicode to be written
    as JSON at all, but keep its shape (a multi-line table, a path)."""
    if text.isascii():
        return text
    return "".join(_escaped(char) if ord(char) in _SURROGATE_ESCAPES else char for char in text)
