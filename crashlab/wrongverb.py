"""Which verb a file belongs to, judged from its first bytes: a verb handed another verb's file
(replay given a coredump, inspect given a pickle or a run directory) names the right one
instead of only saying what the file is not. Called on the refusal path only."""

from __future__ import annotations

import zlib
from pathlib import Path

from .coredump.constants import EM_CUDA, ELF_MAGIC, ET_CORE, GZIP_MAGIC
from .coredump.layouts import ELF_HEADER

#: The first opcode of a pickle of protocol 2 or later (SGLang writes 4 or 5).
PICKLE_PROTO = 0x80
_E_TYPE, _E_MACHINE = ELF_HEADER.by_name["type"], ELF_HEADER.by_name["machine"]


def for_replay(name: str, head: bytes) -> str | None:
    """The refusal replay gives a CUDA coredump (plain or gzip), None for anything else."""
    if head[:2] == GZIP_MAGIC:
        try:
            head = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(bytes(head[:4096]), 64)
        except zlib.error:
            return None
    if (len(head) >= _E_MACHINE.end and head[:4] == ELF_MAGIC
            and (_E_TYPE.read(head), _E_MACHINE.read(head)) == (ET_CORE, EM_CUDA)):
        return f"{name}: a CUDA coredump, not an SGLang crash dump: use crashlab inspect {name}"
    return None


def for_inspect(name: str, head: bytes) -> str | None:
    """The refusal inspect gives an SGLang crash dump (a pickle), None for anything else."""
    if len(head) >= 2 and head[0] == PICKLE_PROTO and 2 <= head[1] <= 5:
        return (f"{name}: an SGLang crash dump (a pickle), not a CUDA coredump: "
                f"use crashlab replay {name}")
    return None


def for_inspect_directory(name: str) -> str | None:
    """The refusal inspect gives a run directory of crashlab serve, None for other directories."""
    if not Path(name, "manifest.json").is_file():
        return None
    return (f"{name}: a crashlab serve run directory, not a coredump: its triage is "
            f"{Path(name, 'report.md')}; use crashlab inspect on a dump under "
            f"{Path(name, 'incarnation-*', 'cores')}")
