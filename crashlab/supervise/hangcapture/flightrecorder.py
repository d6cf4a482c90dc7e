"""A Flight Recorder dump of every rank, through PyTorch's own pipe.

PyTorch's NCCL heartbeat monitor makes ``<TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe`` and reads
it about once a second; a byte written there makes it write its buffer (a pickle) to
``<TORCH_FR_DUMP_TEMP_FILE><rank>`` and go on, the process untouched. Every rank's pipe is written
at once, then each dump file is waited for (newer than the trigger, not empty, its size settled)
and copied into the capture, since the next dump overwrites it.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ...hangs.layout import Source, SourceRecord, source_path
from ..hangsources import (
    FR_FILE,
    FR_FILE_BEFORE_2_8,
    FR_PIPE,
    FR_PIPE_SUFFIX,
)
from ..manifest import EnvironmentEntry
from .slot import Slot

NAME: Source = "flight-recorder"
POLL = 0.1


@dataclass(frozen=True)
class Places:
    """Where a run's Flight Recorder pipes and dumps are (absolute prefixes; None: not set up)."""

    pipe_stem: str | None
    dump_prefix: str | None

    @classmethod
    def of(cls, environment: dict[str, EnvironmentEntry], cwd: str) -> Places:
        def absolute(*names: str) -> str | None:
            value = next((environment[name].value for name in names if name in environment), None)
            return str(Path(cwd) / value) if value else None
        return cls(absolute(FR_PIPE), absolute(FR_FILE, FR_FILE_BEFORE_2_8))

    def pipe(self, rank: int) -> str | None:
        return f"{self.pipe_stem}{rank}{FR_PIPE_SUFFIX}" if self.pipe_stem else None

    def dump(self, rank: int) -> str | None:
        return f"{self.dump_prefix}{rank}" if self.dump_prefix else None


def suffix(data: bytes) -> str:
    """The suffix PyTorch's format asks for: .pkl for its pickles, .json for its JSON dumps."""
    if data[:1] == b"\x80":
        return ".pkl"
    return ".json" if data.lstrip()[:1] == b"{" else ""


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _poke(pipe: str) -> str | None:
    """Write a byte to PIPE; why it could not be, or None."""
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return ("no Flight Recorder pipe: PyTorch makes one only for an NCCL process group "
                    "with a buffer (TORCH_FR_BUFFER_SIZE > 0)")
        if exc.errno == errno.ENXIO:
            return "the Flight Recorder pipe has no reader (its heartbeat monitor has stopped)"
        return f"the Flight Recorder pipe cannot be opened ({exc.strerror})"
    try:
        os.write(fd, b"1")
    except OSError as exc:
        return f"the Flight Recorder pipe cannot be written ({exc.strerror})"
    finally:
        os.close(fd)
    return None


def dump_all(places: Places, ranks: list[int], slot: Slot) -> list[SourceRecord]:
    """One row per rank: its dump kept, or why there is none."""
    if places.pipe_stem is None or places.dump_prefix is None:
        note = "this run did not set up the Flight Recorder's pipe and dump file"
        return [slot.row(NAME, rank, "missing", note) for rank in ranks]
    rows: dict[int, SourceRecord] = {}
    waiting: dict[int, tuple[int, int] | None] = {}
    for rank in ranks:
        before = _stamp(places.dump(rank) or "")
        problem = _poke(places.pipe(rank) or "")
        if problem is None:
            waiting[rank] = before
        else:
            rows[rank] = slot.row(NAME, rank, "missing", problem)
    last_seen: dict[int, tuple[int, int] | None] = {}
    deadline = time.monotonic() + slot.timeout
    while waiting and time.monotonic() < deadline:
        time.sleep(POLL)
        for rank, before in list(waiting.items()):
            now = _stamp(places.dump(rank) or "")
            if now is not None and now[1] > 0 and now != before and now == last_seen.get(rank):
                rows[rank] = _keep(places, rank, slot)
                del waiting[rank]
            last_seen[rank] = now
    for rank in waiting:
        rows[rank] = slot.row(NAME, rank, "timeout", f"no Flight Recorder dump within "
                              f"{slot.timeout:g} s of the trigger (PyTorch reads its pipe about "
                              "once a second)")
    return [rows[rank] for rank in ranks]


def _keep(places: Places, rank: int, slot: Slot) -> SourceRecord:
    try:
        data, whole = slot.budget.read_file(Path(places.dump(rank) or ""))
    except OSError as exc:
        return slot.row(NAME, rank, "failed", f"the dump cannot be read ({exc.strerror})")
    return slot.keep(NAME, rank, source_path(rank, slot.sample, NAME, suffix(data)), data, whole)
