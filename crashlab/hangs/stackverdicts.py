"""The verdict the ranks' Python stacks carry where no rank has a Flight Recorder dump.

A rank whose main thread stood in a torch.distributed collective (crashlab.hangs.calls), its
stack the same at every sample, waits in it; one whose stack stood elsewhere, unchanged, is not
in any collective. That is all the stacks say: no process group and no collective number (so
never "never entered #N"), no sizes, and an unchanged stack is not a collective that never
completed (a loop that comes back to the same call between samples looks the same). A rank
whose stack moved between samples is not read as hung. Where Flight Recorder is there its
verdicts stand; the stacks add where a rank it cannot place stands, and a line where they
contradict it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..notation import counted
from .calls import c10d_native
from .model import RankReading, ThreadView, Verdict, note_lines, ranks_text
from .verdicts import gpu_evidence, rank_evidence, their_warps

FROM_STACKS = ("from Python stacks only: no Flight Recorder, so the process group and the "
               "collective's number are unknown")


@dataclass
class _Sides:
    """The ranks as their stacks place them."""

    waiting: dict[str, list[int]] = field(default_factory=dict)
    """each collective and the ranks whose unchanged stacks stand in it"""
    outside: list[int] = field(default_factory=list)
    """ranks whose unchanged stacks stand in no collective"""
    moving: list[int] = field(default_factory=list)
    """ranks whose stacks moved between samples"""
    unplaced: list[int] = field(default_factory=list)
    """ranks with fewer than two samples of their stack"""


def _sides(ranks: dict[int, RankReading]) -> _Sides:
    sides = _Sides()
    for number, reading in sorted(ranks.items()):
        if reading.state in ("stuck", "spinning"):
            if reading.call:
                sides.waiting.setdefault(reading.call, []).append(number)
            else:
                sides.outside.append(number)
        elif reading.state == "moving":
            sides.moving.append(number)
        else:
            sides.unplaced.append(number)
    return sides


def stack_verdicts(ranks: dict[int, RankReading]) -> list[Verdict]:
    """The verdict of a capture in which no rank has a Flight Recorder dump; none where no rank's
    stack stands, unchanged, in a collective."""
    sides = _sides(ranks)
    if not sides.waiting:
        return []
    ordered = sorted(sides.waiting.items(), key=lambda side: (len(side[1]), side[1]))
    waits = "; ".join(_waits(op, who, ranks) for op, who in reversed(ordered))
    rest = [*(_outside(r, ranks[r]) for r in sides.outside),
            *(_moving(r, ranks[r]) for r in sides.moving),
            *(_unplaced(r, ranks[r]) for r in sides.unplaced)]
    every = [r for _, who in ordered for r in who]
    if len(ordered) > 1:
        kind, lagging, op = "stack-mismatch", ordered[0][1], " / ".join(sorted(sides.waiting))
        line = f"the ranks stand in different collectives: {waits}"
    elif sides.outside:
        kind, lagging, op = "stack-outside", sides.outside, ordered[0][0]
        line = waits
    elif rest:
        kind, lagging, op = "incomplete", sides.moving + sides.unplaced, ordered[0][0]
        line = waits
    else:
        op = ordered[0][0]
        kind, lagging = "stack-all-waiting", every
        line = (f"every rank ({', '.join(map(str, every))}) waits in {op} (their Python stacks, "
                f"{_unchanged(every, ranks)}{their_warps(every, ranks)}): no rank stands outside "
                "it; which call of it each is in, and with what sizes, the stacks do not say (a "
                "size mismatch looks the same)")
    line += "".join(f"; {said}" for said in rest) + f" ({FROM_STACKS})"
    evidence = _stack_evidence(sides, ranks) + gpu_evidence(every, ranks) + _no_flight(ranks)
    evidence += rank_evidence(lagging, ranks)
    return [Verdict(kind=kind, line=line, evidence=evidence, ranks=lagging, op=op)]


def stack_disagreements(found: list[Verdict], ranks: dict[int, RankReading]) -> list[Verdict]:
    """Where Flight Recorder says a rank never entered the collective, has nothing of its own
    not completed, and yet the rank's unchanged stack stands in a collective."""
    said = []
    for verdict in (v for v in found if v.kind == "never-entered"):
        for number in verdict.ranks:
            reading = ranks.get(number)
            main = _main(reading) if reading is not None else None
            if reading is None or not reading.call or main is None or main.unchanged_samples < 2 \
                    or reading.state not in ("stuck", "spinning"):
                continue
            if any(g.last_enqueued is not None and g.last_enqueued.completed is False
                   for g in reading.groups):
                continue
            said.append(Verdict(kind="sources-disagree", line=(
                f"Flight Recorder says rank {number} never entered {verdict.op} #{verdict.seq} and "
                f"holds no collective of its own not completed, while its Python stack stands in "
                f"{reading.call}, {_unchanged([number], ranks)}: the sources disagree"),
                evidence=[f"py-spy: rank {number}: main thread at {reading.where}"]
                + [f"rank {number} {reading.state}: {fact}" for fact in reading.state_evidence],
                ranks=[number], pg=verdict.pg, seq=verdict.seq, op=verdict.op))
    return said


def stack_places(found: list[Verdict], ranks: dict[int, RankReading]) -> None:
    """Where Flight Recorder cannot place a rank (an ``incomplete`` verdict: its dump is missing
    or does not reach the collective), what the rank's Python stack says, added to the line:
    the stack cannot say which collective, only whether the rank stands in one."""
    for verdict in (v for v in found if v.kind == "incomplete"):
        said = [place for number in verdict.ranks if number in ranks
                and (place := _by_stack(number, ranks[number]))]
        if said:
            verdict.line += "".join(f"; {place}" for place in said)


def _by_stack(number: int, reading: RankReading) -> str | None:
    if reading.state in ("stuck", "spinning") and reading.call:
        return (f"rank {number}'s Python stack stands in {reading.call}, "
                f"{_unchanged([number], {number: reading})} (which call of it, its stack does not say)")
    if reading.state in ("stuck", "spinning"):
        return _outside(number, reading) + " (its Python stack)"
    if reading.state == "moving":
        return _moving(number, reading)
    return None


def _main(reading: RankReading) -> ThreadView | None:
    return reading.main_thread() or next(iter(reading.threads), None)


def _unchanged(numbers: list[int], ranks: dict[int, RankReading]) -> str:
    """``unchanged over 3 samples`` (``over 2-3 samples`` where the ranks had different counts)."""
    counts = sorted({main.unchanged_samples for r in numbers if (main := _main(ranks[r]))})
    if not counts:
        return "unchanged"
    shown = f"{counts[0]}-{counts[-1]}" if len(counts) > 1 else str(counts[0])
    return f"unchanged over {shown} samples"


def _waits(op: str, who: list[int], ranks: dict[int, RankReading]) -> str:
    one = len(who) == 1
    warps = their_warps(who, ranks, ", its warps" if one else ", their warps")
    return (f"{ranks_text(who)} {'waits' if one else 'wait'} in {op} ({'its' if one else 'their'} "
            f"Python {'stack' if one else 'stacks'}, {_unchanged(who, ranks)}{warps})")


def _outside(number: int, reading: RankReading) -> str:
    return (f"rank {number} is not in any collective: it stands in {reading.where}, "
            f"{_unchanged([number], {number: reading})}")


def _moving(number: int, reading: RankReading) -> str:
    return (f"rank {number}'s Python stack moved between samples (last at {reading.where}): not "
            "read as hung")


def _unplaced(number: int, reading: RankReading) -> str:
    why = next((line for line in note_lines(reading.sources) if line.startswith("py-spy")),
               "fewer than two py-spy samples")
    return f"rank {number} cannot be placed: {why}"


def _stack_evidence(sides: _Sides, ranks: dict[int, RankReading]) -> list[str]:
    """Where each placed rank's main thread stands, and the c10d frames below a waiting one."""
    places: dict[str, list[int]] = {}
    natives: dict[str, list[int]] = {}
    for number in sorted([r for who in sides.waiting.values() for r in who] + sides.outside):
        reading = ranks[number]
        where = f"main thread at {reading.where}, {_unchanged([number], ranks)}"
        if not reading.call:
            where += ", in no collective of torch.distributed"
        elif not (reading.where or "").endswith(f" {reading.call}"):
            where += f", in torch.distributed's {reading.call}"
        places.setdefault(where, []).append(number)
        main = _main(reading)
        c10d = c10d_native(main.native) if main and reading.call else []
        if c10d:
            natives.setdefault(" < ".join(c10d[:2]), []).append(number)
    return [f"py-spy: {ranks_text(who)}: {fact}" for fact, who in places.items()] + \
        [f"py-spy --native: {ranks_text(who)}: {frames} under the call"
         for frames, who in natives.items()]


def _no_flight(ranks: dict[int, RankReading]) -> list[str]:
    """Why there is no Flight Recorder dump, as capture.json says for the first rank."""
    for reading in ranks.values():
        lines = [line for line in note_lines(reading.sources) if line.startswith("flight-recorder")]
        if lines:
            return [f"Flight Recorder: no rank has a dump ({counted(len(ranks), 'rank')}; "
                    f"rank {reading.rank}: {lines[0]})"]
    return [f"Flight Recorder: no rank has a dump ({counted(len(ranks), 'rank')})"]
