"""Outside text (a dump's, a log's, a command line's) in a GitHub Markdown body, shown as itself.

Each place in Markdown has its own rules, so each has its own function: running text
(:func:`inline`), a code span (:func:`code`), a table cell (:func:`cell`, around either), a
fenced block (:func:`fenced`) and HTML such as a ``<summary>`` (:func:`html`). All of them first
escape what does not print (:func:`crashlab.escape.escape`). :func:`join` makes the body and
takes trailing spaces off every line.
"""

from __future__ import annotations

import html as _html
import re

from ..escape import escape

#: Characters that can start markup anywhere in a line: escapes, code, emphasis, links, HTML,
#: entities, strikethrough, GitHub's math, a heading's closing #s. ``_`` between two letters or
#: digits starts nothing.
_SPECIAL = re.compile(r"[\\`*_\[\]<>&~$#]")
#: What makes a line a quote's, list item's or rule's when it starts the line.
_LINE_START = re.compile(r"^(\s*)(?:([+=-])|(\d{1,9})([.)]))")
_BACKTICKS = re.compile(r"`+")


def _backslashed(match: re.Match) -> str:
    char, text, at = match.group(), match.string, match.start()
    if char == "_" and 0 < at < len(text) - 1 and text[at - 1].isalnum() and text[at + 1].isalnum():
        return char
    return "\\" + char


def inline(text: str) -> str:
    """Markdown whose rendering is ``text``, in a paragraph, list item, heading or cell."""
    shown = _SPECIAL.sub(_backslashed, escape(text))
    return _LINE_START.sub(lambda m: m.group(1) + (f"\\{m.group(2)}" if m.group(2) else
                                                   f"{m.group(3)}\\{m.group(4)}"), shown)


def code(text: str) -> str:
    """A code span holding ``text``: its fence is longer than any run of backticks inside, and
    padded where the text starts or ends with a backtick or a space (the renderer takes one
    space off each side)."""
    shown = escape(text)
    if not shown:
        return ""
    fence = "`" * (max(map(len, _BACKTICKS.findall(shown)), default=0) + 1)
    pad = " " if shown[0] in "` " or shown[-1] in "` " else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def cell(markdown: str) -> str:
    """Inline Markdown (from :func:`inline` or :func:`code`) fit for a table cell: a pipe, even
    inside a code span, would end the cell."""
    return markdown.replace("|", "\\|")


def fenced(lines: list[str], indent: str = "") -> list[str]:
    """A fenced code block of ``lines``, its fence longer than any run of backticks in them."""
    shown = [escape(line) for line in lines]
    longest = max((len(run) for line in shown for run in _BACKTICKS.findall(line)), default=0)
    fence = indent + "`" * max(3, longest + 1)
    return [fence, *(indent + line for line in shown), fence]


def html(text: str) -> str:
    """``text`` inside HTML (a ``<summary>``, a ``<code>``, a ``<sub>``)."""
    return _html.escape(escape(text))


CUT_NOTE = "\n\n_(cut here to fit GitHub's 65,536-character limit; see report.json)_\n"


def cut_to(body: str, limit: int) -> str:
    """``body`` in at most ``limit`` characters: whole lines, then a note saying it was cut (a
    cut inside a line could end it in spaces, or inside a code span or a table row)."""
    if len(body) <= limit:
        return body
    room = max(limit - len(CUT_NOTE), 0)
    end = body.rfind("\n", 0, room + 1)
    return body[: end if end > 0 else room].rstrip() + CUT_NOTE


def join(lines: list[str]) -> str:
    """The body: one line per item, no trailing spaces, a final newline."""
    return re.sub(r"[ \t]+$", "", "\n".join(lines), flags=re.MULTILINE) + "\n"
