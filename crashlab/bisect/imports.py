"""Which copy of its package the server will run: a bisect whose server imports an installed
copy instead of the checkout (or a PYTHONPATH copy instead of the release) tests the same code
at every step and blames a commit by chance. Checked once, before the first replay, for a launch
of the form ``PYTHON -m package.module``, the way that server will start (same environment, same
working directory)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ..errors import BadInput

#: prints where a top-level package would be imported from, without importing it
_WHERE = ("import importlib.util, sys\n"
          "spec = importlib.util.find_spec(sys.argv[1])\n"
          "places = list(spec.submodule_search_locations or []) if spec else []\n"
          "print(spec.origin if spec and spec.origin else (places[0] if places else ''))")
_PYTHON = re.compile(r"python[0-9.]*\Z")


def served_package(launch: tuple[str, ...]) -> tuple[str, str] | None:
    """(interpreter, top-level package) of ``PYTHON -m package.module ...``; None otherwise."""
    if len(launch) >= 3 and launch[1] == "-m" and _PYTHON.match(Path(launch[0]).name):
        return launch[0], launch[2].split(".")[0]
    return None


def origin(python: str, package: str) -> Path | None:
    try:
        done = subprocess.run([python, "-c", _WHERE, package], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    where = done.stdout.strip()
    return Path(where).resolve() if done.returncode == 0 and where else None


def check(launch: tuple[str, ...], home: Path, what: str, advice: str) -> None:
    """BadInput when the launch's package resolves outside ``home`` (the checkout, or the
    release's environment): ``what`` names that home in the message, ``advice`` the way out."""
    served = served_package(launch)
    if served is None:
        return
    where = origin(*served)
    if where is not None and home.resolve() not in where.parents:
        raise BadInput(f"the server would import {served[1]} from {where}, not from {what}: every "
                       f"step would run the same code. {advice}")
