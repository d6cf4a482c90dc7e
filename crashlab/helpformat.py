"""How every verb's --help is laid out. click wraps help with textwrap, which may end a line
after any hyphen inside a word: ``--restart-`` / ``cmd``, ``pip install nvidia-`` /
``cuda-nvdisasm``. Here a hyphen joins what it stands between, and a line ends between words.
"""

from __future__ import annotations

from collections.abc import Iterable

import click

#: U+2011, the non-breaking hyphen: one column like "-", and no place for textwrap to break.
_JOINED = "\u2011"


def _joined(text: str) -> str:
    return text.replace("-", _JOINED)


class HelpFormatter(click.HelpFormatter):
    """click's formatter, its hyphens held while it wraps and given back in what it wrote."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(_joined(prog), _joined(args), prefix)

    def write_text(self, text: str) -> None:
        super().write_text(_joined(text))

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30,
                 col_spacing: int = 2) -> None:
        super().write_dl([(_joined(term), _joined(text)) for term, text in rows], col_max,
                         col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(_JOINED, "-")


class HelpContext(click.Context):
    """The context of every crashlab command: its help laid out by HelpFormatter."""

    formatter_class = HelpFormatter
