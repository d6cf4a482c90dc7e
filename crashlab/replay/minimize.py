"""Delta debugging (ddmin, Zeller and Hildebrandt 2002) over a list, within a budget of trials.

The test is expensive (each trial restarts the server and replays), so outcomes are cached by
subset, and when the budget runs out the smallest set known to fail is returned: every reduction
ddmin makes was confirmed by a trial, so that set always reproduces.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import BadInput

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smh])")
_SECONDS = {"s": 1, "m": 60, "h": 3600}


class BudgetExhausted(Exception):
    pass


@dataclass
class Budget:
    """At most ``trials`` tests and ``seconds`` of wall time (None: no limit)."""

    trials: int | None = None
    seconds: float | None = None
    used: int = 0
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``40`` (trials) or ``30m`` / ``90s`` / ``2h`` (wall time); BadInput otherwise."""
        text = text.strip()
        if text.isdecimal() and int(text) > 0:  # isdigit() would pass "²", which int() refuses
            return cls(trials=int(text))
        duration = _DURATION.fullmatch(text)
        if duration and float(duration[1]) > 0:
            return cls(seconds=float(duration[1]) * _SECONDS[duration[2]])
        raise BadInput(f"--budget {text!r}: give a number of trials (40) or a time (30m, 90s, 2h)")

    def spend(self) -> None:
        if self.trials is not None and self.used >= self.trials:
            raise BudgetExhausted()
        if self.seconds is not None and time.monotonic() - self.started >= self.seconds:
            raise BudgetExhausted()
        self.used += 1

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> str:
        """``46 of 50 trials left`` or ``1,712 of 1,800 s left``: said after each trial, so
        that a person watching a long minimization knows how much longer it may run."""
        parts = [f"{self.trials - self.used} of {self.trials} trials left" if self.trials is not None
                 else "",
                 f"{max(0.0, self.seconds - self.elapsed()):,.0f} of {self.seconds:,.0f} s left"
                 if self.seconds is not None else ""]
        return " and ".join(part for part in parts if part) or "no limit"

    def describe(self) -> str:
        parts = [f"{self.trials} trials" if self.trials is not None else "",
                 f"{self.seconds / 60:g} minutes" if self.seconds is not None else ""]
        return " or ".join(part for part in parts if part) or "unlimited"


def _chunks(items: list, count: int) -> list[list]:
    size, extra = divmod(len(items), count)
    out, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def ddmin(items: Sequence, fails: Callable[[list], bool], budget: Budget) -> tuple[list, bool]:
    """(a 1-minimal failing subset of ``items``, whether the budget ran out first).

    ``items`` must already fail. Subsets keep the order of ``items``.
    """
    current = list(items)
    cache: dict[tuple, bool] = {}

    def test(subset: list) -> bool:
        key = tuple(subset)
        if key not in cache:
            budget.spend()
            cache[key] = fails(subset)
        return cache[key]

    granularity = 2
    try:
        while len(current) >= 2:
            chunks = _chunks(current, granularity)
            reduced = next((chunk for chunk in chunks if test(chunk)), None)
            if reduced is not None:
                current, granularity = reduced, 2
                continue
            if granularity > 2:
                complements = ([item for other in chunks if other is not chunk for item in other]
                               for chunk in chunks)
                reduced = next((complement for complement in complements if test(complement)), None)
                if reduced is not None:
                    current, granularity = reduced, max(granularity - 1, 2)
                    continue
            if granularity >= len(current):
                break
            granularity = min(len(current), 2 * granularity)
    except BudgetExhausted:
        return current, True
    return current, False
