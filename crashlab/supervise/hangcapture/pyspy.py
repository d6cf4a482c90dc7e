"""``py-spy dump --native`` of one rank's process: its Python stack with the native frames under it.

py-spy attaches with ptrace and stops the process while it reads it (about a second for a
torch rank on a 2-core VM). Where the kernel refuses (Yama's ptrace_scope, no CAP_SYS_PTRACE in
a container; ``crashlab doctor`` says which), the row is "refused" with py-spy's own words.
py-spy is found on PATH, beside the server's Python (SGLang's environment installs it), or
beside crashlab's own (``pip install 'crashlab[hang]'``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...env.interpreter import launch_interpreter
from ...env.probe import run_tool
from ...hangs.layout import Source, SourceRecord, source_path
from .slot import Slot, first_line

NAME: Source = "py-spy"
MISSING = ("py-spy not found (on PATH, beside the server's Python or crashlab's): "
           "pip install 'crashlab[hang]'")
_REFUSALS = ("permission denied", "operation not permitted")


def find(command: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The py-spy a capture runs: on PATH, then beside the server's Python, then beside crashlab's."""
    found = shutil.which(NAME, path=environ.get("PATH"))
    if found:
        return found
    for python in (launch_interpreter(list(command), environ), sys.executable):
        candidate = Path(python).parent / NAME
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    return None


def dump(py_spy: str | None, pid: int, rank: int, slot: Slot,
         environ: Mapping[str, str]) -> SourceRecord:
    if py_spy is None:
        return slot.row(NAME, rank, "missing", MISSING)
    run = run_tool([py_spy, "dump", "--pid", str(pid), "--native"], timeout=slot.timeout,
                   environ=environ, search_path="", with_stderr=True)
    if run.status == "timeout":
        return slot.row(NAME, rank, "timeout", f"py-spy gave no stack within {slot.timeout:g} s")
    if run.status == "missing":
        return slot.row(NAME, rank, "missing", f"{py_spy} could not be started")
    if run.status == "failed":
        said = first_line(run.output.replace("Error: ", "", 1)) or f"exit code {run.exit_code}"
        refused = any(word in run.output.lower() for word in _REFUSALS)
        note = (f"ptrace refused ({said}); crashlab doctor says why" if refused else f"py-spy: {said}")
        return slot.row(NAME, rank, "refused" if refused else "failed", note)
    return slot.keep(NAME, rank, source_path(rank, slot.sample, NAME), run.output.encode())
