"""Where a line of text may break, and text broken into lines of a width: the one wrapper every
view uses (inspect's names and paths, the index's lines, replay's rows and results, doctor's
messages, a line on stderr). :class:`crashlab.console.Folded` lays Rich text out by it.

A line may end after a space, ``::``, ``/``, a ``(`` that follows a name (``f(``, not `` (``),
a comma not followed by a digit (``561,378 bytes`` and ``(8,1,1)`` stay whole), a ``<`` that
opens a template (``vector<``, not ``<unavailable>`` nor ``<<``) or a dot inside a Python module
path (``sglang.srt.layers``, not ``ISETP.NE.AND`` nor ``fused_moe.py``); never inside a word, a
number or an identifier, nor between a word and the number it names (``lane 0``, ``SM 127``,
``warp 6``: one space between letters and a digit holds them together). A piece wider than a whole line is cut at the width, the last resort.
Lines after the first are indented (a hanging indent, under the text they continue) and start at
their first word.
"""

from __future__ import annotations

import re

from rich.cells import cell_len

from .escape import escape

_SPACES = re.compile(r"\s+")
#: One space between a word and the number it names (``lane 0``): not a place to break.
_NAMED_NUMBER = re.compile(r"(?<=[A-Za-z]) (?=\d)")
_BREAK = re.compile(r"(?:::|,(?!\d)|(?<=\w)<|(?<=\S)\(|/|\.(?=[a-z_][a-z0-9_]*\.)|\s)+")
#: Below this many columns for the text, a hanging indent is cut to NARROW_INDENT.
MIN_ROOM = 30
NARROW_INDENT = 4


def break_points(text: str) -> list[int]:
    """Offsets at which a line of ``text`` may end, the last one its length."""
    points = {m.end() for pattern in (_BREAK, _SPACES) for m in pattern.finditer(text)}
    points -= _held(text)
    return sorted(point for point in points if 0 < point < len(text)) + [len(text)]


def _held(text: str) -> set[int]:
    """Ends of the spaces that hold a word to its number."""
    return {m.end() for m in _NAMED_NUMBER.finditer(text)}


def _word_ends(text: str) -> list[int]:
    """Where each word of ``text`` ends with the spaces after it (``lane 0`` one word), the
    last one its length."""
    held = _held(text)
    return [m.end() for m in _SPACES.finditer(text)
            if 0 < m.end() < len(text) and m.end() not in held] + [len(text)]


def hanging(width: int, indent: int) -> int:
    """The indent lines after the first get: ``indent`` where it leaves MIN_ROOM columns,
    else at most NARROW_INDENT, and none where the width has no room for it."""
    if width - indent >= MIN_ROOM:
        return indent
    return min(indent, NARROW_INDENT) if width > 2 * NARROW_INDENT else 0


def spans(text: str, width: int, indent: int = 0) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text`` (one line of it: no line break in it): the first at
    most ``width`` cells, the others at most ``width - hanging(width, indent)``, trailing spaces
    left out of each and leading spaces out of every line after the first. Lines break between
    words; a word (what lies between spaces) too wide for a line of its own breaks at its other
    points, packed from where the line stands."""
    indent = hanging(width, indent)
    points = break_points(text)
    lines: list[tuple[int, int]] = []
    start = end = 0

    def room() -> int:
        return max(width - (indent if lines else 0), 1)

    def fits(a: int, b: int) -> bool:
        return cell_len(text[a:b].rstrip()) <= room()

    def next_line(at: int) -> int:
        lines.append((start, len(text[start:at].rstrip()) + start))
        while at < len(text) and text[at].isspace():
            at += 1
        return at

    def pieces(until: int) -> None:
        """The pieces of a word too wide for a line, packed greedily; cut where one is."""
        nonlocal start, end
        for point in (p for p in points if end < p <= until):
            if not fits(start, point) and text[start:end].strip():
                start = end = next_line(end)
            while not fits(start, point):  # one piece wider than a line: cut, the last resort
                cut = start + 1
                while cut < point and cell_len(text[start:cut + 1]) <= room():
                    cut += 1
                start = end = next_line(cut)
            end = max(point, start)

    for word in _word_ends(text):
        if fits(start, word):
            end = word
        elif text[start:end].strip() and cell_len(text[end:word].strip()) <= width - indent:
            start = next_line(end)  # the word fits on a line of its own
            end = max(word, start)
        else:
            pieces(word)
    lines.append((start, len(text[start:end].rstrip()) + start))
    return lines


def fitted(text: str, width: int, indent: int = 0) -> list[str]:
    """``text`` escaped (:func:`crashlab.escape.escape`: one line) as lines at most ``width``
    cells wide, each after the first indented by ``indent`` spaces (:func:`hanging`)."""
    text = escape(text)
    pad = " " * hanging(width, indent)
    return [(pad if number else "") + text[a:b]
            for number, (a, b) in enumerate(spans(text, width, indent))]
