"""Which verb reads a file another verb refused: a reader that is handed another verb's file
(replay given a coredump, inspect given a pickle or a run directory) says what the file is
(crashlab.errors.BadInput's kind), and the command line adds the verb that reads it, instead of
only saying what the file is not. The readers know files, not verbs; this knows the verbs."""

from __future__ import annotations

from pathlib import Path

from .errors import BadInput, CrashlabError
from .vocabulary import InputKind


def advice(kind: InputKind, name: str) -> str:
    """What to do with ``name``, a file of this kind."""
    if kind is InputKind.PICKLE:
        return f"use crashlab replay {name}"
    if kind is InputKind.COREDUMP:
        return f"use crashlab inspect {name}"
    return (f"its triage is {Path(name, 'report.md')}; use crashlab inspect on a dump under "
            f"{Path(name, 'incarnation-*', 'cores')}")


def advised(error: CrashlabError) -> str:
    """The error's one line, with the verb for its file where the reader said what the file is."""
    if isinstance(error, BadInput) and error.kind is not None and error.subject is not None:
        return f"{error}: {advice(error.kind, error.subject)}"
    return str(error)
