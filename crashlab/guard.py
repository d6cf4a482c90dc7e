"""How every crashlab command fails: one line on stderr and its exit code, never a traceback.

Dumps, pickles and logs come from strangers' bug reports, and a command's output may go to a
closed pipe or a full disk: whatever a verb runs into ends as one line. crashlab's own errors
(crashlab.errors) carry their exit code, and a refused file that is another verb's gets the verb
that reads it (crashlab.wrongverb); a bad option is bad input like any other (exit 2, not
click's usage block); anything else is a crashlab bug, said so in one line with exit 2
(``CRASHLAB_DEBUG=1`` shows its traceback instead). A reader that goes away (``| head -1``) ends
the output quietly and changes no exit code (crashlab.stdout).
"""

from __future__ import annotations

import os
import shutil
import sys

import click

from .errors import EXIT_BAD_INPUT, EXIT_FOUND, CrashlabError
from .escape import escape
from .helpformat import HelpContext
from .wrongverb import advised

#: What click raises to end a command on purpose (--help, a usage error, ctx.exit): its own.
_CLICK_ENDINGS = (click.exceptions.Exit, click.ClickException, click.Abort)


def say(message: str) -> None:
    """One line on stderr; names and messages from outside in it are escaped, never raw. On a
    terminal the line is folded to its width as every view's lines are (crashlab.wrap: at
    words, after a path's ``/``; the terminal itself would break it inside words), the lines
    after the first indented; into a pipe or a file it stays one line, for grep."""
    line = f"crashlab: {escape(message)}"
    if sys.stderr.isatty():
        from .wrap import fitted  # rich's cell widths: not for --help, which never says a line

        line = "\n".join(fitted(line, _columns(), indent=2))
    click.echo(line, err=True)


def _columns() -> int:
    """The width of the terminal stderr writes to; where it cannot say, COLUMNS or 80."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        columns = 0
    return columns or shutil.get_terminal_size().columns


def fail(message: str, code: int) -> None:
    say(message)
    sys.exit(code)


def guarded(subject: str | None, action):
    """``action()``; a failure is one line on stderr with its exit code, never a traceback.
    ``subject`` (the file a command reads, or the command) starts the line of a failure that is
    not one of crashlab's own errors."""
    try:
        return action()
    except BrokenPipeError:  # the reader went away (`| head`) from a write crashlab.stdout does
        # not guard (every view's is: a command runs on to its own exit code): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_FOUND)
    except CrashlabError as exc:
        fail(advised(exc), exc.exit_code)
    except _CLICK_ENDINGS:
        raise
    except MemoryError:
        fail(_about(subject, "ran out of memory"), EXIT_BAD_INPUT)
    except Exception as exc:  # the last guard: a stranger's file must never produce a traceback
        if os.environ.get("CRASHLAB_DEBUG"):
            raise
        fail(_about(subject, f"{type(exc).__name__}: {exc}; this is a crashlab bug, please "
                             "report it (CRASHLAB_DEBUG=1 shows the traceback)"), EXIT_BAD_INPUT)


def _about(subject: str | None, message: str) -> str:
    return f"{subject}: {message}" if subject else message


class _OneLineUsageError(click.UsageError):
    def show(self, file=None) -> None:
        say(self.format_message())


class _OneLineUsage(click.Command):
    """A bad option is bad input like any other: one line, exit 2, not click's usage block.
    The help is laid out by crashlab.helpformat (a line never ends inside a hyphenated name)."""

    context_class = HelpContext

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as problem:
            verb = f"{ctx.info_name}: " if ctx.parent is not None else ""
            raise _OneLineUsageError(verb + problem.format_message(), ctx) from None


class GuardedCommand(_OneLineUsage, click.Command):
    """A verb run inside the guard. ``subject`` names the parameter holding the file the verb
    reads, which starts the line of an unexpected failure (else the verb's name does)."""

    def __init__(self, *args, subject: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.subject = subject

    def get_short_help_str(self, limit: int = 45) -> str:
        """The docstring's whole first sentence: ``crashlab --help`` lists every verb with its
        line uncut (click would end it in "..." at 45 characters); the list wraps instead."""
        return super().get_short_help_str(limit=sys.maxsize)

    def invoke(self, ctx: click.Context):
        subject = ctx.params.get(self.subject) if self.subject else ctx.info_name
        if isinstance(subject, tuple):  # a verb of several files (dump-now RUN...)
            subject = ", ".join(map(str, subject)) or ctx.info_name
        return guarded(str(subject), lambda: super(GuardedCommand, self).invoke(ctx))


class GuardedGroup(_OneLineUsage, click.Group):
    """The ``crashlab`` group: its verbs are GuardedCommands, and what click itself prints
    (--help, --version, usage errors) runs inside the guard too."""

    command_class = GuardedCommand

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as problem:
            raise _OneLineUsageError(problem.format_message(), ctx) from None

    def main(self, *args, **kwargs):
        return guarded(None, lambda: super(GuardedGroup, self).main(*args, **kwargs))
