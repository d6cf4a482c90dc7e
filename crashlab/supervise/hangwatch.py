"""``serve --hang-after``: a hang capture once /health has stopped answering for that long, and
every capture of the run (its own, and dump-now's from another process) linked into the manifest.

Only once the server has answered at least once (loading a model takes minutes), and once per
silence: no second capture until /health answers again. The capture runs in a thread of its own
while the loop goes on collecting dumps, since a capture's GPU dumps end the processes they dump.
Captures are linked by reading their capture.json whenever it changes, so the manifest (which
only serve writes) names dump-now's captures too.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from pydantic import ValidationError

from ..hangs.layout import CAPTURE, Capture, capture_dirs
from ..published import parse
from .hangcapture import CaptureOptions, take
from .hangcapture.run import summary
from .health import HealthWatch
from .manifest import CaptureLink, ManifestStore
from .options import Notify, ServeOptions


class HangWatch:
    def __init__(self, run_dir: Path, options: ServeOptions, store: ManifestStore, notify: Notify):
        self.run_dir = run_dir
        self.options = options
        self.store = store
        self.notify = notify
        self._thread: threading.Thread | None = None
        self._armed = True
        self._seen: dict[Path, int] = {}

    @property
    def capture_options(self) -> CaptureOptions:
        return CaptureOptions(samples=self.options.hang_samples,
                              interval=self.options.hang_interval,
                              gpu_dump=self.options.hang_gpu_dump,
                              attach=self.options.hang_attach,
                              dump_timeout=self.options.dump_timeout)

    @property
    def budget_seconds(self) -> float:
        """The longest a capture can take, by its own bounds."""
        options = self.capture_options
        return (options.samples * (options.interval + 2 * options.source_timeout)
                + options.dump_timeout + 10.0)

    def poll(self, health: HealthWatch | None) -> None:
        """Start a capture when the silence has lasted --hang-after seconds."""
        if self.options.hang_after is None or health is None or health.last_ok is None:
            return
        silent = time.monotonic() - health.last_ok
        if health.state == "healthy":
            self._armed = True
        elif self._armed and silent >= self.options.hang_after and not self.capturing:
            self._armed = False
            self.notify(f"hang: /health has not answered for {silent:.0f} s (--hang-after "
                        f"{self.options.hang_after:g}): capturing")
            self._thread = threading.Thread(target=self._capture, name="crashlab-hang-capture",
                                            daemon=True)
            self._thread.start()

    @property
    def capturing(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _capture(self) -> None:
        try:
            result = take(self.run_dir, "hang-after", self.capture_options, self.notify)
        except Exception as exc:  # a capture's failure must not cost the run its supervisor
            self.notify(f"hang capture failed: {type(exc).__name__}: {exc}")
            return
        self.notify(f"hang capture: {result.folder}")
        for line in summary(result):
            self.notify(line)
        self._record(result.folder)

    def _record(self, folder: Path) -> None:
        """The hang the capture shows into the crash index, as a crash of kind hang; one
        warning line where the index cannot be written, never a failure of the run."""
        from ..index import capture
        from ..index.recording import record_all

        record_all(lambda: capture.from_capture(folder, "serve"), self.options.db,
                   Path(self.options.runs_dir), self.notify,
                   announce=lambda said: self.notify(f"the hang is {said}"))

    def finish(self) -> None:
        """Wait for a capture in flight (at most its own bounds), then link every capture."""
        if self._thread is not None:
            self._thread.join(self.budget_seconds)
            if self._thread.is_alive():
                self.notify("hang capture still running past its bounds; its capture.json says "
                            "what it had")
        self.link()

    def link(self) -> None:
        """Every capture whose capture.json changed since the last look, into the manifest."""
        for folder in capture_dirs(self.run_dir):
            try:
                changed = (folder / CAPTURE).stat().st_mtime_ns
                if self._seen.get(folder) == changed:
                    continue
                capture = parse(Capture, (folder / CAPTURE).read_bytes())
            except (OSError, ValidationError, ValueError, json.JSONDecodeError):
                continue
            self._seen[folder] = changed
            self.store.link_capture(_link(self.run_dir, folder, capture))


def _link(run_dir: Path, folder: Path, capture: Capture) -> CaptureLink:
    rows: dict[str, int] = {}
    for row in capture.sources:
        rows[row.status] = rows.get(row.status, 0) + 1
    size = sum(entry.stat().st_size for entry in folder.rglob("*") if entry.is_file())
    return CaptureLink(path=os.path.relpath(folder, run_dir), trigger=capture.trigger,
                       started_at=capture.started_at, ended_at=capture.ended_at,
                       ranks=len(capture.ranks), samples=capture.samples, rows=rows,
                       size_bytes=size, gpu_dumps=capture.gpu_dumps)
