"""crashlab bisect's search: the --bad commit first (is the crash there, how often), the --good
commit (is it clean), then halving the commits between, each step judged by judge.py.

A skipped commit is stepped around, as git bisect skip does: the untested commit nearest the
middle is tried instead; when only skipped commits are left between the last good and the first
bad, the answer is those commits, inconclusive.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import BadInput
from ..replay.loader import load
from ..replay.records import CrashDump
from ..replay.result import Expectation
from ..replay.signature import compare
from ..report.model import Tool
from ..version import __version__
from . import stats
from .git import Checkout
from .judge import build, expectation_from, replay_runs, run_record, signature_text
from .model import BisectResult, Commit, FixCheck, Step
from .options import BisectOptions

OnStep = Callable[[Step], None]


class Bisect:
    """One bisect's state: the checkout, the expected crash once known, the steps so far."""

    def __init__(self, options: BisectOptions, on_step: OnStep | None = None):
        self.options = options
        self.on_step = on_step
        self.checkout = Checkout(options.repo)
        self.steps: list[Step] = []
        self.expected: Expectation | None = options.expected
        self.rate = 0.0
        self.runs_for_good = 1
        options.output.mkdir(parents=True, exist_ok=True)
        self.log = options.output / "steps.jsonl"
        self.log.write_text("")

    def commit(self, rev: str) -> Commit:
        info = self.checkout.info(rev)
        return Commit(hash=info.hash, subject=info.subject, author_date=info.author_date,
                      files=info.files)

    def record(self, step: Step) -> Step:
        self.steps.append(step)
        with open(self.log, "a") as log:
            log.write(step.model_dump_json() + "\n")
        if self.on_step:
            self.on_step(step)
        return step

    def try_commit(self, rev: str, role, dump: CrashDump) -> Step:
        """Check out ``rev``, build it, replay, judge."""
        self.checkout.checkout(rev)
        number = len(self.steps) + 1
        base = self.options.output / f"step-{number:02d}-{rev[:12]}"
        built = build(self.options, base.with_suffix(".build.log"))
        commit = self.commit(rev)
        if not built.ok:
            return self.record(Step(commit=commit, role=role, verdict="skip", reproduced=0,
                                    reason=built.why, build_s=built.seconds))
        if role == "bad-endpoint":
            return self.record(self._bad_side(commit, dump, base, built.seconds))
        runs = replay_runs(self.options, dump, self.expected, self.runs_for_good,
                           base.with_suffix(".server.log"))
        records = [run_record(n, result, verdict) for n, (result, verdict) in enumerate(runs, 1)]
        last, verdict = runs[-1]
        if verdict == "reproduced":
            step = Step(commit=commit, role=role, verdict="bad", reproduced=1, runs=records,
                        reason=f"the expected crash reproduced in run {len(runs)}",
                        build_s=built.seconds)
        elif last.signals:
            step = Step(commit=commit, role=role, verdict="skip", reproduced=0, runs=records,
                        reason=f"another crash ({verdict}): {signature_text(last.observed)}",
                        build_s=built.seconds)
        else:
            reached = stats.confidence_reached(self.rate, len(runs))
            step = Step(commit=commit, role=role, verdict="good", reproduced=0, runs=records,
                        confidence=round(reached, 4), build_s=built.seconds,
                        reason=f"no crash in {len(runs)} runs: {reached:.1%} sure at the bad "
                               f"side's rate {self.rate:.2f}")
        return self.record(step)

    def _bad_side(self, commit: Commit, dump: CrashDump, base, build_s: float) -> Step:
        """Every --repeat run on --bad: the crash's rate, and its signature when not given."""
        runs = replay_runs(self.options, dump, self.expected, self.options.repeat,
                           base.with_suffix(".server.log"), stop_on_crash=False)
        crashed = [result for result, _ in runs if result.signals]
        if self.expected is None and crashed:
            self.expected = expectation_from(crashed[0].observed)
        verdicts = [compare(self.expected, result.observed, bool(result.signals))[0]
                    for result, _ in runs]
        records = [run_record(n, result, verdict)
                   for n, ((result, _), verdict) in enumerate(zip(runs, verdicts, strict=True), 1)]
        k = verdicts.count("reproduced")
        self.rate = stats.rate(k, len(runs))
        if k:
            self.runs_for_good = min(stats.runs_needed(self.rate, self.options.confidence),
                                     self.options.max_runs)
        return Step(commit=commit, role="bad-endpoint", verdict="bad" if k else "skip",
                    reproduced=k, runs=records, build_s=build_s,
                    reason=f"reproduced {k}/{len(runs)}; a good verdict takes "
                           f"{self.runs_for_good} clean runs")


def _next(commits: list[str], low: int, high: int, tried: set[int]) -> int | None:
    """The untried index between ``low`` and ``high`` nearest their middle, or None."""
    middle = (low + high) // 2
    order = sorted(range(low + 1, high), key=lambda index: (abs(index - middle), index))
    return next((index for index in order if index not in tried), None)


@dataclass
class Answer:
    """What a search ends with: the outcome and why, and what names it."""

    outcome: str
    why: str
    first: Commit | None = None
    candidates: list[Commit] = field(default_factory=list)
    fix: FixCheck | None = None


def bisect(options: BisectOptions, on_step: OnStep | None = None) -> BisectResult:
    """Find the first commit after --good where the crash --bad shows reproduces; or, with
    --check-fix, whether a commit fixes the crash its parent shows."""
    started = time.monotonic()
    state = Bisect(options, on_step)
    checkout = state.checkout
    checkout.refuse_dirty()
    good, commits = None, []
    if options.check_fix:
        fix = checkout.resolve(options.check_fix, "--check-fix")
        bad = checkout.resolve(f"{fix}^", f"--check-fix {options.check_fix}'s parent")
    else:
        good = checkout.resolve(options.good or "", "--good")
        bad = checkout.resolve(options.bad or "", "--bad")
        commits = checkout.between(good, bad)
        if not commits:
            raise BadInput("--good and --bad are the same commit: nothing to bisect")
    dump = load(options.dump)
    if not dump.requests:
        raise BadInput(f"--dump {options.dump}: holds no requests to replay")
    origin = checkout.head()
    try:
        answer = (_check_fix(state, dump, fix, bad) if options.check_fix
                  else _search(state, dump, good or "", commits))
    finally:
        checkout.checkout(origin)
    return BisectResult(
        tool=Tool(version=__version__), repo=str(options.repo), good=good, bad=bad,
        fix=answer.fix, dump=options.dump, outcome=answer.outcome, why=answer.why,
        first_bad=answer.first, candidates=answer.candidates,
        expected=_describe(state.expected), bad_rate=round(state.rate, 4),
        runs_for_good=state.runs_for_good, confidence=options.confidence, steps=state.steps,
        skips=[step for step in state.steps if step.verdict == "skip"], log=str(state.log),
        wall_s=round(time.monotonic() - started, 3))


def _search(state: Bisect, dump: CrashDump, good: str, commits: list[str]) -> Answer:
    """Halve the commits after ``good`` (the last of them is --bad) down to the first bad one."""
    endpoint = state.try_commit(commits[-1], "bad-endpoint", dump)
    if endpoint.verdict != "bad":
        return Answer("inconclusive", f"the crash did not reproduce on --bad: {endpoint.reason}")
    clean = state.try_commit(good, "good-endpoint", dump)
    if clean.verdict != "good":
        return Answer("inconclusive", f"--good is not clean: {clean.reason}")
    low, high, tried = -1, len(commits) - 1, set[int]()
    while high - low > 1:
        index = _next(commits, low, high, tried)
        if index is None:
            left = [state.commit(rev) for rev in commits[low + 1:high + 1]]
            return Answer("inconclusive", "only skipped commits lie between the last good and "
                          f"the first bad: the first bad is one of {len(left)}", candidates=left)
        tried.add(index)
        step = state.try_commit(commits[index], "bisect", dump)
        if step.verdict == "bad":
            high = index
        elif step.verdict == "good":
            low = index
    first = state.commit(commits[high])
    return Answer("found", f"{first.hash[:12]} is the first bad commit", first=first)


#: a fix's verdict from its step's
_FIX_VERDICTS = {"good": "fixed", "bad": "not fixed", "skip": "another crash"}


def _check_fix(state: Bisect, dump: CrashDump, fix: str, parent: str) -> Answer:
    """The parent first (the crash, its rate, its signature), then the fix with as many runs
    as a good verdict takes."""
    endpoint = state.try_commit(parent, "bad-endpoint", dump)
    if endpoint.verdict != "bad":
        return Answer("inconclusive", f"the crash did not reproduce on the parent {parent[:12]}: "
                      f"{endpoint.reason}")
    step = state.try_commit(fix, "fix", dump)
    verdict = _FIX_VERDICTS[step.verdict]
    return Answer(verdict, f"{fix[:12]}: {verdict}: {step.reason}",
                  fix=FixCheck(commit=step.commit, verdict=verdict))


def _describe(expected: Expectation | None) -> str:
    if expected is None:
        return "none: the crash never reproduced"
    parts = [expected.fault_class, expected.kernel, *expected.patterns]
    return f"{' | '.join(part for part in parts if part)} ({expected.source})"
