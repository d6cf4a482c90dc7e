"""crashlab.bisect.stats: how many clean runs a good verdict takes, checked against the
definition (the miss chance at n is within 1 - confidence, at n - 1 it is not)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crashlab.bisect import stats


@given(st.floats(min_value=0.01, max_value=1.0), st.floats(min_value=0.5, max_value=0.999))
def test_runs_needed_is_the_least_count_that_reaches_the_confidence(rate, confidence):
    needed = stats.runs_needed(rate, confidence)
    assert needed >= 1
    assert stats.miss_chance(rate, needed) <= 1 - confidence + 1e-12
    if needed > 1:
        assert stats.miss_chance(rate, needed - 1) > 1 - confidence


def test_a_rarer_crash_needs_more_clean_runs():
    confidence = 0.95
    counts = [stats.runs_needed(stats.rate(k, 10), confidence) for k in range(10, 0, -1)]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] > counts[0]


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
