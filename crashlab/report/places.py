"""The places every part of the triage model points at: addresses, 3D indices, source lines.

Its own module so that the fault, explanation and debugger models can share them without
importing one another (crashlab.report.model assembles them into TriageReport).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..published import ClosedModel as _Model

Dim3 = tuple[int, int, int]
#: A code or data address: '0x' and hex digits, never a JSON number (which loses bits past 2**53).
HexAddress = Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]+$")]


class SourceLine(_Model):
    """One source position of an instruction, from the cubin's line table (.debug_line, in a
    cubin built with -lineinfo or -G)."""

    file: str
    """The source file as the compiler recorded it (often an absolute path on the build
    machine)."""
    line: int
    """1-based line number in that file."""
