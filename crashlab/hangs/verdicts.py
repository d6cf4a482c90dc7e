"""The verdict lines of a hang reading, each with the facts it rests on.

A line says only what its evidence carries: which ranks never entered the collective the others
wait in (Flight Recorder), what the others wait in (their stacks, their warps), where each
lagging rank stands instead and whether it moved (py-spy over the samples, its GPU dump). A rank
that cannot be placed is said to be unknown, never assumed. Where two sources contradict each
other (NCCL RAS reports healthy communicators while Flight Recorder shows a collective that no
longer completes, as NVIDIA/nccl#1730 saw with a PyTorch timeout) the reading says so in a line
of its own.
"""

from __future__ import annotations

from ..notation import counted
from .evidence import RasReply
from .model import (
    PLACING,
    Collective,
    GroupReading,
    PeerWait,
    RankReading,
    Verdict,
    note_lines,
    ranks_text,
)
from .ras import RasStatus

#: How a wait class of crashlab.waits reads after "their warps".
WAIT_WORDS = {"polling-memory": "polling memory", "barrier": "at a barrier",
              "barrier-after-exit": "at a barrier others exited past",
              "collective-wait": "in a collective wait", "other": "elsewhere"}


def verdicts(groups: list[GroupReading], ranks: dict[int, RankReading],
             replies: list[RasReply], peer_waits: list[PeerWait] | None = None) -> list[Verdict]:
    found = [_unmatched(wait, ranks) for wait in peer_waits or []]
    for group in groups:
        verdict = _of_group(group, ranks)
        if verdict is not None:
            found.append(verdict)
    for verdict in found:
        verdict.evidence += _ras_evidence(replies)
    found.sort(key=lambda v: ([*PLACING, "incomplete"].index(v.kind), v.seq or 0))
    return found + _contradictions(found, replies, flight_recorder=bool(groups))


def pg_text(name: str, desc: str) -> str:
    """``pg 0 (default_pg)``: a process group as Flight Recorder names it."""
    return f"pg {name} ({desc})" if desc else f"pg {name}"


def group_text(group: GroupReading) -> str:
    """A process group's line, the same in every view: its ranks, and the first collective they
    disagree on with who never entered it, who waits in it and whose dump cannot say."""
    said = f"{pg_text(group.pg, group.pg_desc)}, ranks {', '.join(map(str, group.ranks))}: "
    if group.seq is None:
        return said + "the ranks agree on every collective their dumps hold"
    said += f"first disagreement at {group.op} #{group.seq} ({group.kind or 'none'})"
    for word, ranks in (("never entered by", group.behind), ("waited in by", group.waiting),
                        ("unknown for", group.unknown)):
        if ranks:
            said += f"; {word} {ranks_text(ranks)}"
    return said


def _of_group(group: GroupReading, ranks: dict[int, RankReading]) -> Verdict | None:
    if group.seq is None:
        return None
    if group.kind in ("op", "sizes", "dtypes"):
        return _mismatch(group, ranks)
    if group.behind:
        return _never_entered(group, ranks)
    if group.unknown:
        return _incomplete(group, ranks)
    if group.waiting and not group.completed:
        return _no_progress(group, ranks)
    return None


def _never_entered(group: GroupReading, ranks: dict[int, RankReading]) -> Verdict:
    at = f"{group.op} #{group.seq} of {pg_text(group.pg, group.pg_desc)}"
    line = f"{ranks_text(group.behind)} never entered {at}"
    if group.waiting:
        line += (f" ({ranks_text(group.waiting)} {'waits' if len(group.waiting) == 1 else 'wait'} "
                 f"in it{their_warps(group.waiting, ranks)})")
    line += "; " + "; ".join(_place(ranks.get(r), r) for r in group.behind)
    evidence = [_entered(group, ranks)] + [_newest(group, r) for r in group.behind]
    evidence += _waits_evidence(group, ranks) + _unknown_evidence(group)
    evidence += rank_evidence(group.behind, ranks)
    return Verdict(kind="never-entered", line=line, evidence=evidence, ranks=group.behind,
                   pg=group.pg, seq=group.seq, op=group.op)


def _unmatched(wait: PeerWait, ranks: dict[int, RankReading]) -> Verdict:
    """A rank in a send or recv its peer never matched; where the peer stands instead."""
    group = pg_text(wait.pg, wait.pg_desc)
    toward = "from" if wait.op == "recv" else "to"
    other, verb = ("send", "sent") if wait.op == "recv" else ("recv", "received")
    line = (f"rank {wait.rank} waits in {wait.op} #{wait.seq} of {group} {toward} rank "
            f"{wait.peer}, which rank {wait.peer} never {verb} ({counted(wait.peer_made, other)} "
            f"{'to' if other == 'send' else 'from'} rank {wait.rank} in its dump, "
            f"{wait.nth} needed); {_place(ranks.get(wait.peer), wait.peer)}")
    evidence = [f"Flight Recorder: rank {wait.rank}'s {wait.profiling_name} (#{wait.seq} of "
                f"{group}, its {_ordinal(wait.nth)} {wait.op} {toward} rank {wait.peer}) not "
                "completed",
                f"Flight Recorder: rank {wait.peer}'s dump holds every point-to-point operation "
                f"of {group} from its first: {counted(wait.peer_made, other)} "
                f"{'to' if other == 'send' else 'from'} rank {wait.rank}"]
    evidence += rank_evidence([wait.peer], ranks)
    return Verdict(kind="unmatched-p2p", line=line, evidence=evidence, ranks=[wait.peer],
                   pg=wait.pg, pg_desc=wait.pg_desc, seq=wait.seq, op=wait.op)


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _mismatch(group: GroupReading, ranks: dict[int, RankReading]) -> Verdict:
    what = {"op": "ops", "sizes": "sizes", "dtypes": "dtypes"}[group.kind or "sizes"]
    at = f"{group.op} #{group.seq} of {pg_text(group.pg, group.pg_desc)}"
    line = f"{at} was entered with different {what}: " + "; ".join(s.text() for s in group.sides)
    odd = group.sides[0].ranks if group.sides else []
    for rank in group.waiting:
        line += f"; {_place(ranks.get(rank), rank, f'waits in #{group.seq} at')}"
    line += _moved_on(group, odd)
    evidence = [_entered(group, ranks)] + _waits_evidence(group, ranks) + _unknown_evidence(group)
    evidence += rank_evidence(odd, ranks)
    return Verdict(kind="mismatch", line=line, evidence=evidence, ranks=odd, pg=group.pg,
                   seq=group.seq, op=group.op)


def _moved_on(group: GroupReading, odd: list[int]) -> str:
    """``; ranks 0, 1, 3 completed it and wait in all_reduce #7, which rank 2 never entered``."""
    moved = [p for p in group.positions if p.rank in group.completed
             and p.last_enqueued is not None and p.last_enqueued > (group.seq or 0)]
    if not moved:
        return ""
    newest = max(p.last_enqueued or 0 for p in moved)
    said = f"; {ranks_text([p.rank for p in moved])} completed it"
    waiting = [p for p in moved if p.last_completed is None or p.last_completed < newest]
    if len(waiting) < len(moved):
        return said + f" and went on to #{newest}"
    said += f" and wait in {moved[0].op} #{newest}"
    behind = [p.rank for p in group.positions if p.rank in odd and (p.last_enqueued or 0) < newest]
    return said + (f", which {ranks_text(behind)} never entered" if behind == odd and odd else "")


def _no_progress(group: GroupReading, ranks: dict[int, RankReading]) -> Verdict:
    line = (f"every rank of {pg_text(group.pg, group.pg_desc)} ({', '.join(map(str, group.waiting))}) entered "
            f"{group.op} #{group.seq} and none completed it{their_warps(group.waiting, ranks, ', their warps')}: "
            "no rank is missing from it")
    evidence = [_entered(group, ranks)] + _waits_evidence(group, ranks)
    evidence += rank_evidence(group.waiting, ranks)
    return Verdict(kind="no-progress", line=line, evidence=evidence, ranks=group.waiting,
                   pg=group.pg, seq=group.seq, op=group.op)


def _incomplete(group: GroupReading, ranks: dict[int, RankReading]) -> Verdict:
    line = (f"{ranks_text(group.waiting or group.completed)} of {pg_text(group.pg, group.pg_desc)} reached "
            f"{group.op} #{group.seq}; {ranks_text(group.unknown)} cannot be placed: "
            "no Flight Recorder dump that reaches it")
    evidence = [_entered(group, ranks)] + _unknown_evidence(group)
    evidence += rank_evidence(group.unknown, ranks)
    return Verdict(kind="incomplete", line=line, evidence=evidence, ranks=group.unknown,
                   pg=group.pg, seq=group.seq, op=group.op)


def their_warps(waiting: list[int], ranks: dict[int, RankReading], lead: str = ", their warps") -> str:
    """``, their warps polling memory in cross_device_reduce_1stage`` where every waiting rank's
    GPU dump shows the same first wait; empty otherwise."""
    firsts = set()
    for rank in waiting:
        gpu = ranks[rank].gpu if rank in ranks else None
        if gpu is None or not gpu.waits:
            return ""
        firsts.add((gpu.waits[0].kind, gpu.waits[0].kernel))
    if len(firsts) != 1:
        return ""
    kind, kernel = firsts.pop()
    return f"{lead} {WAIT_WORDS.get(kind, kind)} in {kernel}"


def _place(reading: RankReading | None, rank: int, doing: str = "is in") -> str:
    """``rank 2 is in workload.py:32 recv_requests, unchanged over 3 samples``."""
    if reading is None or reading.where is None:
        return f"rank {rank}'s Python stack is unknown (no py-spy sample)"
    main = reading.main_thread()
    same = main.unchanged_samples if main else 1
    return f"rank {rank} {doing} {reading.where}" + (
        f", unchanged over {same} samples" if same >= 2 else "")


def _entered(group: GroupReading, ranks: dict[int, RankReading]) -> str:
    """Flight Recorder's account of the collective: who enqueued it, with what, who completed."""
    entry = _collective_of(group, ranks, group.waiting + group.completed)
    shape = ""
    if entry is not None and group.kind in (None, "not-entered"):
        shape = f" (input {entry.input_sizes} {', '.join(entry.input_dtypes)})"
    entered = sorted(group.waiting + group.completed) or group.ranks
    said = f"Flight Recorder: {ranks_text(entered)} enqueued {group.op} #{group.seq}{shape}"
    if group.waiting:
        said += f"; not completed on {ranks_text(group.waiting)}"
    if group.completed:
        said += f"; completed on {ranks_text(group.completed)}"
    waited = [c.waited_s for r in group.waiting if (c := _last(ranks, r, group))
              and c.seq == group.seq and c.waited_s is not None]
    timeouts = [c.timeout_s for r in group.waiting if (c := _last(ranks, r, group))
                and c.timeout_s]
    if waited:
        said += f"; waiting {max(waited):.1f} s"
        if timeouts:
            past = " (past its timeout)" if max(waited) > min(timeouts) else ""
            said += f" of a {min(timeouts):g} s timeout{past}"
    return said


def _newest(group: GroupReading, rank: int) -> str:
    position = next((p for p in group.positions if p.rank == rank), None)
    if position is None or position.last_enqueued is None:
        return f"Flight Recorder: rank {rank} has no collective of {pg_text(group.pg, group.pg_desc)}"
    done = position.last_completed is not None and position.last_completed >= position.last_enqueued
    return (f"Flight Recorder: rank {rank}'s newest collective of {pg_text(group.pg, group.pg_desc)} is "
            f"{position.op} #{position.last_enqueued}, "
            + ("completed" if done else f"not completed (last completed #{position.last_completed})"))


def _waits_evidence(group: GroupReading, ranks: dict[int, RankReading]) -> list[str]:
    said = []
    places: dict[str, list[int]] = {}
    for rank in group.ranks:
        reading = ranks.get(rank)
        if reading is not None and reading.where:
            places.setdefault(reading.where, []).append(rank)
    for where, who in places.items():
        said.append(f"py-spy: {ranks_text(who)}: main thread at {where}")
    said += gpu_evidence(group.waiting, ranks)
    stacks = {tuple(c.stack[:3]) for r in group.waiting if (c := _last(ranks, r, group)) and c.stack}
    if len(stacks) == 1:
        said.append("Flight Recorder's stack of it: " + " < ".join(stacks.pop()))
    return said


def gpu_evidence(numbers: list[int], ranks: dict[int, RankReading]) -> list[str]:
    """Where the warps of these ranks' GPU dumps stand (two classes each), a line per fact with
    the ranks whose dumps show it (``GPU dumps of ranks 0, 1, 3: ...``)."""
    facts: dict[str, list[int]] = {}
    for rank in numbers:
        gpu = ranks[rank].gpu if rank in ranks else None
        if gpu is None:
            continue
        for fact in [f"{w.kernel}: {w.summary}" for w in gpu.waits[:2]] + \
                [f"a fault, not a hang: {fault}" for fault in gpu.faults[:1]]:
            facts.setdefault(fact, []).append(rank)
    return [f"GPU {'dump' if len(who) == 1 else 'dumps'} of {ranks_text(who)}: {fact}"
            for fact, who in facts.items()]


def _unknown_evidence(group: GroupReading) -> list[str]:
    if not group.unknown:
        return []
    return [f"{ranks_text(group.unknown)} of {pg_text(group.pg, group.pg_desc)}: no Flight Recorder dump that "
            f"reaches #{group.seq}"]


def rank_evidence(numbers: list[int], ranks: dict[int, RankReading]) -> list[str]:
    said = []
    for rank in numbers:
        reading = ranks.get(rank)
        if reading is None:
            continue
        said += [f"rank {rank} {reading.state}: {fact}" for fact in reading.state_evidence]
        said += gpu_evidence([rank], ranks)
        said += [f"rank {rank}: {line}" for line in note_lines(reading.sources)[:3]]
    return said


def _last(ranks: dict[int, RankReading], rank: int, group: GroupReading) -> Collective | None:
    reading = ranks.get(rank)
    if reading is None:
        return None
    progress = next((g for g in reading.groups if g.pg == group.pg and g.pg_desc == group.pg_desc), None)
    return progress.last_enqueued if progress else None


def _collective_of(group: GroupReading, ranks: dict[int, RankReading], who: list[int]) -> Collective | None:
    for rank in who:
        entry = _last(ranks, rank, group)
        if entry is not None and entry.seq == group.seq:
            return entry
    return None


def _ras_lines(status: RasStatus) -> list[str]:
    lines = []
    for issue in status.issues:
        head = f"{issue.kind} {issue.communicator}" if issue.communicator else issue.kind
        lines.append(f"{head}: " + "; ".join(issue.lines[:4]))
    return lines


def _ras_evidence(replies: list[RasReply]) -> list[str]:
    return [f"NCCL RAS (sample {reply.sample}): {line}" for reply in _latest(replies)
            for line in _ras_lines(reply.status)]


def _latest(replies: list[RasReply]) -> list[RasReply]:
    """The newest RAS reply (RAS answers for the whole job: one is enough)."""
    return sorted(replies, key=lambda reply: reply.sample)[-1:]


def _contradictions(found: list[Verdict], replies: list[RasReply], *,
                    flight_recorder: bool) -> list[Verdict]:
    """RAS against Flight Recorder; ``flight_recorder``: whether any rank's dump was read (without
    one, nothing says the ranks agree)."""
    latest = _latest(replies)
    if not latest:
        return []
    reply = latest[0]
    placing = [v for v in found if v.kind in PLACING]
    if reply.status.healthy and placing:
        return [Verdict(kind="sources-disagree", line=(
            f"NCCL RAS reports every communicator RUNNING with no error (sample {reply.sample}) "
            f"while Flight Recorder shows {placing[0].op} #{placing[0].seq} not completed: the "
            "sources disagree; RAS has reported healthy communicators while PyTorch timed out"),
            evidence=[f"NCCL RAS: {counted(len(reply.status.groups), 'communicator group')}, all RUNNING, OK"],
            pg=placing[0].pg, seq=placing[0].seq, op=placing[0].op)]
    mismatched = [i for i in reply.status.issues if "MISMATCH" in i.kind]
    if mismatched and not placing and flight_recorder:
        return [Verdict(kind="sources-disagree", line=(
            f"NCCL RAS reports {mismatched[0].kind} on {mismatched[0].communicator or 'a communicator'} "
            f"(sample {reply.sample}) while Flight Recorder's ranks agree on every collective "
            "they hold: the sources disagree"), evidence=_ras_lines(reply.status))]
    return []
