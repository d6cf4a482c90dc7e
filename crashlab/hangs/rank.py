"""One rank read: where each of its process groups' collectives stand, its threads, its GPU, and
what changed between samples.

The state is read from the host samples, most telling first: a collective completed between
samples is progress whatever else is seen; a GPU kept busy while none completes is spinning; the
same Python stack at every sample with none completing is stuck; a stack that changes while
none completes is moving. One sample, or none, tells none of these. A GPU dump is one moment (a
user-triggered dump ends its process), so it says where the warps stand, never whether they move.
"""

from __future__ import annotations

from datetime import datetime

from ..report.model import TriageReport
from ..signature.names import base_name
from . import attach
from .calls import collective_call
from .evidence import RankEvidence
from .flightrecorder import Entry, FlightRecord
from .layout import NvmlSample
from .model import (
    Collective,
    GpuWait,
    GroupProgress,
    RankGpu,
    RankReading,
    RankState,
    SampleStep,
    ThreadView,
)
from .pyspy import PySpyDump, StackFrame

#: NVML's utilisation at or above which a GPU counts as busy: a kernel spinning on a flag keeps
#: it at 100 %, a GPU waiting for work shows 0.
BUSY_PERCENT = 90
#: Frames kept of a stack in the reading (innermost first), and of the native frames below it.
STACK_FRAMES = 12
NATIVE_FRAMES = 6
#: A native frame's name kept: C++ template names run to kilobytes.
NATIVE_NAME = 120
_PACKAGE_ROOTS = ("site-packages/", "dist-packages/")
#: crashlab.waits' classes, most telling of a hang first.
WAIT_ORDER = ("collective-wait", "polling-memory", "barrier-after-exit", "barrier", "other")


def short_file(path: str) -> str:
    """A file as py-spy shortens it: from its package (``torch/distributed/distributed_c10d.py``)
    where it lies in site-packages, else as written. Flight Recorder keeps absolute paths."""
    for root in _PACKAGE_ROOTS:
        if root in path:
            return path.rsplit(root, 1)[1]
    return path


def group_key(entry: Entry) -> tuple[str, str]:
    return entry.pg_name, entry.pg_desc


def last_completed(record: FlightRecord, entries: list[Entry]) -> int | None:
    """A group's last completed collective: the newest of pg_status' and of the entries recorded
    as completed or retired. Both only ever name a collective that did complete, and either may
    lag: gloo's worker threads write pg_status in the order they finish (torch 2.14.1 dumps said
    #3 while #5 had returned), and gloo's entries never leave ``scheduled``."""
    pg_ids = {entry.pg_id for entry in entries if entry.pg_id is not None}
    known = [status.last_completed for pg, status in record.pg_status.items()
             if pg in pg_ids and status.last_completed is not None and status.last_completed >= 0]
    known += [entry.seq for entry in entries if done(entry)]
    return max(known) if known else None


def done(entry: Entry) -> bool:
    """Whether an entry says its collective completed: its state, or Flight Recorder retired it
    (which it does when the work ends)."""
    return entry.state == "completed" or entry.retired is True


def collective(entry: Entry, completed_up_to: int | None, at: datetime | None) -> Collective:
    waited = None
    if at is not None and entry.time_created_ns:
        seconds = at.timestamp() - entry.time_created_ns / 1e9
        waited = round(seconds, 3) if seconds >= 0 else None
    completed = done(entry) or (completed_up_to is not None and entry.seq <= completed_up_to)
    return Collective(
        seq=entry.seq, op=entry.op, p2p=entry.is_p2p, input_sizes=entry.input_sizes,
        output_sizes=entry.output_sizes, input_dtypes=entry.input_dtypes,
        output_dtypes=entry.output_dtypes, state=entry.state, completed=completed, waited_s=waited,
        timeout_s=entry.timeout_ms / 1000 if entry.timeout_ms else None,
        stack=[f"{short_file(f.file)}:{f.line} {f.function}" for f in entry.frames[:STACK_FRAMES]])


def collectives_by_group(record: FlightRecord) -> dict[tuple[str, str], list[Entry]]:
    """A dump's collective entries (point-to-point ones apart) per (group name, desc)."""
    groups: dict[tuple[str, str], list[Entry]] = {}
    for entry in record.entries:
        if not entry.is_p2p:
            groups.setdefault(group_key(entry), []).append(entry)
    return groups


def _groups(evidence: RankEvidence) -> list[GroupProgress]:
    dumped = [(n, s) for n, s in sorted(evidence.samples.items()) if s.flight is not None]
    if not dumped:
        return []
    _, last = dumped[-1]
    assert last.flight is not None
    progress = []
    for key, entries in collectives_by_group(last.flight).items():
        newest = max(entries, key=lambda e: e.seq)
        completed = last_completed(last.flight, entries)
        timeline = [_step(number, sample.flight, key) for number, sample in dumped
                    if sample.flight is not None]
        progress.append(GroupProgress(
            pg=key[0], pg_desc=key[1], last_enqueued=collective(newest, completed, last.flight_at),
            last_started=_last_started(last.flight, newest), last_completed=completed,
            completed_by_sample=[step.completed for step in timeline], timeline=timeline))
    return progress


def _last_started(record: FlightRecord, newest: Entry) -> int | None:
    started = [s.last_started for pg, s in record.pg_status.items()
               if pg == newest.pg_id and s.last_started is not None and s.last_started >= 0]
    return started[0] if started else None


def _step(number: int, record: FlightRecord, key: tuple[str, str]) -> SampleStep:
    """Where group KEY stood in one sample's dump (nothing where the dump holds none of it)."""
    mine = collectives_by_group(record).get(key, [])
    if not mine:
        return SampleStep(sample=number)
    newest = max(mine, key=lambda e: e.seq)
    return SampleStep(sample=number, enqueued=newest.seq, op=newest.op,
                      started=_last_started(record, newest),
                      completed=last_completed(record, mine))


def _threads(evidence: RankEvidence) -> tuple[list[ThreadView], str | None, list[PySpyDump]]:
    """The threads at the last py-spy sample, the main thread's innermost Python frame, and
    every py-spy sample in order."""
    dumps = [s.stacks for _, s in sorted(evidence.samples.items()) if s.stacks and s.stacks.threads]
    if not dumps:
        return [], None, []
    views = []
    for thread in dumps[-1].threads:
        history = [_thread_key(dump, thread.thread) for dump in dumps]
        same = 0
        for key in reversed(history):
            if key != history[-1]:
                break
            same += 1
        python = thread.python_frames()
        below = thread.frames[:thread.frames.index(python[0])] if python else thread.frames
        views.append(ThreadView(
            thread=thread.thread, name=thread.name, state=thread.state,
            frames=[f.place() for f in python[:STACK_FRAMES]],
            native=[clipped_native(f) for f in below if not f.function.startswith("0x")][:NATIVE_FRAMES],
            unchanged_samples=same))
    main = dumps[-1].main_thread()
    innermost = main.python_frames()[0] if main and main.python_frames() else None
    return views, innermost.place() if innermost else None, dumps


def _thread_key(dump: PySpyDump, thread: str) -> tuple | None:
    found = next((t for t in dump.threads if t.thread == thread), None)
    return found.key() if found else None


def clipped_native(frame: StackFrame) -> str:
    name = frame.function if len(frame.function) <= NATIVE_NAME else frame.function[:NATIVE_NAME] + "…"
    return f"{name} ({frame.file})" if frame.file else name


def main_stack_unchanged(dumps: list[PySpyDump]) -> bool | None:
    """Whether the main thread's Python stack was the same at every sample (None: fewer than two)."""
    keys = [main.key() for dump in dumps if (main := dump.main_thread())]
    return None if len(keys) < 2 else len(set(keys)) == 1


def first_outside(frames: list[StackFrame], package: str = "torch/") -> StackFrame | None:
    """The innermost Python frame outside ``package``: where the program itself stands."""
    python = [f for f in frames if not f.native]
    return next((f for f in python if f.file and not f.file.startswith(package)
                 and f"/{package}" not in f.file), python[0] if python else None)


def _gpu(evidence: RankEvidence, nvml: dict[int, NvmlSample]) -> RankGpu | None:
    pid = evidence.process.pid if evidence.process else None
    indices = sorted({gpu.index for sample in nvml.values() for gpu in sample.gpus
                      if pid is not None and any(p.pid == pid for p in gpu.processes)})
    utilisation = []
    for _, sample in sorted(nvml.items()):
        values = [g.utilization_gpu for g in sample.gpus
                  if g.index in indices and g.utilization_gpu is not None]
        utilisation.append(max(values) if values else None)
    if evidence.gpu is None and not indices:
        return None
    gpu = RankGpu(dump=evidence.gpu_path, gpus=indices,
                  utilization_by_sample=utilisation if indices else [])
    if evidence.gpu is not None:
        _dump_view(gpu, evidence.gpu)
    return gpu


def _dump_view(gpu: RankGpu, report: TriageReport) -> None:
    """The dump's kernels by their short names, and their waits, most telling first: a wait on
    a peer, then polling, then barriers."""
    gpu.kernels = [base_name(kernel.name) for kernel in report.kernels]
    waits = [GpuWait(kernel=base_name(kernel.name), kind=wait.kind, summary=wait.summary,
                     warps=wait.warps, pcs=list(wait.pcs[:4]), address=wait.address,
                     value_registers=list(wait.value_registers))
             for kernel in report.kernels for wait in kernel.waits]
    gpu.waits = sorted(waits, key=lambda w: WAIT_ORDER.index(w.kind) if w.kind in WAIT_ORDER
                       else len(WAIT_ORDER))
    gpu.faults = [f"{fault.exception.display} in {fault.kernel.name if fault.kernel else 'no kernel'}"
                  for fault in report.faults]


def _state(groups: list[GroupProgress], dumps: list[PySpyDump], where: str | None,
           gpu: RankGpu | None) -> tuple[RankState, list[str]]:
    said: list[str] = []
    progressed = stalled = False
    for group in groups:
        known = [n for n in group.completed_by_sample if n is not None]
        if len(known) < 2:
            continue
        if known[-1] > known[0]:
            progressed = True
            said.append(f"pg {group.pg} ({group.pg_desc}): collectives completed, #{known[0]} "
                        f"to #{known[-1]}, over {len(known)} samples")
        else:
            stalled = True
            said.append(f"pg {group.pg} ({group.pg_desc}): no collective completed over "
                        f"{len(known)} samples (last completed #{known[-1]})")
    unchanged = main_stack_unchanged(dumps)
    if unchanged is True:
        said.append(f"main thread's Python stack unchanged over {len(dumps)} samples, at {where}")
    elif unchanged is False:
        said.append(f"main thread's Python stack changed between samples (last at {where})")
    load = [u for u in gpu.utilization_by_sample if u is not None] if gpu else []
    busy = bool(load) and min(load) >= BUSY_PERCENT
    if load:
        said.append(f"GPU {', '.join(map(str, gpu.gpus if gpu else []))} utilisation "
                    f"{', '.join(f'{u}%' for u in load)}")
    if progressed:
        return "progressing", said
    if busy and (stalled or unchanged):
        return "spinning", said
    if unchanged or (stalled and unchanged is None):
        return "stuck", said
    if unchanged is False:
        return "moving", said
    return "unknown", said + ["fewer than two samples of Flight Recorder or py-spy: whether it "
                              "moves is unknown"]


def _attached(evidence: RankEvidence, waits: list[GpuWait]) -> list[str]:
    """What cuda-gdb's live snapshots (--attach) say of the rank's warps, where any were taken;
    WAITS, its GPU dump's, name the loops whose polled value the snapshots follow."""
    snapshots = [sample.snapshot for _, sample in sorted(evidence.samples.items())
                 if sample.snapshot is not None]
    if not snapshots:
        return []
    read = attach.motion(snapshots, waits)
    kernels = "; ".join(f"{name}: " + ", ".join(f"{count} at {pc:#x}" for pc, count in pcs.items())
                        for name, pcs in read.pcs_by_kernel.items())
    return [f"cuda-gdb attached ({len(snapshots)} snapshots): {read.motion}, {read.evidence}"
            + (f" ({kernels})" if kernels else "")]


def read_rank(evidence: RankEvidence, nvml: dict[int, NvmlSample]) -> RankReading:
    groups = _groups(evidence)
    threads, where, dumps = _threads(evidence)
    gpu = _gpu(evidence, nvml)
    state, said = _state(groups, dumps, where, gpu)
    said += _attached(evidence, gpu.waits if gpu else [])
    main = dumps[-1].main_thread() if dumps else None
    call = collective_call(main.frames) if main else None
    process = evidence.process
    return RankReading(
        rank=evidence.rank, pid=process.pid if process else None,
        host=process.host if process else None, role=process.role if process else None,
        state=state, state_evidence=said, where=where, call=call.function if call else None,
        threads=threads, groups=groups, gpu=gpu,
        sources=evidence.notes,
        samples=sum(1 for s in evidence.samples.values() if s.flight or s.stacks))
