"""The console every terminal view prints through, and the only ways a view turns outside text
into Rich text.

Rich reads a ``str`` as markup (``[/bold]`` raises, ``[red]x[/red]`` is eaten, ``:smile:``
becomes an emoji) and passes control characters to the terminal. A view therefore builds text
from a dump, a pickle or a log with :func:`plain` or :func:`line` (escaped, never markup), and
prints on a :class:`ViewConsole`, where a stray ``str`` is not markup either, no line ends in
spaces and a reader that goes away (``| head -1``) is a ``BrokenPipeError`` for the command's
guard to end quietly, not Rich's exit 1.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.control import Control
from rich.segment import Segment
from rich.text import Text

from .escape import escape

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
    trailing spaces, 160 columns into a pipe, and a broken pipe raised, not exited on."""

    def __init__(self, **options):
        super().__init__(markup=False, emoji=False, highlight=False, **options)
        if "width" not in options and not self.is_terminal:
            self.width = PIPED_WIDTH

    def print(self, *objects, **options) -> None:
        super().print(*(o if isinstance(o, Control) else _Trimmed(o) for o in objects), **options)

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError
