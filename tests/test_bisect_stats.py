"""crashlab.bisect.stats: how many clean runs a good verdict takes, checked against the
definition (the miss chance at n is within 1 - confidence, at n - 1 it is not), and the bad
side's rate bound against Clopper-Pearson's definition and its coverage, summed here from the
binomial formula."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crashlab.bisect import stats


@settings(deadline=None)  # a loaded machine stalls an example past any deadline
@given(st.floats(min_value=0.01, max_value=1.0), st.floats(min_value=0.5, max_value=0.999))
def test_runs_needed_is_the_least_count_that_reaches_the_confidence(rate, confidence):
    needed = stats.runs_needed(rate, confidence)
    assert needed >= 1
    assert stats.miss_chance(rate, needed) <= 1 - confidence + 1e-12
    if needed > 1:
        assert stats.miss_chance(rate, needed - 1) > 1 - confidence


def test_a_rarer_crash_needs_more_clean_runs():
    confidence = 0.95
    counts = [stats.runs_for_good(k, 10, confidence) for k in range(10, 0, -1)]
    assert counts == sorted(counts) and counts[0] > 1 and counts[-1] > counts[0]


def test_a_crash_seen_three_in_ten_needs_what_the_definition_says():
    rate = stats.rate(3, 10)
    needed = stats.runs_needed(rate, 0.95)
    assert (1 - rate) ** needed <= 0.05 < (1 - rate) ** (needed - 1)
    assert stats.confidence_reached(rate, needed) >= 0.95


@pytest.mark.parametrize("rate, confidence", [(0.0, 0.95), (1.5, 0.95), (0.5, 1.0), (0.5, 0.0)])
def test_a_rate_or_confidence_out_of_range_is_refused(rate, confidence):
    with pytest.raises(ValueError):
        stats.runs_needed(rate, confidence)


def test_nothing_ran_is_rate_zero():
    assert stats.rate(0, 0) == 0.0 and stats.rate(2, 4) == 0.5


def _tail(k: int, n: int, p: float) -> float:
    """P(X >= k), X ~ Binomial(n, p), from the binomial formula (math.comb)."""
    return sum(math.comb(n, x) * p ** x * (1 - p) ** (n - x) for x in range(k, n + 1))


@settings(deadline=None)  # a loaded machine stalls an example past any deadline
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.integers(1, n), st.just(n))),
       st.floats(min_value=0.5, max_value=0.999))
def test_the_lower_bound_is_the_rate_at_which_k_crashes_are_that_unlikely(counts, confidence):
    """Clopper-Pearson's definition: at the bound, k or more crashes in N runs happen with
    chance 1 - confidence; above it, more often."""
    k, n = counts
    bound = stats.lower_bound(k, n, confidence)
    assert 0 < bound <= k / n
    assert _tail(k, n, bound) == pytest.approx(1 - confidence, abs=1e-9)
    if bound < k / n:
        assert _tail(k, n, min(1.0, bound + 1e-6)) > 1 - confidence


@pytest.mark.parametrize("n", [1, 2, 4, 10, 30])
def test_every_run_crashing_gives_the_closed_form(n):
    assert stats.lower_bound(n, n, 0.95) == pytest.approx(0.05 ** (1 / n))


@pytest.mark.parametrize("n", [1, 4, 10])
@pytest.mark.parametrize("true_rate", [0.05, 0.2, 0.5, 0.8, 0.97])
def test_the_bound_covers_the_true_rate_at_least_as_often_as_asked(n, true_rate):
    """An exact bound: over every k the bad side can see, the chance that the bound lands above
    the true rate (so that the clean runs it asks for are too few) is at most 1 - confidence."""
    overstated = sum(math.comb(n, k) * true_rate ** k * (1 - true_rate) ** (n - k)
                     for k in range(n + 1) if stats.lower_bound(k, n, 0.95) > true_rate)
    assert overstated <= 0.05 + 1e-12


def test_four_crashes_in_four_runs_do_not_make_one_clean_run_sure():
    """The walk's case: the crash in each of 4 runs on --bad. k/N = 1 would call one clean run
    100% sure; the rate 4 runs allow at 95% is 0.47, so one clean run is 47% sure and a good
    verdict takes 5."""
    bound = stats.lower_bound(4, 4, 0.95)
    assert stats.confidence_reached(bound, 1) < 0.5
    needed = stats.runs_for_good(4, 4, 0.95)
    assert needed > 1
    assert stats.confidence_reached(bound, needed) >= 0.95 > stats.confidence_reached(bound, needed - 1)


def test_more_runs_on_the_bad_side_ask_fewer_clean_runs():
    """The same rate measured over more runs is known better: 10/10 asks fewer than 4/4, which
    asks fewer than 1/1."""
    assert stats.runs_for_good(10, 10, 0.95) < stats.runs_for_good(4, 4, 0.95) \
        < stats.runs_for_good(1, 1, 0.95)


def test_nothing_reproduced_bounds_the_rate_at_zero_and_bad_counts_are_refused():
    assert stats.lower_bound(0, 4, 0.95) == 0.0
    for k, n, confidence in [(5, 4, 0.95), (-1, 4, 0.95), (2, 4, 1.0)]:
        with pytest.raises(ValueError):
            stats.lower_bound(k, n, confidence)
