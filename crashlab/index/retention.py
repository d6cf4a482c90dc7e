"""``crashlab gc``: which coredumps to keep. Every failing request can write a multi-GB core, and
the hundredth dump of a known bug says little the first ones did not, so each signature keeps its
first N dumps (the earliest: they show the bug before restarts blur it) and, over all, the dumps
kept fit a disk budget, spent on each signature's first dump before any signature's second.

Past the retention, a file crashlab made (a run directory's, a copy it took) is deleted; a file
recorded by reference (``inspect --record``, ``report`` on a user's dump) is the user's, and is
only forgotten: the index stops counting it and leaves it on disk. Either way the crash rows stay.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from .records import Collected

#: Why a file past the retention that crashlab does not own stays on disk.
NOT_OWNED = "recorded by reference, not crashlab's to delete: left on disk"


@dataclass
class Retention:
    keep_per_signature: int
    max_bytes: int | None = None


def plan(dumps: list[tuple[int, str, str, int, int]], retention: Retention) -> list[Collected]:
    """dumps: (crash id, signature, path, size, owned), each signature's earliest first
    (Index.dumps). A dump already gone from the disk is marked so and takes no place."""
    rank: dict[str, int] = {}
    decided, ranked = [], []
    for crash_id, signature, path, size, owned in dumps:
        if not os.path.exists(path):
            decided.append(Collected(crash=crash_id, signature=signature, path=path,
                                     size_bytes=size, action="missing", why="no longer on disk"))
            continue
        rank[signature] = rank.get(signature, 0) + 1
        ranked.append((rank[signature], crash_id, signature, path, size, owned))
    spent = 0
    for place, crash_id, signature, path, size, owned in sorted(ranked, key=lambda r: r[0]):
        action, why = _decide(place, size, spent, retention)
        spent += size if action == "kept" else 0
        if action == "deleted" and not owned:
            action, why = "forgotten", f"{why}; {NOT_OWNED}"
        decided.append(Collected(crash=crash_id, signature=signature, path=path, size_bytes=size,
                                 action=action, why=why))
    return decided


def _decide(place: int, size: int, spent: int, retention: Retention) -> tuple[str, str]:
    if place > retention.keep_per_signature:
        return "deleted", f"dump {place} of its signature (keeping {retention.keep_per_signature})"
    if retention.max_bytes is not None and spent + size > retention.max_bytes:
        return "deleted", "past the disk budget"
    return "kept", f"dump {place} of its signature"


def apply(decided: list[Collected], mark_gone) -> None:
    """Delete what the plan deletes (only files crashlab owns), and mark it, what it forgets
    and what was missing, gone."""
    for item in decided:
        if item.action == "deleted":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.path)
        if item.action != "kept":
            mark_gone(item.crash, item.path)
