"""The errors crashlab reports to a user, each carrying the exit code of DESIGN.md.

Anything raised as one of these is shown as one line on stderr; anything else is a crashlab bug.
"""

from __future__ import annotations


class CrashlabError(Exception):
    exit_code = 2


class BadInput(CrashlabError):
    """The user's file or arguments cannot be used (exit 2)."""

    exit_code = 2


class CoreFormatError(BadInput):
    """A coredump that does not follow the format: damaged, truncated, or not a coredump."""


class EnvironmentProblem(CrashlabError):
    """A tool or resource crashlab needs is missing (exit 3)."""

    exit_code = 3
