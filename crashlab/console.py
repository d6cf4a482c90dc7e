"""The console every terminal view prints through, and the only ways a view turns outside text
into Rich text.

Rich reads a ``str`` as markup (``[/bold]`` raises, ``[red]x[/red]`` is eaten, ``:smile:``
becomes an emoji) and passes control characters to the terminal. A view therefore builds text
from a dump, a pickle or a log with :func:`plain` or :func:`line` (escaped, never markup), and
prints on a :class:`ViewConsole`, where a stray ``str`` is not markup either and no line ends in
spaces.

A reader that goes away (``| head -1``, ``| true``) changes neither what the command does nor
its exit code: on the console, as through :mod:`crashlab.stdout`'s ``echo`` and ``write``, what is
written after it left goes to /dev/null (not Rich's exit 1), and the command runs on to its own
end.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.control import Control
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

from . import wrap
from .escape import escape
from .stdout import reader_gone

#: Into a pipe or file rich would assume 80 columns; SASS and tables read better unwrapped.
PIPED_WIDTH = 160


def plain(text: str, style: str = "") -> Text:
    """Outside text as Rich text: escaped, never markup."""
    return Text(escape(text), style=style)


def line(*parts: str | tuple[str, str]) -> Text:
    """One line of parts, each ``text`` or ``(text, style)``; every text is plain data."""
    out = Text()
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        out.append(escape(text), style=style)
    return out


class Folded:
    """Rich text laid out by :mod:`crashlab.wrap`, the one wrapper of every view: broken where a
    line may end (never inside a word, a number or an identifier), the lines after the first
    indented by ``indent``. Tables measure it by its longest piece."""

    def __init__(self, value: Text, indent: int = 0):
        self.value = value
        self.indent = indent
        self._bounds: tuple[int, int] | None = None

    def _paragraphs(self) -> list[Text]:
        if "\n" not in self.value.plain:
            return [self.value]
        return list(self.value.split("\n", allow_blank=True))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(*self.bounds()).clamp(max_width=options.max_width)

    def bounds(self) -> tuple[int, int]:
        """(longest piece, with the indent where it wraps; whole width): a table measures each
        cell more than once, at every width it tries, and the pieces do not change."""
        if self._bounds is None:
            paragraphs = [part.plain for part in self._paragraphs()]
            whole = max(map(cell_len, paragraphs), default=0)
            pieces = []
            for part in paragraphs:
                points = wrap.break_points(part)
                pieces += [cell_len(part[a:b].rstrip())
                           for a, b in zip([0, *points[:-1]], points, strict=True)]
            longest = max(pieces, default=0) + (self.indent if len(pieces) > 1 else 0)
            self._bounds = (min(longest, whole), whole)
        return self._bounds

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        pad = " " * wrap.hanging(width, self.indent)
        for part in self._paragraphs():
            for number, (start, end) in enumerate(wrap.spans(part.plain, width, self.indent)):
                row = part[start:end]
                if number:
                    row = Text(pad) + row
                row.end, row.overflow = "\n", "fold"
                yield row


def wrapped(value: Text, indent: int = 0) -> Folded:
    """Rich text (made by :func:`plain` or :func:`line`) as every view wraps it: see Folded."""
    return Folded(value, indent)


class _Trimmed:
    """A renderable laid out as usual, with the spaces Rich pads its lines with taken off."""

    def __init__(self, renderable: RenderableType):
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        inner = self.renderable
        if isinstance(inner, str):
            inner = console.render_str(inner)
        for row in Segment.split_lines(console.render(inner, options)):
            while row and not row[-1].control and not row[-1].text.rstrip():
                row.pop()
            if row and not row[-1].control:
                last = row.pop()
                row.append(Segment(last.text.rstrip(), last.style))
            yield from row
            yield Segment.line()


class ViewConsole(Console):
    """A Rich console for crashlab's views: no markup, emoji or highlighting in any ``str``, no
    trailing spaces, 160 columns into a pipe; a reader that goes away silences it, and the
    command goes on (:func:`reader_gone`)."""

    def __init__(self, **options):
        super().__init__(markup=False, emoji=False, highlight=False, **options)
        if "width" not in options and not self.is_terminal:
            self.width = PIPED_WIDTH

    def print(self, *objects, **options) -> None:
        super().print(*(o if isinstance(o, Control) else _Trimmed(o) for o in objects), **options)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        reader_gone(self.file)
