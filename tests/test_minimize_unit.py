"""ddmin and the budget on their own, without a server: a failure predicate over a list of
numbers, as ClusterFuzz tests its delta minimizer. The replay tests drive the same code through
real servers; these say what the algorithm promises whatever the trial costs."""

from __future__ import annotations

import time

import pytest

from crashlab.errors import EXIT_BAD_INPUT, BadInput
from crashlab.replay.minimize import Budget, BudgetExhausted, ddmin

ITEMS = list(range(20))


class Predicate:
    """Fails when every culprit is in the subset; records each subset it was asked about."""

    def __init__(self, *culprits: int):
        self.culprits = set(culprits)
        self.asked: list[tuple] = []

    def __call__(self, subset: list) -> bool:
        self.asked.append(tuple(subset))
        return self.culprits <= set(subset)


def _one_minimal(result: list, fails) -> bool:
    """Removing any single element of ``result`` makes it pass (Zeller's 1-minimality)."""
    return all(not fails(result[:index] + result[index + 1:]) for index in range(len(result)))


def _in_order(result: list, items: list) -> bool:
    positions = [items.index(item) for item in result]
    return positions == sorted(positions)


@pytest.mark.parametrize("culprits", [(13,), (0,), (19,), (3, 16), (7, 8), (2, 9, 17)],
                         ids=["one", "first", "last", "two-apart", "two-adjacent", "three"])
def test_ddmin_finds_exactly_the_culprits(culprits):
    fails = Predicate(*culprits)
    result, exhausted = ddmin(ITEMS, fails, Budget())
    assert result == sorted(culprits) and not exhausted
    assert fails(result) and _one_minimal(result, fails)


def test_two_culprits_found_through_complements():
    """Neither half of [1, 2, 3, 4] holds both 1 and 4: only removing a quarter keeps them."""
    fails = Predicate(1, 4)
    result, _ = ddmin([1, 2, 3, 4], fails, Budget())
    assert result == [1, 4]
    assert (1, 3, 4) in fails.asked or (1, 2, 4) in fails.asked  # a complement was tried


def test_when_every_element_is_needed_all_are_kept():
    fails = Predicate(*ITEMS)
    result, exhausted = ddmin(ITEMS, fails, Budget())
    assert result == ITEMS and not exhausted and _one_minimal(result, fails)


def test_with_no_culprit_nothing_is_removed():
    """A predicate that never fails (the precondition broken): ddmin claims no reduction it
    did not see fail, so the input comes back whole."""
    result, exhausted = ddmin(ITEMS, lambda subset: False, Budget())
    assert result == ITEMS and not exhausted


def test_a_predicate_that_always_fails_shrinks_to_one_element():
    result, _ = ddmin(ITEMS, lambda subset: True, Budget())
    assert len(result) == 1 and result[0] in ITEMS


def test_the_result_keeps_the_order_of_the_input():
    items = [9, 4, 17, 1, 12, 6, 0, 15]
    result, _ = ddmin(items, Predicate(17, 6, 15), Budget())
    assert result == [17, 6, 15] and _in_order(result, items)


def test_no_subset_is_tried_twice():
    fails = Predicate(3, 16)
    ddmin(ITEMS, fails, Budget())
    assert len(fails.asked) == len(set(fails.asked))


def test_a_single_element_is_not_tested():
    fails = Predicate(5)
    assert ddmin([5], fails, Budget()) == ([5], False) and fails.asked == []


@pytest.mark.parametrize("trials", [1, 3, 6])
def test_the_trial_budget_cuts_the_search_to_a_confirmed_failing_set(trials):
    fails = Predicate(3, 16)
    budget = Budget(trials=trials)
    result, exhausted = ddmin(ITEMS, fails, budget)
    assert exhausted and len(fails.asked) == budget.used == trials
    # every reduction was confirmed by a trial: the set returned still fails, in input order
    assert fails(result) and _in_order(result, ITEMS) and {3, 16} <= set(result)
    assert budget.left() == f"0 of {trials} trials left"


def test_a_budget_as_large_as_the_search_is_not_exhausted():
    needed = Predicate(3, 16)
    ddmin(ITEMS, needed, Budget())
    fails = Predicate(3, 16)
    assert ddmin(ITEMS, fails, Budget(trials=len(needed.asked))) == ([3, 16], False)


def test_a_spent_time_budget_stops_before_the_first_trial():
    """``started`` stands in for a clock: a budget begun an hour ago with a minute to spend is
    spent, and one with a day to spend is not, however fast the machine."""
    fails = Predicate(3, 16)
    hour_ago = time.monotonic() - 3600
    result, exhausted = ddmin(ITEMS, fails, Budget(seconds=60, started=hour_ago))
    assert exhausted and result == ITEMS and fails.asked == []
    result, exhausted = ddmin(ITEMS, fails, Budget(seconds=86400, started=hour_ago))
    assert result == [3, 16] and not exhausted


def test_spend_counts_trials_and_refuses_past_the_limit():
    budget = Budget(trials=2)
    budget.spend()
    budget.spend()
    with pytest.raises(BudgetExhausted):
        budget.spend()
    assert budget.used == 2


@pytest.mark.parametrize("text, trials, seconds", [
    ("40", 40, None), ("1", 1, None), (" 7 ", 7, None), ("007", 7, None),
    ("90s", None, 90), ("30m", None, 1800), ("2h", None, 7200), ("1.5m", None, 90),
    ("0.5h", None, 1800), (" 45s\n", None, 45)])
def test_budget_parse_accepts_trials_and_durations(text, trials, seconds):
    budget = Budget.parse(text)
    assert (budget.trials, budget.seconds, budget.used) == (trials, seconds, 0)


@pytest.mark.parametrize("text, shown", [
    ("0", "'0'"), ("0s", "'0s'"), ("0.0m", "'0.0m'"), ("-3", "'-3'"), ("", "''"), ("  ", "''"),
    ("soon", "'soon'"), ("10x", "'10x'"), ("30M", "'30M'"), ("2 h", "'2 h'"), ("m", "'m'"),
    ("1.5", "'1.5'"), ("1e3", "'1e3'"), (".5m", "'.5m'"), ("30m10s", "'30m10s'"),
    ("²", "'²'")])
def test_budget_parse_refuses_other_spellings_in_one_line(text, shown):
    with pytest.raises(BadInput) as refused:
        Budget.parse(text)
    assert str(refused.value) == (f"--budget {shown}: give a number of trials (40) or a time "
                                  "(30m, 90s, 2h)")
    assert refused.value.exit_code == EXIT_BAD_INPUT == 2


def test_budget_describes_itself():
    assert Budget.parse("40").describe() == "40 trials"
    assert Budget.parse("90s").describe() == "1.5 minutes"
    assert Budget().describe() == "unlimited" and Budget().left() == "no limit"
