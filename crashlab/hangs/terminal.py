"""The terminal view of a hang reading: the verdicts first, each with its evidence, then rank by
rank, then each process group, NCCL RAS and the warnings.

Every name, path and stack comes from another machine's processes: each goes through
crashlab.console's ``plain``/``line`` (never markup) and the one wrapper (``wrapped``), which
breaks only where a line may end and indents the rest under its first.
"""

from __future__ import annotations

from rich.console import Console

from ..console import line, plain, wrapped
from .model import PLACING, HangReading, RankReading, SampleStep, note_lines
from .verdicts import group_text, pg_text

#: Evidence lines shown per verdict (the JSON has them all).
MAX_EVIDENCE = 14
#: Frames shown of a rank's main thread.
MAX_FRAMES = 4
_STATE_STYLE = {"progressing": "green", "spinning": "yellow", "stuck": "red", "moving": "yellow",
                "unknown": "dim"}


def render(reading: HangReading, console: Console) -> None:
    capture = reading.capture
    console.print(wrapped(line((reading.headline(), "bold")), indent=2))
    console.print(wrapped(plain(
        f"capture {capture.path} ({capture.trigger}, {capture.samples} host samples "
        f"{capture.interval_s:g} s apart, {capture.gpu_dumps} GPU dumps)", style="dim"), indent=2))
    if reading.signature is not None:
        console.print(wrapped(plain(f"signature {reading.signature.short}", style="dim"), indent=2))
    for verdict in reading.verdicts:
        console.print()
        style = "bold red" if verdict.kind in PLACING else "bold yellow"
        console.print(wrapped(line((f"{verdict.kind}: ", style), verdict.line), indent=2))
        for fact in verdict.evidence[:MAX_EVIDENCE]:
            console.print(wrapped(line("  - ", fact), indent=4))
        if len(verdict.evidence) > MAX_EVIDENCE:
            console.print(plain(f"  ({len(verdict.evidence) - MAX_EVIDENCE} more in --json)", "dim"))
    console.print()
    console.print(plain("Ranks", style="bold"))
    for rank in reading.ranks:
        _rank(rank, console)
    _groups(reading, console)
    _ras(reading, console)
    for warning in reading.warnings:
        console.print(wrapped(plain(f"warning: {warning}", style="yellow"), indent=2))
    for note in reading.capture.notes:
        console.print(wrapped(plain(f"capture note: {note}", style="dim"), indent=2))


def _rank(rank: RankReading, console: Console) -> None:
    who = f"rank {rank.rank}" + (f" pid {rank.pid}" if rank.pid is not None else "") + \
        (f" {rank.role}" if rank.role else "") + (f" on {rank.host}" if rank.host else "")
    console.print(wrapped(line(f"  {who}  ", (rank.state, _STATE_STYLE.get(rank.state, ""))), indent=4))
    main = rank.main_thread()
    if main is not None:
        for frame in main.frames[:MAX_FRAMES]:
            console.print(wrapped(line("      at ", frame), indent=8))
        if main.native:
            console.print(wrapped(line("      native ", (" < ".join(main.native[:3]), "dim")), indent=8))
    for fact in rank.state_evidence:
        console.print(wrapped(line("      ", (fact, "dim")), indent=8))
    for group in rank.groups:
        last = group.last_enqueued
        if last is None:
            continue
        done = {True: "completed", False: "not completed", None: "completion unknown"}[last.completed]
        console.print(wrapped(line(
            f"      {pg_text(group.pg, group.pg_desc)}: last enqueued {last.op} #{last.seq} ({done})",
            f", last completed #{group.last_completed}" if group.last_completed is not None else ""),
            indent=8))
    if rank.gpu is not None:
        for wait in rank.gpu.waits[:2]:
            console.print(wrapped(line("      GPU dump: ", f"{wait.kernel}: {wait.summary}"), indent=8))
        for fault in rank.gpu.faults[:1]:
            console.print(wrapped(line("      GPU dump: ", (f"a fault: {fault}", "red")), indent=8))
    for note in note_lines(rank.sources):
        console.print(wrapped(line("      ", (note, "yellow")), indent=8))


def _groups(reading: HangReading, console: Console) -> None:
    if not reading.groups:
        return
    console.print()
    console.print(plain("Process groups", style="bold"))
    for group in reading.groups:
        console.print(wrapped(plain(f"  {group_text(group)}"), indent=4))
        for side in group.sides:
            console.print(wrapped(line("    ", side.text()), indent=6))


def _ras(reading: HangReading, console: Console) -> None:
    for reply in reading.ras[-1:]:
        console.print()
        where = f" (rank {reply.rank}'s)" if reply.rank is not None else ""
        console.print(plain(f"NCCL RAS, sample {reply.sample}{where}: "
                            + ("healthy" if reply.healthy else "reports problems"), style="bold"))
        for row in reply.groups + reply.issues:
            console.print(wrapped(line("  ", row), indent=4))


def step_text(step: SampleStep) -> str:
    """One sample of a group's timeline: what the rank had enqueued, started and completed."""
    if step.enqueued is None:
        return f"sample {step.sample}: nothing recorded"
    started = f", started #{step.started}" if step.started is not None else ""
    completed = f"#{step.completed}" if step.completed is not None else "none"
    return f"sample {step.sample}: enqueued {step.op} #{step.enqueued}{started}, completed {completed}"


def timelines(reading: HangReading, console: Console) -> None:
    """Each rank's process groups sample by sample (crashlab show of a hang)."""
    console.print()
    console.print(plain("Timeline (each rank's Flight Recorder at each host sample)", style="bold"))
    for rank in reading.ranks:
        for group in rank.groups:
            if not group.timeline:
                continue
            console.print(wrapped(line(f"  rank {rank.rank} {pg_text(group.pg, group.pg_desc)}: ",
                                       "; ".join(map(step_text, group.timeline))), indent=4))
