"""One process group across its ranks: the first collective they disagree on.

Each rank's last Flight Recorder dump is compared collective by collective, from the oldest one
every rank's buffer still holds (a ring buffer forgets the oldest first) to the newest any rank
enqueued. The first number where a rank that should have it never enqueued it (its newest is
older), or where the ranks that have it recorded another op, other sizes or other dtypes, is
where they disagree; a rank whose buffer no longer reaches back that far is unknown, never
counted as behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .evidence import RankEvidence
from .flightrecorder import Entry, FlightRecord
from .model import DisagreementKind, GroupReading, RankPosition, Side
from .rank import collectives_by_group, done, last_completed


@dataclass
class _Rank:
    rank: int
    entries: dict[int, Entry]
    completed: int | None

    @property
    def newest(self) -> int:
        return max(self.entries)

    @property
    def oldest(self) -> int:
        return min(self.entries)


def latest_records(ranks: dict[int, RankEvidence]) -> dict[int, FlightRecord]:
    """Each rank's Flight Recorder dump of its last sample that has one."""
    found = {}
    for number, evidence in ranks.items():
        dumped = [s.flight for _, s in sorted(evidence.samples.items()) if s.flight is not None]
        if dumped:
            found[number] = dumped[-1]
    return found


def read_groups(records: dict[int, FlightRecord], ranks: list[int]) -> list[GroupReading]:
    """Every process group any rank's dump names, compared across the ranks that have it. A
    rank of ``ranks`` with no dump at all is unknown in every group: nothing says it is not a
    member (gloo's pg_config names its groups otherwise than its entries do)."""
    per_group: dict[tuple[str, str], dict[int, _Rank]] = {}
    for number, record in sorted(records.items()):
        for key, entries in collectives_by_group(record).items():
            per_group.setdefault(key, {})[number] = _Rank(
                number, {e.seq: e for e in entries}, last_completed(record, entries))
    undumped = set(ranks) - set(records)
    readings = []
    for (name, desc), members in per_group.items():
        named = {r for record in records.values() for r in record.pg_ranks.get(name, [])}
        unknown = sorted(((named & set(ranks)) | undumped) - set(members))
        readings.append(_compare(name, desc, members, unknown))
    return readings


def _shape(entry: Entry) -> tuple:
    return (entry.op, _frozen(entry.input_sizes), _frozen(entry.output_sizes),
            tuple(entry.input_dtypes), tuple(entry.output_dtypes))


def _frozen(sizes: list[list[int]]) -> tuple:
    return tuple(tuple(shape) for shape in sizes)


def _compare(name: str, desc: str, members: dict[int, _Rank], unknown: list[int]) -> GroupReading:
    reading = GroupReading(pg=name, pg_desc=desc, ranks=sorted([*members, *unknown]),
                           unknown=list(unknown), positions=[_position(m) for m in members.values()])
    start = max(m.oldest for m in members.values())
    numbers = sorted({seq for m in members.values() for seq in m.entries if seq >= start})
    for seq in numbers:
        present = {r: m.entries[seq] for r, m in members.items() if seq in m.entries}
        never = sorted(r for r, m in members.items() if seq not in m.entries and m.newest < seq)
        shapes = {_shape(entry) for entry in present.values()}
        if not never and len(shapes) == 1:
            continue
        reading.seq = seq
        reading.op = _common_op(present)
        reading.kind, reading.sides = _kind(present) if len(shapes) > 1 else ("not-entered", [])
        reading.behind = never
        reading.unknown += sorted(r for r in members if r not in present and r not in never)
        reading.waiting = sorted(r for r in present if not _completed(members[r], seq))
        reading.completed = sorted(r for r in present if _completed(members[r], seq))
        return reading
    newest = max(numbers, default=None)
    if newest is not None:  # they agree: who still waits in the newest collective
        reading.op = _common_op({r: m.entries[newest] for r, m in members.items()
                                 if newest in m.entries})
        reading.waiting = sorted(r for r, m in members.items()
                                 if newest in m.entries and not _completed(m, newest))
        reading.completed = sorted(r for r, m in members.items()
                                   if newest in m.entries and _completed(m, newest))
        if reading.waiting:
            reading.seq = newest
    return reading


def _completed(member: _Rank, seq: int) -> bool:
    return done(member.entries[seq]) or (member.completed is not None and seq <= member.completed)


def _common_op(present: dict[int, Entry]) -> str | None:
    ops = sorted({entry.op for entry in present.values()})
    return ops[0] if len(ops) == 1 else " / ".join(ops) if ops else None


def _kind(present: dict[int, Entry]) -> tuple[DisagreementKind, list[Side]]:
    """How the ranks that entered a collective disagree on it, and each side, the smaller first."""
    checks: tuple[tuple[DisagreementKind, Callable[[Entry], object]], ...] = (
        ("op", lambda e: e.op),
        ("sizes", lambda e: (e.input_sizes, e.output_sizes)),
        ("dtypes", lambda e: (e.input_dtypes, e.output_dtypes)))
    for kind, read in checks:
        sides: dict[str, list[int]] = {}
        for rank, entry in sorted(present.items()):
            sides.setdefault(_shown(kind, read(entry)), []).append(rank)
        if len(sides) > 1:
            ordered = sorted(sides.items(), key=lambda side: (len(side[1]), side[1]))
            return kind, [Side(value=value, ranks=ranks) for value, ranks in ordered]
    return "not-entered", []


def _shown(kind: str, value) -> str:
    if kind == "op":
        return str(value)
    inputs, outputs = value
    return f"input {_list(inputs)}, output {_list(outputs)}"


def _list(value: list) -> str:
    return "[" + ", ".join(_list(v) if isinstance(v, list) else str(v) for v in value) + "]"


def _position(member: _Rank) -> RankPosition:
    newest = member.entries[member.newest]
    return RankPosition(rank=member.rank, last_enqueued=newest.seq, op=newest.op,
                        last_completed=member.completed)
