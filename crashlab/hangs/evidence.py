"""Every source of a capture read, rank by rank and sample by sample.

A source that was missing, refused or timed out at capture time, and a file crashlab cannot use
(cut before its first entry, hostile, too large, outside the capture), becomes a note on its
rank: one rank's bad file never costs the reading of the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from ..errors import BadInput
from ..published import parse
from ..report.model import TriageReport
from . import attach, flightrecorder, pyspy, ras
from .files import read_within, resolved_within
from .layout import Capture, NvmlSample, RankProcess, SourceRecord
from .model import SourceNote

#: The most each source writes: a Flight Recorder buffer of 20,000 entries with their stacks
#: is tens of MB; py-spy's text of a few hundred threads, RAS's of thousands of communicators,
#: NVML's of a machine's GPUs are far below theirs.
LIMITS = {"flight-recorder": 128 << 20, "py-spy": 8 << 20, "nccl-ras": 4 << 20, "nvml": 4 << 20,
          "cuda-gdb-attach": 8 << 20}

#: Reads one GPU dump (a path) into its triage; BadInput where it cannot.
GpuReader = Callable[[Path], TriageReport]


@dataclass
class Sample:
    """One rank's host sources in one sample."""

    flight: flightrecorder.FlightRecord | None = None
    flight_at: datetime | None = None
    stacks: pyspy.PySpyDump | None = None
    snapshot: attach.Snapshot | None = None
    """cuda-gdb's kernels and warps of the live process (--attach)"""


@dataclass
class RankEvidence:
    rank: int
    process: RankProcess | None
    samples: dict[int, Sample] = field(default_factory=dict)
    gpu: TriageReport | None = None
    gpu_path: str | None = None
    notes: list[SourceNote] = field(default_factory=list)

    def sample(self, number: int) -> Sample:
        return self.samples.setdefault(number, Sample())


@dataclass
class RasReply:
    rank: int | None
    sample: int
    status: ras.RasStatus


@dataclass
class CaptureEvidence:
    capture: Capture
    folder: Path
    run: Path
    ranks: dict[int, RankEvidence]
    nvml: dict[int, NvmlSample] = field(default_factory=dict)
    ras: list[RasReply] = field(default_factory=list)
    machine_notes: list[SourceNote] = field(default_factory=list)
    """sources of the whole machine (nvml) that gave nothing"""


def gather(capture: Capture, folder: Path, run: Path, gpu_reader: GpuReader | None) -> CaptureEvidence:
    """Each row of capture.json read into its rank's evidence; ``gpu_reader`` None leaves the
    GPU dumps unread (a note says so)."""
    processes = {process.rank: process for process in capture.ranks}
    ranks = {rank: RankEvidence(rank, processes.get(rank))
             for rank in sorted({*processes, *(r.rank for r in capture.sources if r.rank is not None)})}
    found = CaptureEvidence(capture, folder, run, ranks)
    for record in sorted(capture.sources, key=lambda r: (r.sample, r.source, r.rank or -1)):
        owner = ranks.get(record.rank) if record.rank is not None else None
        if record.status != "ok" or not record.path:
            _note(found, owner, record, record.status, record.note or "no file")
            continue
        try:
            _read(found, owner, record, gpu_reader)
        except BadInput as problem:
            _note(found, owner, record, "unreadable", str(problem))
    return found


def _read(found: CaptureEvidence, owner: RankEvidence | None, record: SourceRecord,
          gpu_reader: GpuReader | None) -> None:
    assert record.path is not None
    if record.source == "gpu-dump":
        if owner is None:
            raise BadInput(f"{record.path}: a GPU dump with no rank")
        if gpu_reader is None:
            raise BadInput(f"{record.path}: GPU dumps not read (asked not to)")
        owner.gpu_path = record.path
        owner.gpu = gpu_reader(resolved_within(found.run, record.path))
        return
    if record.source not in LIMITS:
        raise BadInput(f"{record.path}: {record.source} is not read by this crashlab")
    data = read_within(found.folder, record.path, LIMITS[record.source])
    if record.source == "nvml":
        found.nvml[record.sample] = _nvml(data, record.path)
    elif record.source == "nccl-ras":
        found.ras.append(RasReply(record.rank, record.sample, ras.read(_text(data))))
    elif owner is None:
        raise BadInput(f"{record.path}: a {record.source} file with no rank")
    elif record.source == "flight-recorder":
        sample = owner.sample(record.sample)
        sample.flight = flightrecorder.read(data, record.path)
        sample.flight_at = moment(record.taken_at)
        if sample.flight.cut:
            owner.notes.append(SourceNote(source=record.source, sample=record.sample,
                                          status="partial", note=sample.flight.cut))
    elif record.source == "cuda-gdb-attach":
        owner.sample(record.sample).snapshot = attach.parse(_text(data))
    else:
        owner.sample(record.sample).stacks = pyspy.read(_text(data))


def _nvml(data: bytes, name: str) -> NvmlSample:
    try:
        return parse(NvmlSample, data)
    except ValidationError as problem:
        raise BadInput(f"{name}: not NVML's sample ({problem.errors()[0]['msg']})") from None


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _note(found: CaptureEvidence, owner: RankEvidence | None, record: SourceRecord, status: str,
          note: str) -> None:
    entry = SourceNote(source=record.source, sample=record.sample, status=status, note=note)
    if owner is not None:
        owner.notes.append(entry)
    else:
        found.machine_notes.append(entry)


def moment(text: str) -> datetime | None:
    """An ISO 8601 time as capture.json writes it (``Z`` or an offset), None where it is not one."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
