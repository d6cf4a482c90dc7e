"""HangReading: what ``crashlab inspect RUN_DIR`` prints of a hang capture (``crashlab schema
hang``): each rank's evidence and state, each process group's first disagreement, and the
verdict lines, each with its evidence.

Like every published object it is open: a later crashlab adds fields and named values.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..notation import number_ranges
from ..published import ClosedModel
from ..report.signature import CrashSignature
from ..report.tool import Tool
from ..version import __version__

#: What the samples say a rank does: ``progressing`` (a collective completed between samples),
#: ``spinning`` (its GPU busy, no collective completing), ``stuck`` (the same Python stack and
#: no collective completing), ``moving`` (its stack changes, no collective completes),
#: ``unknown`` (too few samples or sources to tell).
RankState = Literal["progressing", "spinning", "stuck", "moving", "unknown"]
#: A verdict's kind: a rank that never entered a collective the others wait in; a rank that
#: waits in a send or recv its peer never matched; a collective the ranks entered with
#: different ops, sizes or dtypes; every rank in one collective and none completing it; a group
#: whose ranks' places are partly unknown; two sources that contradict each other. Where no
#: rank has a Flight Recorder dump, the ``stack-`` kinds say the same from the Python stacks
#: alone (no process group, no collective number): ranks in a collective while others stand in
#: none; ranks in different collectives; every rank in the same one.
VerdictKind = Literal["never-entered", "unmatched-p2p", "mismatch", "no-progress", "stack-outside",
                      "stack-mismatch", "stack-all-waiting", "incomplete", "sources-disagree"]
#: The verdicts that place a hang, most telling first; the others qualify them.
PLACING = ("never-entered", "unmatched-p2p", "mismatch", "no-progress", "stack-outside",
           "stack-mismatch", "stack-all-waiting")
#: How a group's ranks first disagree.
DisagreementKind = Literal["not-entered", "op", "sizes", "dtypes"]


class Collective(ClosedModel):
    """One collective as one rank's Flight Recorder recorded it."""

    seq: int
    """collective_seq_id (p2p_seq_id for a point-to-point operation)"""
    op: str
    """the operation (profiling_name without its backend: all_reduce, _all_gather_base, ...)"""
    p2p: bool = False
    """a point-to-point operation (send, recv), numbered apart from the collectives"""
    input_sizes: list[list[int]] = Field(default_factory=list)
    """each input tensor's shape"""
    output_sizes: list[list[int]] = Field(default_factory=list)
    """each output tensor's shape"""
    input_dtypes: list[str] = Field(default_factory=list)
    """each input tensor's dtype as PyTorch names it (Float, BFloat16)"""
    output_dtypes: list[str] = Field(default_factory=list)
    """each output tensor's dtype"""
    state: str
    """as recorded: scheduled, started or completed (gloo's stay scheduled)"""
    completed: bool | None = None
    """whether it completed: recorded as completed or retired, or at or before the group's last
    completed collective"""
    waited_s: float | None = None
    """seconds from its enqueueing to the sample, where both clocks are known"""
    timeout_s: float | None = None
    """the process group's timeout as the entry recorded it"""
    stack: list[str] = Field(default_factory=list)
    """the Python stack Flight Recorder kept, innermost first (``file:line function``)"""


class SampleStep(ClosedModel):
    """Where one process group stood on one rank at one host sample: the newest collective it
    had enqueued, the last started and the last completed (a rank's timeline)."""

    sample: int
    """the host sample (0-based)"""
    enqueued: int | None = None
    """the newest collective's number the rank had enqueued"""
    op: str | None = None
    """that collective's op"""
    started: int | None = None
    """pg_status' last started collective, where known (gloo records none)"""
    completed: int | None = None
    """the last completed collective's number"""


class GroupProgress(ClosedModel):
    """One process group on one rank: where its collectives stand at the rank's last sample, and
    its last completed collective at every sample."""

    pg: str
    """the group's name as Flight Recorder writes it"""
    pg_desc: str
    """the group's description (default_pg, or the name the program gave it)"""
    last_enqueued: Collective | None = None
    """the newest collective the rank enqueued in it"""
    last_started: int | None = None
    """pg_status' last started collective, where it is known (gloo records none)"""
    last_completed: int | None = None
    """the last completed collective: the newest of pg_status' and of the entries recorded as
    completed or retired (gloo's pg_status may lag)"""
    completed_by_sample: list[int | None] = Field(default_factory=list)
    """the last completed collective's number at each sample that read a dump"""
    timeline: list[SampleStep] = Field(default_factory=list)
    """at each sample that read a dump: the newest enqueued, last started and last completed
    collective"""


class ThreadView(ClosedModel):
    """One thread of a rank's process at its last py-spy sample."""

    thread: str
    """py-spy's thread id"""
    name: str | None = None
    """the thread's name (MainThread)"""
    state: str
    """py-spy's word: idle, active, gil"""
    frames: list[str] = Field(default_factory=list)
    """its Python frames, innermost first (``file:line function``)"""
    native: list[str] = Field(default_factory=list)
    """its named native frames below the first Python one, innermost first (``function
    (library)``), where py-spy ran with --native"""
    unchanged_samples: int
    """over how many samples, up to the last, its Python stack stayed the same"""


class GpuWait(ClosedModel):
    """A class of warps of one kernel in the rank's GPU dump (crashlab.waits)."""

    kernel: str
    """the kernel's short name"""
    kind: str
    """crashlab.waits' class: collective-wait, polling-memory, barrier-after-exit, barrier, other"""
    summary: str
    """one line, as inspect writes it"""
    warps: int
    """how many of the kernel's resident warps stand so"""
    pcs: list[str] = Field(default_factory=list)
    """the PCs they stand at (at most 4)"""
    address: str | None = None
    """the address their loop polls, where the dump's registers give it"""
    value_registers: list[str] = Field(default_factory=list)
    """the registers that loop's load writes: the value last polled, which --attach snapshots
    read in each snapshot"""


class RankGpu(ClosedModel):
    """The rank's GPU side: its dump's resident kernels and where their warps stand, and NVML's
    utilisation of its GPU at each sample."""

    dump: str | None = None
    """the GPU dump, relative to the run directory"""
    kernels: list[str] = Field(default_factory=list)
    """the dump's resident kernels, by their short names"""
    waits: list[GpuWait] = Field(default_factory=list)
    """where their warps stand, most telling first"""
    faults: list[str] = Field(default_factory=list)
    """exceptions the dump records (a fault, not a hang, where there is one)"""
    gpus: list[int] = Field(default_factory=list)
    """the NVML indices of the GPUs its process held memory on"""
    utilization_by_sample: list[int | None] = Field(default_factory=list)
    """NVML's utilisation (percent) of those GPUs at each sample, the highest of them"""


class SourceNote(ClosedModel):
    """A source that gave no evidence for a rank in one sample, and why."""

    source: str
    """py-spy, flight-recorder, nccl-ras, nvml, gpu-dump"""
    sample: int
    """the host sample (the GPU dumps: the one after the last)"""
    status: str
    """capture.json's status (missing, refused, timeout, failed, skipped), or ``unreadable``
    where the file was there and crashlab could not use it"""
    note: str | None = None
    """why, in one line"""


def note_lines(notes: list[SourceNote]) -> list[str]:
    """Notes told once per source, status and reason, with the samples they hold for
    (``nvml: missing in samples 0-2: no NVML``)."""
    samples: dict[tuple[str, str, str | None], list[int]] = {}
    for note in notes:
        samples.setdefault((note.source, note.status, note.note), []).append(note.sample)
    lines = []
    for (source, status, why), numbers in samples.items():
        which = f"sample {numbers[0]}" if len(numbers) == 1 else f"samples {number_ranges(numbers)}"
        lines.append(f"{source}: {status} in {which}" + (f": {why}" if why else ""))
    return lines


class RankReading(ClosedModel):
    """One rank: what each source says of it, and what changed between samples."""

    rank: int
    """its global rank"""
    pid: int | None = None
    """its process, as the capture found it"""
    host: str | None = None
    """the host it ran on, where the capture knew it"""
    role: str | None = None
    """its part in the server (scheduler, ...), where the capture knew it"""
    state: RankState
    """What the samples say it does: progressing (a collective completed between samples),
    spinning (its GPU busy, none completing), stuck (the same Python stack, none completing),
    moving (its stack changes, none completes), unknown (too few samples to tell)."""
    state_evidence: list[str] = Field(default_factory=list)
    """the facts the state rests on, one sentence each"""
    where: str | None = None
    """the innermost Python frame of its main thread at the last sample (``file:line function``)"""
    call: str | None = None
    """the torch.distributed collective its main thread's Python stack stands in at the last
    sample (all_reduce, broadcast, recv, ...: the innermost such frame), None where it stands in
    none or was not sampled"""
    threads: list[ThreadView] = Field(default_factory=list)
    """its threads at its last py-spy sample"""
    groups: list[GroupProgress] = Field(default_factory=list)
    """each process group its Flight Recorder dump names"""
    gpu: RankGpu | None = None
    """its GPU side, where it has a GPU dump or NVML lists its process"""
    sources: list[SourceNote] = Field(default_factory=list)
    """each source that gave nothing, or only part, in a sample"""
    samples: int = 0
    """host samples that gave this rank any evidence"""

    def main_thread(self) -> ThreadView | None:
        """The thread py-spy names MainThread, where the rank's Python program (and a blocking
        collective) stands; None where its samples name none."""
        return next((t for t in self.threads if t.name == "MainThread"), None)


class RankPosition(ClosedModel):
    """Where one rank of a group stands: its last enqueued and last completed collective."""

    rank: int
    """its global rank"""
    last_enqueued: int | None = None
    """its newest collective's number"""
    op: str | None = None
    """that collective's op"""
    last_completed: int | None = None
    """its last completed collective's number, where the dump says"""


class Side(ClosedModel):
    """One side of a mismatch: what some ranks recorded for the collective."""

    value: str
    """the op, or the input and output sizes or dtypes, as written"""
    ranks: list[int]
    """the ranks that recorded it"""

    def text(self) -> str:
        return f"{self.value} on {ranks_text(self.ranks)}"


def ranks_text(ranks: list[int]) -> str:
    """``rank 2``, ``ranks 0, 1, 3``."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


class GroupReading(ClosedModel):
    """One process group across its ranks: the first collective they disagree on, and who is
    where."""

    pg: str
    """the group's name as Flight Recorder writes it"""
    pg_desc: str
    """the group's description"""
    ranks: list[int]
    """its ranks that have a Flight Recorder dump, or that pg_config names"""
    seq: int | None = None
    """the first collective number where the ranks disagree; where they agree, the newest
    collective where some rank still waits; None where neither"""
    op: str | None = None
    """that collective's op (ops, joined by /, where they differ)"""
    kind: DisagreementKind | None = None
    """how they disagree: a rank never entered it (not-entered), or entered it with another op,
    other sizes or dtypes; None where they agree"""
    behind: list[int] = Field(default_factory=list)
    """ranks that never enqueued that collective"""
    waiting: list[int] = Field(default_factory=list)
    """ranks that entered it and have not completed it"""
    completed: list[int] = Field(default_factory=list)
    """ranks that entered it and completed it"""
    unknown: list[int] = Field(default_factory=list)
    """ranks of the group with no dump to tell, or whose dump no longer holds that collective"""
    sides: list[Side] = Field(default_factory=list)
    """each side of a mismatch, the smaller first"""
    positions: list[RankPosition] = Field(default_factory=list)
    """each rank's newest and last completed collective in the group"""


class RasReading(ClosedModel):
    """One NCCL RAS reply (its ranks are communicator ranks)."""

    rank: int | None = None
    """the rank whose RAS port answered, where the capture says"""
    sample: int
    """the host sample it was asked in"""
    nccl_version: str | None = None
    """the NCCL version its reply names"""
    healthy: bool
    """every communicator RUNNING with no error, and no issue reported"""
    groups: list[str] = Field(default_factory=list)
    """summary rows: ``group 0: 1 communicator of 4 ranks, RUNNING, OK``"""
    issues: list[str] = Field(default_factory=list)
    """each block: its kind, communicator and lines"""


class PeerWait(ClosedModel):
    """A rank waiting in a point-to-point operation its peer never matched: a recv whose send
    the peer never made, or a send whose recv it never posted."""

    pg: str
    """the group's name as Flight Recorder writes it"""
    pg_desc: str
    """the group's description"""
    rank: int
    """the waiting rank (global)"""
    op: str
    """send or recv"""
    seq: int
    """its p2p_seq_id on the waiting rank"""
    peer: int
    """the peer it waits on (global)"""
    nth: int
    """which of the waiting rank's operations of this kind with this peer it is (1: the first)"""
    peer_made: int
    """how many of the matching operations the peer's dump holds (fewer than nth)"""
    profiling_name: str
    """as Flight Recorder wrote it (``nccl:recv 1<-0``)"""


class Verdict(ClosedModel):
    """One conclusion of the reading, with the facts it rests on."""

    kind: VerdictKind
    """never-entered (a rank never entered a collective the others wait in), unmatched-p2p (a
    rank waits in a send or recv its peer never matched), mismatch (ranks entered it with
    another op, other sizes or dtypes), no-progress (every rank in it, none completing),
    stack-outside (from Python stacks only: ranks wait in a collective while others stand in
    none), stack-mismatch (from Python stacks only: ranks wait in different collectives),
    stack-all-waiting (from Python stacks only: every rank waits in the same collective),
    incomplete (some ranks cannot be placed), sources-disagree (two sources contradict each
    other)"""
    line: str
    """one sentence a human reads first"""
    evidence: list[str] = Field(default_factory=list)
    """each fact the line rests on, with its source"""
    ranks: list[int] = Field(default_factory=list)
    """the ranks it is about (the lagging or mismatched ones)"""
    pg: str | None = None
    """the process group's name"""
    pg_desc: str | None = None
    """the process group's description, where the verdict is about one"""
    seq: int | None = None
    """the collective's number in it (a point-to-point operation's p2p_seq_id); None for a
    verdict from Python stacks only"""
    op: str | None = None
    """the collective's op (from Python stacks: torch.distributed's function, ops joined by /
    where the ranks stand in different ones)"""


class SourceStatus(ClosedModel):
    """How one source fared across the capture: the rows of capture.json with one status."""

    source: str
    """py-spy, flight-recorder, nccl-ras, nvml, gpu-dump, cuda-gdb-attach"""
    status: str
    """capture.json's status: ok, missing, refused, timeout, failed, skipped"""
    rows: int
    """how many (rank, sample) rows had it"""
    ranks: list[int] = Field(default_factory=list)
    """the ranks those rows are of (none for a source of the whole machine)"""
    note: str | None = None
    """the first of their notes (why it is missing, refused or failed)"""


class CaptureSummary(ClosedModel):
    """What the capture asked, as its capture.json says."""

    path: str
    """the capture's folder"""
    started_at: str
    """ISO 8601 UTC time the capture began"""
    ended_at: str | None = None
    """ISO 8601 UTC time it ended"""
    trigger: str
    """dump-now (a user asked) or hang-after (serve saw /health stop answering)"""
    samples: int
    """host samples asked of every rank"""
    interval_s: float
    """seconds between them"""
    gpu_dumps: int
    """GPU dumps taken at the end"""
    notes: list[str] = Field(default_factory=list)
    """the capture's own lines"""


class HangReading(ClosedModel):
    """A hang across ranks, read from one capture."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool = Field(default_factory=lambda: Tool(version=__version__))
    """the program that wrote it"""
    kind: Literal["hang-capture"] = "hang-capture"
    """what was read: a hang capture"""
    capture: CaptureSummary
    """the capture read"""
    verdicts: list[Verdict] = Field(default_factory=list)
    """most telling first; empty where the evidence carries none"""
    ranks: list[RankReading] = Field(default_factory=list)
    """each rank the capture names"""
    groups: list[GroupReading] = Field(default_factory=list)
    """each process group across its ranks"""
    ras: list[RasReading] = Field(default_factory=list)
    """each NCCL RAS reply"""
    peer_waits: list[PeerWait] = Field(default_factory=list)
    """each rank waiting in a send or recv its peer never matched (NCCL's Flight Recorder)"""
    sources: list[SourceStatus] = Field(default_factory=list)
    """each source's rows by status, as capture.json recorded them"""
    signature: CrashSignature | None = None
    """the hang's signature: the collective, its op and the lagging rank's place"""
    warnings: list[str] = Field(default_factory=list)
    """what the reading could not use: sources of the whole machine that gave nothing, ranks
    with no evidence"""

    @property
    def found(self) -> bool:
        """Whether a verdict names where the hang is (inspect's exit 0)."""
        return any(v.kind in PLACING for v in self.verdicts)

    def headline(self) -> str:
        """The reading in one line, as every view leads with it."""
        placing = [v for v in self.verdicts if v.kind in PLACING]
        if placing and placing[0].seq is None:
            return (f"Hang across {len(self.ranks)} ranks: {placing[0].kind} in {placing[0].op} "
                    "(Python stacks only)")
        if placing:
            return (f"Hang across {len(self.ranks)} ranks: {placing[0].kind} at {placing[0].op} "
                    f"#{placing[0].seq}")
        return f"Hang capture of {len(self.ranks)} ranks: no verdict the evidence carries"
