"""A disk cache of nvdisasm listings, keyed by the sha256 of the rebased cubin, so that the second
inspect of the same kernel (in this dump or another one that loaded the same module) starts no
nvdisasm. Entries live under ``${XDG_CACHE_HOME:-~/.cache}/crashlab/sass/``; each is written to a
temporary file and renamed into place, so a reader never sees half an entry, and an entry that
does not parse (a crash mid-write on another filesystem, a hand edit) is ignored and rewritten.

An entry holds one listing per text section behind an index, so that an inspect decodes only the
functions it shows or explains (a PyTorch cubin holds 76,512 instructions in 12 functions; its
fault's window needs one of them). The first line is JSON: the format, nvdisasm's version, whether
the entry holds every text section (``whole``: one nvdisasm run over the cubin) or only those
asked for so far (a large cubin's, disassembled one section at a time), and the index (each
section's listing as [start, length] in bytes after that line); then each section's
listing, one JSON document: its files, its inline chains as [file, line] pairs of those files, and
its rows as [address, text, branch target or null, chain number or null]. Opcode, guard and
operands are not stored: an instruction decodes them from its text when asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cubin.lines import SourceLine
from .instruction import Instruction

#: bump when the stored shape or the way listings are made changes
FORMAT = 3


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crashlab" / "sass"


def _entry_path(key: str) -> Path:
    return cache_folder() / f"{key}.json"


class Entry:
    """One stored cubin's index; ``listing`` reads and decodes one section's rows."""

    def __init__(self, path: Path, body: int, index: dict[str, tuple[int, int]], whole: bool):
        self.path, self._body, self._index, self.whole = path, body, index, whole

    @property
    def sections(self) -> list[str]:
        return list(self._index)

    def listing(self, section: str) -> list[Instruction] | None:
        """The section's listing; None where the entry does not hold it or its part is damaged
        (the caller disassembles again and rewrites the entry)."""
        stored = self._part(section)
        try:
            return None if stored is None else _decode(json.loads(stored))
        except (ValueError, KeyError, TypeError, IndexError):
            return None

    def _part(self, section: str) -> bytes | None:
        """The stored JSON of the section's listing, undecoded."""
        where = self._index.get(section)
        if where is None:
            return None
        start, length = where
        try:
            with self.path.open("rb") as stream:
                stream.seek(self._body + start)
                return stream.read(length)
        except OSError:
            return None


def open_entry(key: str, tool: str) -> Entry | None:
    """The entry stored for ``key`` by the same nvdisasm version, else None."""
    path = _entry_path(key)
    try:
        with path.open("rb") as stream:
            header = json.loads(stream.readline())
            body = stream.tell()
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("tool") != tool:
        return None
    index, whole = header.get("index"), header.get("whole")
    if not isinstance(whole, bool) or not isinstance(index, dict) or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(n, int) for n in v)
            for v in index.values()):
        return None
    return Entry(path, body, {str(name): (start, length) for name, (start, length) in index.items()},
                 whole)


def store(key: str, tool: str, listings: dict[str, list[Instruction]], *, whole: bool = True,
          keep: Entry | None = None) -> None:
    """Write the entry atomically: ``listings``, every text section's where ``whole``, and the
    sections ``keep`` (the entry read before) holds besides. A cache that cannot be written is no
    error (the next inspect runs nvdisasm again)."""
    parts: dict[str, bytes] = {}
    for name in keep.sections if keep else []:
        stored = keep._part(name) if keep and name not in listings else None
        if stored is not None:
            parts[name] = stored
    parts.update((name, json.dumps(_encode(listing), separators=(",", ":")).encode())
                 for name, listing in listings.items())
    index, start = {}, 0
    for name, part in parts.items():
        index[name] = [start, len(part)]
        start += len(part)
    header = json.dumps({"format": FORMAT, "tool": tool, "whole": whole, "index": index}).encode() + b"\n"
    _write_atomically(_entry_path(key), b"".join([header, *parts.values()]))


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
    _write_atomically(entry, json.dumps(known).encode())
    return version


def _write_atomically(entry: Path, data: bytes) -> None:
    """Write ``data`` to ``entry`` through a temporary file and a rename; a folder that cannot
    be written is no error (the work is only done again next time)."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=entry.parent, prefix=f".{entry.stem}.", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, entry)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _encode(listing: list[Instruction]) -> dict[str, Any]:
    files: dict[str, int] = {}
    chains: dict[tuple[SourceLine, ...], int] = {}
    rows = []
    for ins in listing:
        chain = None
        if ins.source:
            chain = chains.setdefault(ins.source, len(chains))
            for line in ins.source:
                files.setdefault(line.file, len(files))
        rows.append([ins.address, ins.text, ins.target, chain])
    return {"files": list(files),
            "chains": [[[files[line.file], line.line] for line in chain] for chain in chains],
            "rows": rows}


def _decode(part: dict[str, Any]) -> list[Instruction]:
    files = [str(name) for name in part["files"]]
    chains = [tuple(SourceLine(files[f], int(n)) for f, n in chain) for chain in part["chains"]]
    return [Instruction(address=int(address), text=str(text),
                        target=None if target is None else int(target),
                        source=() if chain is None else chains[chain])
            for address, text, target, chain in part["rows"]]
