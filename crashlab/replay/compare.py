"""Greedy outputs compared with the dump's: where a temperature-0 replay first differs.

At temperature 0 the same server, model and batch should produce the same tokens; a difference
is worth reporting (nondeterministic kernels, a changed server, or corrupted state before the
crash). Token ids are compared when both sides have them, else text. A request that was still
running at the crash recorded only a partial output, which the replay must start with.
"""

from __future__ import annotations

from .records import Output, Request
from .result import Divergence

_EXCERPT = 24


def _first_difference(recorded, replayed, prefix_only: bool) -> int | None:
    for position, (before, after) in enumerate(zip(recorded, replayed, strict=False)):
        if before != after:
            return position
    if len(recorded) == len(replayed) or (prefix_only and len(recorded) <= len(replayed)):
        return None
    return min(len(recorded), len(replayed))


def _excerpt(sequence, at: int) -> str:
    part = sequence[max(0, at - 4):at + _EXCERPT]
    return part if isinstance(part, str) else " ".join(map(str, part))


def divergence(request: Request, replayed: Output) -> Divergence | None:
    """The first difference of a greedy generation from its recorded output, or None."""
    recorded = request.output
    if request.kind != "generate" or not request.greedy:
        return None
    prefix_only = request.in_flight
    for name in ("output_ids", "text"):
        before, after = getattr(recorded, name), getattr(replayed, name)
        if before is None or after is None or (prefix_only and not before):
            continue
        at = _first_difference(before, after, prefix_only)
        if at is None:
            return None
        return Divergence(compared=name, first_difference=at,
                          recorded=_excerpt(before, at), replayed=_excerpt(after, at))
    return None
