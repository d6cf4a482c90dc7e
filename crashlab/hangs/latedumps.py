"""GPU dumps that arrived after a capture stopped waiting for them.

A capture waits --dump-timeout seconds for the driver's dumps, then writes ``timeout`` in the
rows still empty and ends. The driver goes on writing (a dump of a large context can take
minutes) and serve collects what it finishes into the incarnation's cores/. The reading looks
there, by the pid the driver puts in the dump's name, so that a slow dump still gives its rank a
GPU side; capture.json itself stays as the capture wrote it (reading never writes).
"""

from __future__ import annotations

from pathlib import Path

from ..report.run import dump_pid
from .evidence import moment
from .layout import Capture, SourceRecord

#: Seconds a dump's time may precede its trigger's and still be taken as its answer: the
#: trigger's time is taken before the pipe is written, and clocks round.
_SLACK_S = 2.0


def with_late_dumps(capture: Capture, run: Path) -> Capture:
    """CAPTURE with each ``timeout`` GPU-dump row whose rank's dump serve collected later in the
    run directory RUN filled in, as if it had come in time, with a note that says it came late."""
    if not any(_timed_out(row) for row in capture.sources) or not (run / "captures").is_dir():
        return capture  # a capture copied out of its run has no cores/ to look in
    pids = {rank.rank: rank.pid for rank in capture.ranks}
    found = _collected(run)
    updated = capture.model_copy(deep=True)
    for row in updated.sources:
        if not _timed_out(row) or row.rank not in pids:
            continue
        asked = moment(row.taken_at)
        dumps = [(when, path) for when, path in found.get(pids[row.rank], [])
                 if asked is None or when >= asked.timestamp() - _SLACK_S]
        if not dumps:
            continue
        when, path = min(dumps)
        row.status, row.path, row.size_bytes = "ok", path.relative_to(run).as_posix(), path.stat().st_size
        row.note = f"collected after the capture stopped waiting ({row.note})" if row.note else \
            "collected after the capture stopped waiting"
        updated.gpu_dumps.append(row.path)
    return updated


def _timed_out(row: SourceRecord) -> bool:
    return row.source == "gpu-dump" and row.status == "timeout"


def _collected(run: Path) -> dict[int, list[tuple[float, Path]]]:
    """The finished dumps of the run's incarnations by the pid in their names, with their times."""
    found: dict[int, list[tuple[float, Path]]] = {}
    for path in sorted(run.glob("incarnation-*/cores/core.*.nvcudmp")):
        pid = dump_pid(path.name)
        if pid is not None and path.is_file() and not path.is_symlink():
            found.setdefault(pid, []).append((path.stat().st_mtime, path))
    return found
