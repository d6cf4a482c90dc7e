"""Collecting a crash's files: GPU coredumps as the driver finishes them, SGLang's request dumps.

The driver writes a coredump into ``cores/incoming/`` (its CUDA_COREDUMP_FILE); a dump is moved
into ``cores/`` only once it is finished, so ``cores/`` never holds a torn file. Finished means:
no living process of the server has it open (psutil), it has not changed for ``settle`` seconds
and the driver's progress lines do not say it is still being written. A file the server was
still writing when it died is kept too, as ``<name>.partial``. Files written outside the run
directory (a CUDA_COREDUMP_FILE or --crash-dump-folder the user chose) are adopted: hard-linked
or copied in, the original left where the user wanted it.
"""

from __future__ import annotations

import glob
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..report.run import FileRecord
from . import files

SETTLE_SECONDS = 1.0
#: The driver prints a line per SM while it collects state, before it names the file it writes;
#: this long without a line, it is taken to be done (or dead).
DRIVER_QUIET_SECONDS = 10.0
REQUEST_DUMP_GLOB = "crash_dump_*.pkl"

_WRITING_TO = re.compile(r"coredump: Writing ELF file to (?P<path>.+?)\s*$")
_DONE = re.compile(r"coredump: (?:Writing done|All done)")


class DriverProgress:
    """What the driver's ``coredump:`` lines say: is a dump being collected or written?"""

    def __init__(self):
        self._lock = threading.Lock()
        self._last_line: float | None = None
        self._writing: list[str] = []
        self._finished_last = False  # "Writing done" is followed by "All done": count one end

    def observe(self, text: str) -> None:
        with self._lock:
            self._last_line = time.monotonic()
            target = _WRITING_TO.search(text)
            if target:
                self._writing.append(target["path"])
                self._finished_last = False
            elif _DONE.search(text):
                if not self._finished_last and self._writing:
                    self._writing.pop(0)
                self._finished_last = "Writing done" in text
                if not self._writing:
                    self._last_line = None  # finished: no dump is being collected any more

    def busy(self) -> str | None:
        with self._lock:
            if self._writing:
                return f"the driver is writing {', '.join(self._writing)}"
            if self._last_line is not None and time.monotonic() - self._last_line < DRIVER_QUIET_SECONDS:
                return "the driver is collecting GPU state for a coredump"
            return None

    def writing(self) -> set[str]:
        with self._lock:
            return set(self._writing)


@dataclass
class _Candidate:
    size: int
    mtime_ns: int
    changed_at: float


@dataclass(frozen=True)
class DumpSource:
    """Where the driver puts dumps: a glob, and whether files there are ours to move."""

    pattern: str
    ours: bool


class DumpCollector:
    def __init__(self, run_dir: Path, cores: Path, sources: list[DumpSource],
                 alive: Callable[[], list[psutil.Process]], driver: DriverProgress,
                 since: float, settle: float = SETTLE_SECONDS):
        self.run_dir = run_dir
        self.cores = cores
        self.sources = sources
        self._alive = alive
        self._driver = driver
        self._since = since
        self._settle = settle
        self._candidates: dict[str, _Candidate] = {}
        self._collected: set[str] = set()

    def _scan(self) -> list[tuple[str, bool]]:
        found = []
        for source in self.sources:
            for path in glob.glob(source.pattern):
                if path in self._collected or os.path.basename(path).startswith("."):
                    continue
                try:
                    stat = os.stat(path)
                except FileNotFoundError:
                    continue
                if not source.ours and stat.st_mtime < self._since:
                    continue  # the user's folder: only what this incarnation wrote
                now = time.monotonic()
                seen = self._candidates.get(path)
                if seen is None or (seen.size, seen.mtime_ns) != (stat.st_size, stat.st_mtime_ns):
                    self._candidates[path] = _Candidate(stat.st_size, stat.st_mtime_ns, now)
                found.append((path, source.ours))
        return found

    def _open_by_server(self) -> set[str]:
        opened: set[str] = set()
        for proc in self._alive():
            try:
                opened.update(f.path for f in proc.open_files())
            except psutil.Error:
                continue
        return opened

    def poll(self) -> list[FileRecord]:
        """Collect the dumps that are finished; leave the others to a later poll."""
        found = self._scan()
        if not found:
            return []
        opened = self._open_by_server()
        writing = self._driver.writing()
        now = time.monotonic()
        collected = []
        for path, ours in found:
            settled = now - self._candidates[path].changed_at >= self._settle
            if settled and path not in opened and path not in writing:
                collected.append(self._collect(path, ours, complete=True))
        return collected

    def still_writing(self) -> list[str]:
        """Why a dump may still be in flight: the reasons crashlab waits before killing."""
        reasons = []
        busy = self._driver.busy()
        if busy:
            reasons.append(busy)
        found = self._scan()
        if found:
            opened = self._open_by_server()
            now = time.monotonic()
            for path, _ in found:
                if path in opened:
                    reasons.append(f"{path} is open in the server")
                elif now - self._candidates[path].changed_at < self._settle:
                    reasons.append(f"{path} is growing")
        return reasons

    def collect_remaining(self) -> list[FileRecord]:
        """The server is gone: everything left is collected; unfinished writes as partial."""
        writing = self._driver.writing()
        return [self._collect(path, ours, complete=path not in writing)
                for path, ours in self._scan()]

    def _collect(self, path: str, ours: bool, complete: bool) -> FileRecord:
        source = Path(path)
        name = source.name if complete else source.name + ".partial"
        destination = files.free_name(self.cores / name)
        if ours:
            files.move_into(source, destination)
        else:
            files.adopt(source, destination)
        self._collected.add(path)
        return record(self.run_dir, destination, "coredump", complete=complete,
                      origin=None if ours else str(source))


def collect_request_dumps(run_dir: Path, requests_dir: Path, elsewhere: list[Path],
                          since: float, host: str) -> list[FileRecord]:
    """SGLang's crash-dump pickles: synced where it wrote them inside the run directory, and
    adopted from outside it (a --crash-dump-folder the user chose, a path its log named)."""
    records = []
    for path in sorted(requests_dir.rglob(REQUEST_DUMP_GLOB)):
        files.fsync_file(path)
        files.fsync_dir(path.parent)
        records.append(record(run_dir, path, "request-dump"))
    for path in sorted({p.resolve() for p in elsewhere}):
        if path.is_relative_to(run_dir.resolve()) or not path.is_file() \
                or path.stat().st_mtime < since:
            continue
        target_dir = requests_dir / host
        target_dir.mkdir(parents=True, exist_ok=True)
        destination = files.free_name(target_dir / path.name)
        files.adopt(path, destination)
        records.append(record(run_dir, destination, "request-dump", origin=str(path)))
    return records


def request_dumps_in(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*/{REQUEST_DUMP_GLOB}"))


def record(run_dir: Path, path: Path, kind: str, *, complete: bool = True,
           origin: str | None = None) -> FileRecord:
    return FileRecord(path=str(path.relative_to(run_dir)), kind=kind, size_bytes=path.stat().st_size,
                      sha256=files.sha256(path), complete=complete, origin=origin)
