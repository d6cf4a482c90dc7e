"""crashlab's cuda-gdb command files, read as package data.

They live in the package (crashlab/gdb_scripts/) so that an installed wheel runs the same
debugger flow as a checkout; the source tree's top-level gdb_scripts/ points at them for use by
hand (``cuda-gdb -nx -x gdb_scripts/crashlab-session.gdb -ex "target cudacore core.nvcudmp"``).
"""

from __future__ import annotations

from importlib import resources

SESSION = "crashlab-session.gdb"
TRIAGE = "cudacore-triage.gdb"
FAULT = "cudacore-fault.gdb"


def commands(name: str) -> list[str]:
    """The commands of one command file, one per line, comments and blank lines left out."""
    text = (resources.files("crashlab") / "gdb_scripts" / name).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
