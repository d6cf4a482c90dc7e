"""How many clean runs make a commit good when the crash only reproduces now and then.

A crash seen k times in N runs on the bad side reproduces at a rate p that k/N only estimates:
4 crashes in 4 runs is as likely from p = 0.6 as 10 in 10 is from p = 0.95. So the runs a good
verdict takes are counted against the lowest rate those runs allow at the asked confidence, the
one-sided Clopper-Pearson bound p_lo (the rate at which k or more crashes in N runs would happen
only 1 - confidence of the time). A commit where the crash never shows in n runs is called good;
if it were bad, the chance of that is at most (1 - p_lo)**n, and n is the least count that keeps
it within 1 - confidence: at 95 %, 4/4 gives p_lo = 0.47 and 5 clean runs (not 1: 4/4 does not
show that the rate is 1), 10/10 gives 0.74 and 3, 3/10 gives 0.09 and 33.

Clopper-Pearson and not Wilson's interval: it is exact (its coverage is never below the asked
confidence, where Wilson's falls below it for the few runs a bisect makes, the case that matters
here) and has a closed form for the common k = N (p_lo = (1 - confidence)**(1/N)). It is written
here rather than taken from scipy.stats.beta.ppf: scipy is not a dependency of crashlab and
would be one for a single quantile; the binomial tail is a sum of N + 1 terms, solved by
bisection to 1e-12.
"""

from __future__ import annotations

import math


def rate(reproduced: int, runs: int) -> float:
    """The reproduction rate k/N; 0 when nothing ran."""
    return reproduced / runs if runs else 0.0


def _at_least(reproduced: int, runs: int, rate: float) -> float:
    """P(X >= reproduced) for X ~ Binomial(runs, rate), summed in log space (no overflow)."""
    if rate <= 0.0:
        return 1.0 if reproduced <= 0 else 0.0
    if rate >= 1.0:
        return 1.0
    log_rate, log_miss = math.log(rate), math.log1p(-rate)
    total = 0.0
    for count in range(reproduced, runs + 1):
        log_ways = math.lgamma(runs + 1) - math.lgamma(count + 1) - math.lgamma(runs - count + 1)
        total += math.exp(log_ways + count * log_rate + (runs - count) * log_miss)
    return min(total, 1.0)


def lower_bound(reproduced: int, runs: int, confidence: float) -> float:
    """The one-sided Clopper-Pearson lower confidence bound of the rate after ``reproduced``
    crashes in ``runs`` runs: the rate p at which P(X >= reproduced) = 1 - confidence. 0 when
    nothing reproduced; ValueError for counts or a confidence out of range."""
    if not 0 <= reproduced <= runs:
        raise ValueError(f"{reproduced} reproductions in {runs} runs")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"a confidence in (0, 1) is needed, not {confidence}")
    if reproduced == 0:
        return 0.0
    if reproduced == runs:
        return (1.0 - confidence) ** (1.0 / runs)
    low, high = 0.0, reproduced / runs
    while high - low > 1e-12:
        middle = (low + high) / 2
        if _at_least(reproduced, runs, middle) < 1.0 - confidence:
            low = middle
        else:
            high = middle
    return low


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


def runs_for_good(reproduced: int, runs: int, confidence: float) -> int:
    """The clean runs a good verdict takes after ``reproduced`` crashes in ``runs`` runs on the
    bad side: runs_needed at the rate's lower bound, not at k/N."""
    return runs_needed(lower_bound(reproduced, runs, confidence), confidence)


def confidence_reached(rate: float, clean_runs: int) -> float:
    """How sure ``clean_runs`` runs without the crash make a good verdict against a crash that
    reproduces at ``rate`` (the bad side's lower bound): 1 - miss_chance."""
    return 1.0 - miss_chance(rate, clean_runs)
