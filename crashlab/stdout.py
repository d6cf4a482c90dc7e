"""Standard output whose reader may go away: ``crashlab inspect HANG | head -1`` ends the
command with the exit code a plain run gives (docs/command-line.md), not with a broken pipe's.

What is written after the reader left goes to /dev/null (:func:`reader_gone`) and the command
runs on to its own end and exit code. The views' console (:class:`crashlab.console.ViewConsole`)
does the same; :func:`echo` (a JSON or Markdown document) and :func:`write` (a view's plain rows)
are the other ways out. Nothing here imports Rich: ``crashlab list --json`` does not need it.
"""

from __future__ import annotations

import os
import sys
from typing import IO

import click


def reader_gone(stream: IO[str] | None = None) -> None:
    """The reader of ``stream`` (standard output) went away: the rest of the output goes to
    /dev/null, what was buffered for the pipe included, and the command goes on."""
    stream = stream or sys.stdout
    try:
        number = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file: nothing reads it to go away
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, number)
    os.close(devnull)


def echo(text: str, nl: bool = True) -> None:
    """``text`` on standard output (click.echo), flushed; a reader that went away is no error
    (:func:`reader_gone`)."""
    try:
        click.echo(text, nl=nl)
    except BrokenPipeError:
        reader_gone()


def write(stream: IO[str], text: str) -> None:
    """``text`` written to ``stream`` as it is (a view's plain rows, thousands of them, not laid
    out by Rich); a reader that went away is no error (:func:`reader_gone`)."""
    try:
        stream.write(text)
    except BrokenPipeError:
        reader_gone(stream)
