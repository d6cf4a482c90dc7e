"""How many clean runs make a commit good when the crash only reproduces now and then.

A crash seen k times in N runs on the bad side reproduces with rate p ~ k/N; a commit where it
never reproduces in n runs is called good, and the chance that a bad commit would have shown
nothing in n runs is (1 - p)**n. n is the least count that keeps that chance below
1 - confidence: a crash seen 3/10 needs 9 clean runs for 95 %, one seen 10/10 needs 1.
"""

from __future__ import annotations

import math


def rate(reproduced: int, runs: int) -> float:
    """The reproduction rate k/N; 0 when nothing ran."""
    return reproduced / runs if runs else 0.0


def miss_chance(rate: float, runs: int) -> float:
    """The chance that a crash reproducing at ``rate`` shows in none of ``runs`` runs."""
    return (1.0 - rate) ** runs


def runs_needed(rate: float, confidence: float) -> int:
    """The least n with miss_chance(rate, n) <= 1 - confidence; ValueError for a rate of 0
    (no number of clean runs says anything about a crash that never reproduced)."""
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"a reproduction rate in (0, 1] is needed, not {rate}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"a confidence in (0, 1) is needed, not {confidence}")
    if rate == 1.0:
        return 1
    needed = math.ceil(math.log(1.0 - confidence) / math.log(1.0 - rate))
    # the floating-point quotient can land just above an integer that already suffices
    return needed - 1 if needed > 1 and miss_chance(rate, needed - 1) <= 1.0 - confidence else needed


def confidence_reached(rate: float, clean_runs: int) -> float:
    """How sure ``clean_runs`` runs without the crash make a good verdict: 1 - miss_chance."""
    return 1.0 - miss_chance(rate, clean_runs)
