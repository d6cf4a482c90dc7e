"""Outside text (a dump's, a log's, a command line's) in a GitHub Markdown body, shown as itself.

Each place in Markdown has its own rules, so each has its own function: running text
(:func:`inline`), a code span (:func:`code`), a table cell (:func:`cell`, around either), a
fenced block (:func:`fenced`) and HTML such as a ``<summary>`` (:func:`html`). All of them first
escape what does not print (:func:`crashlab.escape.escape`). :func:`join` makes the body and
takes trailing spaces off every line.

GitHub turns more than Markdown into links: ``@user`` (a mention: the user is notified),
``#123``, ``owner/repo#123`` and ``GH-123`` (issue references), ``:shortcode:`` (emoji), and
cmark-gfm's autolinks (``https://``, ``www.``, e-mail addresses). A backslash or an entity
(``\\@``, ``&#64;``) does not stop the first three: GitHub finds them in the rendered HTML's
text, after those are decoded (cmark-gfm issue 181, markup issue 1168). An empty HTML comment
does, everywhere: it splits the text where GitHub and cmark-gfm look for them and renders as
nothing, so the reader sees the text unchanged (:func:`_pieces`). Code spans and fenced
blocks are left alone: GitHub links nothing inside ``<code>`` and ``<pre>``.
"""

from __future__ import annotations

import html as _html
import re

from ..escape import escape

#: Characters that can start markup anywhere in a line: escapes, code, emphasis, links, HTML,
#: entities, strikethrough, GitHub's math, a heading's closing #s. ``_`` between two letters or
#: digits starts nothing.
_SPECIAL = re.compile(r"[\\`*_\[\]<>&~$#]")
#: What makes a line a list item, a rule or a heading's underline when it starts the line: a
#: marker before a space or the end, or a line of only ``-`` or ``=`` (``580.65`` starts nothing).
#: Text that starts with a space starts nothing: its first space is written ``&#32;``, which
#: also keeps four spaces after a list marker from making a code block.
_LINE_START = re.compile(r"^(?:([-+])(?=[ ]|$)|([-=])(?=[-= ]*$)|(\d{1,9})([.)])(?=[ ]|$))")
_BACKTICKS = re.compile(r"`+")
#: The name of an emoji GitHub could show for ``:name:``: its shortcodes (gemoji's aliases) are
#: ``[a-z0-9_+-]`` with a letter in each but four, ``100``, ``1234``, ``+1`` and ``-1``. So a
#: time (``20:57:44``) or a number between colons is not one, and is left as it is.
_SHORTCODE = r"(?:[0-9_+-]*[A-Za-z][0-9A-Za-z_+-]*|100|1234|[+-]1):"
#: Where GitHub or cmark-gfm would start a link, at the character a break goes after: an ``@``
#: before a character a user name or a mail domain can start with (mentions, e-mail addresses:
#: cmark-gfm links ``a@.b``; ``@!P0``, a SASS guard, can be neither), ``#`` before a digit and ``GH``
#: before ``-digit`` (issue references), ``:`` before a shortcode and ``:`` (emoji) or ``//``
#: (URLs), the first ``w`` of ``www.``.
_GITHUB_LINK = re.compile(rf"@(?=[0-9A-Za-z._-])|#(?=\d)|(?i:gh)(?=-\d)|:(?={_SHORTCODE}|//)|(?i:w)(?=ww\.)")
#: Renders as nothing, and splits the text around it.
_BREAK = "<!-- -->"
#: What Markdown reads inside inline HTML (a ``<sub>`` in a paragraph), written as entities there.
_HTML_MARKDOWN = re.compile(r"[\\`*_\[\]~$|]")


def _intraword_underscore(match: re.Match) -> bool:
    char, text, at = match.group(), match.string, match.start()
    return char == "_" and 0 < at < len(text) - 1 and text[at - 1].isalnum() and text[at + 1].isalnum()


def _backslashed(match: re.Match) -> str:
    return match.group() if _intraword_underscore(match) else "\\" + match.group()


def _entity(match: re.Match) -> str:
    return match.group() if _intraword_underscore(match) else f"&#x{ord(match.group()):X};"


def _line_start(match: re.Match) -> str:
    marker, rule, number, delimiter = match.groups()
    return f"{number}\\{delimiter}" if number else f"\\{marker or rule}"


def _pieces(text: str) -> list[str]:
    """``text``, escaped, cut after each place GitHub would start a mention, an issue reference,
    an emoji or a link; the pieces are joined with a break once written for where they stand.
    Every piece but the last ends in one of ``@#hH:w``, so a line-start marker followed by the
    end of the first piece is one followed by the end of the text."""
    shown = escape(text)
    cuts = [match.end() for match in _GITHUB_LINK.finditer(shown)]
    return [shown[start:end] for start, end in zip([0, *cuts], [*cuts, len(shown)], strict=True)]


def inline(text: str) -> str:
    """Markdown whose rendering is ``text``, in a paragraph, list item, heading or cell."""
    pieces = [_SPECIAL.sub(_backslashed, piece) for piece in _pieces(text)]
    pieces[0] = _LINE_START.sub(_line_start, pieces[0])
    shown = _BREAK.join(pieces)
    return "&#32;" + shown[1:] if shown.startswith(" ") else shown


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
    """``text`` inside HTML: an HTML block's (a ``<summary>``), where Markdown is not read, or
    inline HTML's in a paragraph (a ``<sub>``), where it is: what Markdown reads is written as
    hexadecimal entities (``&#x5C;``: a decimal one would start an issue reference)."""
    return _BREAK.join(_HTML_MARKDOWN.sub(_entity, _html.escape(piece)) for piece in _pieces(text))


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
