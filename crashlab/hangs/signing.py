"""The signature of a hang across ranks: the same hang after a restart, on another machine or
with another rank lagging, is one signature.

Its parts are what stays when the hang recurs: how the ranks disagree (a rank never entered the
collective, or entered it with another op, other sizes or dtypes, or no rank completes it, or a
peer never sent what a rank waits to receive, or never received what it sends), the
collective's op, its process group's description, and where the lagging rank's program stands:
the innermost Python frame outside torch, as function and file name. Sequence numbers, ranks,
line numbers, paths, pids and addresses change from run to run and are left out; the coarse
hash leaves out the place too (the same hang across releases, where the code moves).
"""

from __future__ import annotations

import os

from ..report.signature import CrashSignature, seal
from .model import PLACING, HangReading, Verdict
from .pyspy import StackFrame

#: How each placing verdict is named in the signature's text.
PATTERNS = {"never-entered": "never entered", "unmatched-p2p": "never matched",
            "mismatch": "entered differently", "no-progress": "none completes",
            "stack-outside": "not in it by its stack", "stack-mismatch": "in another by its stack",
            "stack-all-waiting": "all in it by their stacks"}


def sign(reading: HangReading, places: dict[int, StackFrame | None]) -> CrashSignature | None:
    """The signature of the reading's first placing verdict; None where no verdict places the
    hang. ``places``: each rank's innermost Python frame outside torch at its last sample."""
    verdict = next((v for v in reading.verdicts if v.kind in PLACING), None)
    if verdict is None:
        return None
    if verdict.seq is None:
        return _from_stacks(verdict, places)
    group = next((g for g in reading.groups if g.pg == verdict.pg and g.seq == verdict.seq), None)
    if group is not None:
        named_group = group.pg_desc or f"pg {group.pg}"
    else:
        named_group = verdict.pg_desc or (f"pg {verdict.pg}" if verdict.pg else "unknown group")
    pattern = PATTERNS[verdict.kind]
    if verdict.kind == "mismatch" and group and group.kind:
        pattern = f"{pattern} ({group.kind})"
    if verdict.kind == "unmatched-p2p":  # the lagging rank is the peer that never matched it
        pattern = "never sent" if verdict.op == "recv" else "never received"
    parts = [pattern, verdict.op or "unknown op", named_group]
    coarse = list(parts)
    place, notes = _place(verdict, places)
    parts.append(place)
    lagging = f"rank {verdict.ranks[0]}" if len(verdict.ranks) == 1 else "the lagging ranks"
    title = f"{verdict.op} of {named_group}: {lagging} {pattern}; stands in {place}"
    notes.append("sequence numbers, ranks, lines, paths and addresses are left out: they change "
                 "from run to run")
    return seal("collective-hang", parts, title, f'"{verdict.op}" hang "{place.split(" ")[0]}"',
                notes, coarse)


def _from_stacks(verdict: Verdict, places: dict[int, StackFrame | None]) -> CrashSignature:
    """A verdict from Python stacks alone: no process group to name, so its parts are the
    pattern, torch.distributed's function the ranks wait in and the lagging ranks' place."""
    pattern = PATTERNS[verdict.kind]
    parts = [pattern, verdict.op or "unknown op"]
    coarse = list(parts)
    place, notes = _place(verdict, places)
    parts.append(place)
    lagging = "every rank" if verdict.kind == "stack-all-waiting" else \
        f"rank {verdict.ranks[0]}" if len(verdict.ranks) == 1 else "the lagging ranks"
    title = f"{verdict.op} (Python stacks only): {lagging} {pattern}; stands in {place}"
    notes.append("from Python stacks only: no process group in it, and the same hang read with "
                 "Flight Recorder signs otherwise")
    notes.append("ranks, lines, paths and addresses are left out: they change from run to run")
    return seal("collective-hang", parts, title, f'"{verdict.op}" hang "{place.split(" ")[0]}"',
                notes, coarse)


def _place(verdict: Verdict, places: dict[int, StackFrame | None]) -> tuple[str, list[str]]:
    found = [places.get(rank) for rank in verdict.ranks]
    named = sorted({f"{frame.function} {os.path.basename(frame.file or '')}".strip()
                    for frame in found if frame is not None})
    if not named:
        return "unknown place", ["no py-spy sample of the lagging rank: its place is unknown"]
    if len(named) > 1:
        return " / ".join(named), ["the lagging ranks stand in different places"]
    return named[0], []
