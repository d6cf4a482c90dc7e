"""Recording as the verbs do it: a crash was caught or read, and the index is a by-product, so an
index that cannot be opened or written costs one warning line, never the verb's result."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from .location import first_line, resolve, shown
from .records import NewCrash
from .store import Index


def record_all(crashes: Iterable[NewCrash] | Callable[[], Iterable[NewCrash]], db: str | None,
               runs_dir: Path, warn: Callable[[str], None]) -> int:
    """Record the crashes (or what the callable makes: building them reads files and computes
    signatures, which may fail too); the number newly recorded. Any failure is one warning."""
    address = resolve(db, runs_dir)
    try:
        made = list(crashes() if callable(crashes) else crashes)
        if not made:
            return 0
        with Index(address) as index:
            return sum(index.record(crash)[1] for crash in made)
    except Exception as exc:  # noqa: BLE001 - the verb's own result must stand whatever happens
        warn(f"warning: the crash was not recorded in the index {shown(address)}: "
             f"{first_line(exc, address)}")
        return 0
