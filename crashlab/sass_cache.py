"""A disk cache of nvdisasm listings, keyed by the sha256 of the rebased cubin, so that the second
inspect of the same kernel (in this dump or another one that loaded the same module) starts no
nvdisasm. Entries live under ``${XDG_CACHE_HOME:-~/.cache}/crashlab/sass/``; each is written to a
temporary file and renamed into place, so a reader never sees half an entry, and an entry that
does not parse (a crash mid-write on another filesystem, a hand edit) is ignored and rewritten.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .lineinfo import SourceLine

#: one stored instruction, as JSON gives it back
Row = dict[str, Any]
Made = TypeVar("Made")


class Listed(Protocol):
    """What :func:`encode` reads of an instruction (crashlab.sass.Instruction: sass imports
    this module, not the other way round)."""

    @property
    def address(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def opcode(self) -> str: ...
    @property
    def predicate(self) -> str | None: ...
    @property
    def operands(self) -> tuple[str, ...]: ...
    @property
    def target(self) -> int | None: ...
    @property
    def source(self) -> tuple[SourceLine, ...]: ...

#: bump when the stored shape or the way listings are made changes
FORMAT = 1


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crashlab" / "sass"


def _entry(key: str) -> Path:
    return cache_folder() / f"{key}.json"


def load(key: str, tool: str) -> dict[str, list[Row]] | None:
    """The listings stored for ``key`` by the same nvdisasm version, else None."""
    try:
        stored = json.loads(_entry(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT or stored.get("tool") != tool:
        return None
    listings = stored.get("listings")
    return listings if isinstance(listings, dict) else None


def store(key: str, tool: str, listings: dict[str, list[Row]]) -> None:
    """Write the entry atomically; a cache that cannot be written is no error (the next inspect
    runs nvdisasm again)."""
    _write_atomically(_entry(key), {"format": FORMAT, "tool": tool, "listings": listings})


def tool_version(path: str, query: Callable[[], str]) -> str:
    """nvdisasm's version, asked once per binary (its real path, size and mtime) and kept beside
    the listings, so that a warm inspect starts no nvdisasm at all, not even ``--version``."""
    try:
        found = os.stat(path)
    except OSError:
        return query()
    identity = f"{os.path.realpath(path)}|{found.st_size}|{found.st_mtime_ns}"
    entry = cache_folder().parent / "nvdisasm-versions.json"
    try:
        known = json.loads(entry.read_text())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    remembered = known.get(identity)
    if isinstance(remembered, str):
        return remembered
    version = known[identity] = query()
    _write_atomically(entry, known)
    return version


def _write_atomically(entry: Path, value: object) -> None:
    """Write ``value`` as JSON to ``entry`` through a temporary file and a rename; a folder that
    cannot be written is no error (the work is only done again next time)."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=entry.parent, prefix=f".{entry.stem}.", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(value, stream)
        os.replace(temporary, entry)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def encode(instruction: Listed) -> Row:
    return {"address": instruction.address, "text": instruction.text, "opcode": instruction.opcode,
            "predicate": instruction.predicate, "operands": list(instruction.operands),
            "target": instruction.target,
            "source": [[s.file, s.line] for s in instruction.source]}


def decode(row: Row, make: Callable[..., Made]) -> Made:
    """One stored instruction, through ``make`` (crashlab.sass.Instruction)."""
    return make(address=int(row["address"]), text=str(row["text"]), opcode=str(row["opcode"]),
                predicate=row["predicate"], operands=tuple(map(str, row["operands"])),
                target=row["target"],
                source=tuple(SourceLine(str(f), int(n)) for f, n in row["source"]))
