"""The errors crashlab reports to a user, and the exit codes of every command.

Anything raised as one of these is shown as one line on stderr; anything else is a crashlab bug.
"""

from __future__ import annotations

from .vocabulary import InputKind

#: The job was done and found what it looks for: a fault, a reproduction, a crash caught.
EXIT_FOUND = 0
#: The job was done and found nothing: a dump with no exception, a replay that did not crash.
EXIT_NOTHING = 1
#: Bad input or usage (one line on stderr); also what a crashlab bug ends with.
EXIT_BAD_INPUT = 2
#: An environment problem: a tool missing, a server unreachable.
EXIT_ENVIRONMENT = 3


class CrashlabError(Exception):
    exit_code = EXIT_BAD_INPUT


class BadInput(CrashlabError):
    """The user's file or arguments cannot be used (exit 2).

    ``kind`` says what a refused file is when it is another verb's (a reader knows files, not
    verbs): the command line turns it into advice naming the verb for ``subject``, the file as
    the message names it (crashlab.wrongverb)."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, kind: InputKind | None = None, subject: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.subject = subject


class CoreFormatError(BadInput):
    """A coredump that does not follow the format: damaged, truncated, or not a coredump."""


class EnvironmentProblem(CrashlabError):
    """A tool or resource crashlab needs is missing (exit 3)."""

    exit_code = EXIT_ENVIRONMENT
