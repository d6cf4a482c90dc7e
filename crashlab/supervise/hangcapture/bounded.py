"""Writing a capture's files within its caps: each file at most ``per_file`` bytes, the whole
capture at most ``total``. A hung server's stacks can be enormous (a py-spy frame of a pybind
template runs to kilobytes, a Flight Recorder buffer of 2000 entries with stacks to megabytes),
and a capture must never fill the disk the next crash needs."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from .. import files


@dataclass(frozen=True)
class Written:
    size: int
    truncated_from: int | None = None


class Budget:
    """What a capture may still write, shared by its source threads."""

    def __init__(self, per_file: int, total: int):
        self.per_file = per_file
        self.total = total
        self._spent = 0
        self._lock = threading.Lock()

    def write(self, destination: Path, data: bytes, whole_size: int | None = None) -> Written | None:
        """DATA (cut at the per-file cap) written atomically to DESTINATION; None, writing
        nothing, where the capture's budget is spent. WHOLE_SIZE: the source's size where DATA
        is already a cut of it."""
        whole = len(data) if whole_size is None else whole_size
        kept = data[:self.per_file]
        with self._lock:
            if self._spent + len(kept) > self.total:
                return None
            self._spent += len(kept)
        destination.parent.mkdir(parents=True, exist_ok=True)
        files.write_atomic(destination, kept)
        return Written(len(kept), whole if whole > len(kept) else None)

    def read_file(self, source: Path) -> tuple[bytes, int]:
        """At most a file's worth of SOURCE, and SOURCE's whole size."""
        with open(source, "rb") as handle:
            data = handle.read(self.per_file)
            handle.seek(0, 2)
            return data, handle.tell()

    @property
    def spent(self) -> int:
        with self._lock:
            return self._spent
