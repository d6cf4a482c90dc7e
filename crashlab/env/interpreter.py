"""Which Python's packages describe a server, and what that Python says its path is.

The interpreter that serves is often not crashlab's own (crashlab from pipx, SGLang in a venv),
so its packages are read from the site folders it reports, asked with nothing imported but
``sys`` and ``json``: importing torch there could initialise CUDA.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .probe import ToolRun, run_tool

ASK = "import sys,json;print(json.dumps([sys.version,sys.executable,sys.path]))"
_PYTHON_NAME = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)*)?$")
#: pip's launcher for an interpreter path too long for a shebang: ``#!/bin/sh`` and then
#: ``'''exec' "/very/long/venv/bin/python" "$0" "$@"`` (distlib's ScriptMaker)
_SH_EXEC = re.compile(r"""^'''exec' "?(?P<python>[^"\s]+)"?""", re.M)


def is_python(program: str) -> bool:
    return bool(_PYTHON_NAME.match(Path(program).name))


def launch_interpreter(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """The Python that ``argv`` runs: argv[0] when it is a python, the interpreter named by the
    shebang of a console script (``sglang``, ``torchrun``), else crashlab's own."""
    program = shutil.which(argv[0], path=environ.get("PATH")) if argv else None
    if program is None:
        return sys.executable
    if is_python(program):
        return program
    return _shebang_python(Path(program), environ) or sys.executable


def _shebang_python(script: Path, environ: Mapping[str, str]) -> str | None:
    try:
        with open(script, "rb") as handle:
            head = handle.read(1024).decode("utf-8", "replace")
    except OSError:
        return None
    if not head.startswith("#!"):
        return None
    words = head[2:].splitlines()[0].split()
    if words and Path(words[0]).name == "env":
        words = [word for word in words[1:] if not word.startswith("-")]
        found = shutil.which(words[0], path=environ.get("PATH")) if words else None
        return found if found and is_python(found) else None
    if words and is_python(words[0]):
        return words[0]
    launcher = _SH_EXEC.search(head)
    return launcher["python"] if launcher and is_python(launcher["python"]) else None


@dataclass(frozen=True)
class Answer:
    run: ToolRun
    version: str | None = None
    executable: str | None = None
    path: tuple[str, ...] = ()


def ask(python: str, environ: Mapping[str, str], timeout: float) -> Answer:
    """``python``'s version, executable and sys.path, as it reports them under ``environ``."""
    run = run_tool([python, "-c", ASK], timeout=timeout, environ=environ)
    if not run.ok:
        return Answer(run)
    try:
        version, executable, path = json.loads(run.output)
        if not (isinstance(path, list) and all(isinstance(item, str) for item in path)):
            raise ValueError
    except (ValueError, TypeError):
        return Answer(ToolRun("failed", run.output, run.seconds, run.exit_code))
    return Answer(run, str(version), str(executable), tuple(path))
