"""A hang capture read whole: rank by rank, then across ranks, then the verdicts and the
signature. ``read(path, gpu_reader)`` is what ``crashlab inspect RUN_DIR`` runs."""

from __future__ import annotations

from pathlib import Path

from ..errors import BadInput
from ..escape import printable
from ..notation import counted
from .across import latest_records, read_groups
from .evidence import CaptureEvidence, GpuReader, RasReply, gather
from .files import capture_folder, load_capture, run_folder
from .latedumps import with_late_dumps
from .layout import Capture
from .model import (
    CaptureSummary,
    HangReading,
    RankReading,
    RasReading,
    SourceStatus,
    note_lines,
)
from .p2p import unmatched
from .pyspy import StackFrame
from .rank import first_outside, read_rank
from .signing import sign
from .stackverdicts import stack_disagreements, stack_places, stack_verdicts
from .verdicts import verdicts


def read(path: Path, gpu_reader: GpuReader | None) -> HangReading:
    """The reading of the capture ``path`` names (a capture folder, or a run directory's newest
    capture). ``gpu_reader`` reads a GPU dump into its triage (None: the GPU dumps are not read).
    BadInput where ``path`` holds no capture or its capture.json is not one."""
    folder = capture_folder(path)
    if folder is None:
        raise BadInput(f"{printable(str(path))}: no hang capture (no captures/*/capture.json)")
    run = run_folder(folder)
    capture = with_late_dumps(load_capture(folder), run)
    evidence = gather(capture, folder, run, gpu_reader)
    ranks = {number: read_rank(found, evidence.nvml) for number, found in evidence.ranks.items()}
    records = latest_records(evidence.ranks)
    groups = read_groups(records, sorted(ranks))
    peer_waits = unmatched(records)
    found = verdicts(groups, ranks, evidence.ras, peer_waits)
    # the stacks speak for the hang where no rank has a Flight Recorder dump; where some have,
    # they place the ranks Flight Recorder cannot and say where they contradict it
    if records:
        stack_places(found, ranks)
        found += stack_disagreements(found, ranks)
    else:
        found = stack_verdicts(ranks) + found
    reading = HangReading(
        capture=CaptureSummary(path=str(folder), started_at=capture.started_at,
                               ended_at=capture.ended_at, trigger=capture.trigger,
                               samples=capture.samples, interval_s=capture.interval_s,
                               gpu_dumps=len(capture.gpu_dumps), notes=capture.notes),
        verdicts=found, ranks=list(ranks.values()),
        groups=groups, ras=[_ras(reply) for reply in evidence.ras], peer_waits=peer_waits, sources=source_statuses(capture),
        warnings=_warnings(evidence, ranks))
    reading.signature = sign(reading, _places(evidence))
    return reading


def source_statuses(capture: Capture) -> list[SourceStatus]:
    """capture.json's rows told per source and status, in the order the sources first appear."""
    found: dict[tuple[str, str], SourceStatus] = {}
    for row in capture.sources:
        status = found.setdefault((row.source, row.status),
                                  SourceStatus(source=row.source, status=row.status, rows=0))
        status.rows += 1
        if row.rank is not None and row.rank not in status.ranks:
            status.ranks.append(row.rank)
        status.note = status.note or (printable(row.note, 300) if row.note else None)
    for status in found.values():
        status.ranks.sort()
    return list(found.values())


def _places(evidence: CaptureEvidence) -> dict[int, StackFrame | None]:
    """Each rank's innermost Python frame outside torch at its last py-spy sample."""
    places: dict[int, StackFrame | None] = {}
    for number, found in evidence.ranks.items():
        dumps = [s.stacks for _, s in sorted(found.samples.items()) if s.stacks and s.stacks.threads]
        main = dumps[-1].main_thread() if dumps else None
        places[number] = first_outside(main.frames) if main else None
    return places


def _ras(reply: RasReply) -> RasReading:
    status = reply.status
    return RasReading(
        rank=reply.rank, sample=reply.sample, nccl_version=status.nccl_version,
        healthy=status.healthy,
        groups=[f"group {g.group}: {counted(g.communicators, 'communicator')} of "
                f"{g.ranks_per_communicator} ranks on {counted(g.nodes, 'node')}, {g.status}, "
                f"{g.errors}" for g in status.groups],
        issues=[f"{i.kind}{' ' + i.communicator if i.communicator else ''}: {'; '.join(i.lines)}"
                for i in status.issues])


def _warnings(evidence: CaptureEvidence, ranks: dict[int, RankReading]) -> list[str]:
    warnings = note_lines(evidence.machine_notes)
    for number, reading in ranks.items():
        if not reading.samples and (reading.gpu is None or reading.gpu.dump is None):
            why = "; ".join(sorted({f"{n.source}: {n.status}" for n in reading.sources})) or \
                "capture.json lists no source for it"
            warnings.append(f"rank {number}: no source gave evidence ({why})")
    return warnings
