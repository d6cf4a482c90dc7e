"""One capture from start to end: who the ranks are, k samples t seconds apart, the GPU dumps last.

Within a sample every source of every rank is asked at once (one thread each), so the ranks are
seen at the same moment and a sample lasts as long as its slowest source, at most the source
timeout. capture.json is rewritten after each sample: a capture cut short (crashlab killed, the
server gone) still says what it had.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...errors import CrashlabError
from ...gdb.driver import find_cuda_gdb
from ...hangs.layout import CAPTURE, CAPTURES, Capture, SourceRecord
from ...notation import counted
from ...report.run import dump_pid
from .. import dumpnow, files, timestamps
from ..dumpnow import DumpNowResult
from ..hangsources import FR_PIPE_SUFFIX, Stack
from ..manifest import Manifest
from ..options import Notify
from . import attach, flightrecorder, gpuactivity, pyspy, ranks, ras
from .bounded import Budget
from .slot import Slot

GPU_DUMP_ENDS_PROCESS = (
    "a user-triggered GPU dump ends the process it dumps: on a real driver (H200, 580.159.04) the "
    "driver aborts it right after its dump; with skip_abort it lives but its pipe is gone. One GPU "
    "dump per process: --no-gpu-dump keeps the server running and the pipe for later")
ATTACH_STOPS_PROCESS = (
    "--attach: cuda-gdb attached to every rank in every sample; each process, its GPU work "
    "included, is stopped while it is read (at most the source timeout), then detached")
Trigger = Literal["dump-now", "hang-after"]


@dataclass(frozen=True)
class CaptureOptions:
    samples: int = 3
    interval: float = 5.0
    """Seconds from the start of one sample to the start of the next."""
    gpu_dump: bool = True
    py_spy: bool = True
    attach: bool = False
    """cuda-gdb attached to every rank in every sample (the process stops while it is read)."""
    source_timeout: float = 10.0
    dump_timeout: float = 120.0
    """How long the GPU dumps may take to be collected."""
    max_file_bytes: int = 16 << 20
    max_capture_bytes: int = 512 << 20


@dataclass
class CaptureResult:
    folder: Path
    capture: Capture
    gpu: DumpNowResult | None = None


def _folder(run_dir: Path) -> Path:
    root = run_dir / CAPTURES
    root.mkdir(parents=True, exist_ok=True)
    name = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    folder, number = root / name, 1
    while True:
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            number += 1
            folder = root / f"{name}-{number}"


def gpu_pipes(run_dir: Path, record: Manifest) -> list[str]:
    """The coredump pipes a GPU dump would go through; BadInput where user dumps are off."""
    return dumpnow.live_pipes(dumpnow.pipe_pattern(run_dir, record))


class _Capture:
    def __init__(self, run_dir: Path, record: Manifest, trigger: Trigger, options: CaptureOptions,
                 notify: Notify):
        self.run_dir, self.record, self.options, self.notify = run_dir, record, options, notify
        self.stack = Stack.of_run(run_dir)
        self.places = flightrecorder.Places.of(record.environment, record.cwd)
        incarnation = record.incarnations[-1]
        self.ranks = ranks.find(incarnation.processes, self.places.pipe_stem, FR_PIPE_SUFFIX,
                                record.crashlab.host)
        self.py_spy = pyspy.find(record.command, os.environ) if options.py_spy else None
        self.cuda_gdb, self.no_cuda_gdb = find_cuda_gdb() if options.attach else (None, "")
        self.folder = _folder(run_dir)
        self.budget = Budget(options.max_file_bytes, options.max_capture_bytes)
        self.capture = Capture(started_at=timestamps.now(), trigger=trigger,
                               samples=options.samples, interval_s=options.interval,
                               ranks=self.ranks.processes, sources=[],
                               notes=[self.ranks.how, *self._notes()])

    def _notes(self) -> list[str]:
        notes = [f"py-spy: {self.py_spy}" if self.py_spy else
                 "py-spy: not asked (--no-py-spy)" if not self.options.py_spy else pyspy.MISSING]
        if self.options.attach:
            notes.append(ATTACH_STOPS_PROCESS)
        if self.options.gpu_dump:
            notes.append(GPU_DUMP_ENDS_PROCESS)
        return notes

    def save(self) -> None:
        files.write_atomic(self.folder / CAPTURE, self.capture.model_dump_json(indent=2).encode())

    def sample(self, number: int) -> None:
        slot = Slot(self.folder, number, timestamps.now(), self.budget, self.options.source_timeout)
        with ThreadPoolExecutor(max_workers=len(self.ranks.processes) + 3) as pool:
            traced = [pool.submit(self._traced, rank.pid, rank.rank, slot)
                      for rank in self.ranks.processes]
            recorder = pool.submit(flightrecorder.dump_all, self.places,
                                   [rank.rank for rank in self.ranks.processes], slot)
            machine = [pool.submit(ras.query, self.record.environment, self.stack,
                                   self.ranks.processes, slot),
                       pool.submit(gpuactivity.sample, slot)]
            self.capture.sources += [row for job in traced for row in job.result()] \
                + recorder.result() + [job.result() for job in machine]

    def _traced(self, pid: int, rank: int, slot: Slot) -> list[SourceRecord]:
        """py-spy, then cuda-gdb's attach: one after the other, since a process takes one tracer
        at a time (run together, py-spy was refused and cuda-gdb read nothing)."""
        rows = [pyspy.dump(self.py_spy, pid, rank, slot, os.environ) if self.options.py_spy
                else slot.row(pyspy.NAME, rank, "skipped", "--no-py-spy")]
        if self.options.attach:
            rows.append(attach.snapshot(self.cuda_gdb, self.no_cuda_gdb, pid, rank, slot,
                                        os.environ))
        return rows

    def gpu_dumps(self) -> DumpNowResult | None:
        """The GPU dumps, last: one row per rank."""
        number, now = self.options.samples, timestamps.now()
        slot = Slot(self.folder, number, now, self.budget, self.options.dump_timeout)
        rows = {rank.rank: slot.row("gpu-dump", rank.rank, "skipped", "--no-gpu-dump: the pipe is "
                                    "kept for a later dump") for rank in self.ranks.processes}
        result = None
        if self.options.gpu_dump:
            try:
                result = dumpnow.dump_now(self.run_dir, self.options.dump_timeout)
            except CrashlabError as exc:
                rows = {rank: slot.row("gpu-dump", rank, "missing", str(exc)) for rank in rows}
            else:
                rows = self._gpu_rows(result, slot)
                self.capture.gpu_dumps = [record.path for record in result.collected]
        self.capture.sources.extend(rows.values())
        return result

    def _gpu_rows(self, result: DumpNowResult, slot: Slot) -> dict[int, SourceRecord]:
        triggered = {_pipe_pid(pipe) for pipe in result.triggered}
        collected = {dump_pid(record.path): record for record in result.collected}
        rows = {}
        for rank in self.ranks.processes:
            record = collected.get(rank.pid)
            if record is not None:
                row = slot.row("gpu-dump", rank.rank, "ok")
                row.path = record.path  # relative to the run directory, as Capture.gpu_dumps
                row.size_bytes = record.size_bytes
            elif rank.pid in triggered:
                row = slot.row("gpu-dump", rank.rank, "timeout", "triggered, not collected within "
                               f"{self.options.dump_timeout:g} s")
            else:
                row = slot.row("gpu-dump", rank.rank, "missing", "no coredump pipe: the process "
                               "has not initialised CUDA")
            rows[rank.rank] = row
        return rows


def _pipe_pid(path: str) -> int | None:
    """The pid in the name of a driver's pipe (corepipe.cuda.HOST.PID)."""
    last = Path(path).name.rsplit(".", 1)[-1]
    return int(last) if last.isdigit() else None


def take(run_dir: Path, trigger: Trigger, options: CaptureOptions, notify: Notify,
         record: Manifest | None = None) -> CaptureResult:
    """One capture of the live run RUN_DIR (see the package's doc)."""
    run_dir = Path(run_dir)
    record = record or dumpnow.live_run(run_dir)
    capture = _Capture(run_dir, record, trigger, options, notify)
    notify(f"capturing {counted(len(capture.ranks.processes), 'rank')} of {run_dir.name}: "
           f"{counted(options.samples, 'sample')} {options.interval:g} s apart, into {capture.folder}")
    capture.save()
    started = time.monotonic()
    for number in range(options.samples):
        capture.sample(number)
        capture.save()
        if number + 1 < options.samples:
            time.sleep(max(0.0, started + (number + 1) * options.interval - time.monotonic()))
    gpu = capture.gpu_dumps()
    capture.capture.ended_at = timestamps.now()
    capture.save()
    return CaptureResult(capture.folder, capture.capture, gpu)


def summary(result: CaptureResult) -> list[str]:
    """What each source gave, a line per source: its counts by status and its first note."""
    lines = []
    for source in dict.fromkeys(row.source for row in result.capture.sources):
        rows = [row for row in result.capture.sources if row.source == source]
        counts = Counter(row.status for row in rows)
        said = ", ".join(f"{count} {status}" for status, count in counts.most_common())
        note = next((row.note for row in rows if row.status != "ok" and row.note), None)
        lines.append(f"  {source}: {said}" + (f" ({note})" if note else ""))
    return lines
