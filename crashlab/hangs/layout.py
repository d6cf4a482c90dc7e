"""Where a hang capture's evidence lies in a run directory, and the record that lists it.

A capture is a folder ``<run>/captures/<UTC stamp>/`` with ``capture.json`` (:class:`Capture`)
and, for each rank and host sample, the files of each source under
``rank-<R>/sample-<K>/``; the GPU's activity is per sample (``sample-<K>/nvml.json``) and the GPU
dumps, taken last, stay where serve collects them (the manifest's files, named in
``Capture.gpu_dumps``). The writer (serve, dump-now) and the reader (inspect RUN_DIR, report)
share only this module: a source that was missing or refused is a row with its status and note,
never a missing row, so the reader can say why a rank has no evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ..published import ClosedModel

CAPTURES = "captures"
CAPTURE = "capture.json"
#: The GPU's activity in one host sample, ``sample-<K>/nvml.json`` (:class:`NvmlSample`).
NVML = "nvml.json"

#: One file per (rank, sample, source); the Flight Recorder dump keeps the suffix PyTorch gave
#: it (.json from PyTorch's JSON dumps, .pkl from its pickled ones).
SOURCE_FILES = {
    "py-spy": "py-spy.txt",
    "flight-recorder": "flight-recorder",
    "nccl-ras": "nccl-ras.txt",
    "cuda-gdb-attach": "cuda-gdb.txt",
}

Source = Literal["py-spy", "flight-recorder", "nccl-ras", "nvml", "gpu-dump", "cuda-gdb-attach"]
Status = Literal["ok", "missing", "refused", "timeout", "failed", "skipped"]


class RankProcess(ClosedModel):
    """One process of the server that holds a rank, as the capture found it."""

    rank: int
    """Its global rank (tp/pp/ep ranks are folded into one number, as torch.distributed's)."""
    pid: int
    host: str | None = None
    """The host it ran on, where known; never the machine that reads the capture."""
    role: str | None = None
    """Its part in the server (scheduler, detokenizer, ...), where known."""


class SourceRecord(ClosedModel):
    """One source of evidence for one rank (or for the whole GPU side) in one sample."""

    source: Source
    rank: int | None = None
    """None for a source of the whole machine (nvml)."""
    sample: int
    """0-based; the GPU dumps, taken last, have the sample number after the last host sample."""
    taken_at: str
    """ISO 8601 UTC time the source was asked."""
    status: Status
    path: str | None = None
    """Relative to the capture folder; a gpu-dump's relative to the run directory, as in
    Capture.gpu_dumps (a GPU dump stays where serve collects it). None where nothing was
    written."""
    size_bytes: int | None = None
    truncated_from: int | None = None
    """The source's whole size where the file was cut at the capture's per-file cap (the file
    keeps its first size_bytes); None where it was kept whole."""
    note: str | None = None
    """Why it is missing, refused or failed, in one line (py-spy absent, ptrace not allowed,
    RAS port closed, ...)."""


class Capture(ClosedModel):
    """capture.json: what a capture asked, of whom, and what each source gave."""

    started_at: str
    ended_at: str | None = None
    trigger: Literal["dump-now", "hang-after"]
    """dump-now: a user asked; hang-after: serve saw /health stop answering."""
    samples: int = Field(ge=1)
    interval_s: float = Field(ge=0)
    ranks: list[RankProcess]
    sources: list[SourceRecord]
    gpu_dumps: list[str] = Field(default_factory=list)
    """The GPU dumps taken at the end, relative to the run directory (empty with --no-gpu-dump)."""
    notes: list[str] = Field(default_factory=list)
    """Capture-wide lines (a user-triggered GPU dump ends its process; a source not set up)."""


class GpuProcess(ClosedModel):
    """A process NVML lists on a GPU: how the reader finds a rank's GPU (by its pid)."""

    pid: int
    used_memory_bytes: int | None = None


class GpuActivity(ClosedModel):
    """One GPU as NVML saw it in one sample."""

    index: int
    name: str | None = None
    uuid: str | None = None
    utilization_gpu: int | None = None
    """Percent of the sample period a kernel ran (nvmlDeviceGetUtilizationRates' gpu)."""
    utilization_memory: int | None = None
    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    processes: list[GpuProcess] = Field(default_factory=list)


class NvmlSample(ClosedModel):
    """``sample-<K>/nvml.json``: every GPU of the machine in one host sample."""

    taken_at: str
    gpus: list[GpuActivity] = Field(default_factory=list)


def capture_dirs(run_dir: Path) -> list[Path]:
    """The captures of a run, oldest first."""
    root = Path(run_dir) / CAPTURES
    return sorted(p for p in root.iterdir() if (p / CAPTURE).is_file()) if root.is_dir() else []


def source_path(rank: int, sample: int, source: str, suffix: str = "") -> str:
    """Where a rank's source file of a sample lies, relative to the capture folder."""
    return f"rank-{rank}/sample-{sample}/{SOURCE_FILES[source]}{suffix}"


def nvml_path(sample: int) -> str:
    """Where a sample's GPU activity lies, relative to the capture folder."""
    return f"sample-{sample}/{NVML}"
