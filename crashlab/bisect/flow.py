"""crashlab bisect's search: the --bad commit first (is the crash there, how often), the --good
commit (is it clean), then halving the commits between, each step judged by judge.py.

A skipped commit is stepped around, as git bisect skip does: the untested commit nearest the
middle is tried instead; when only skipped commits are left between the last good and the first
bad, the answer is those commits, inconclusive.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import BadInput
from ..notation import counted
from ..privacy.redact import Redactor
from ..replay.loader import load
from ..replay.records import CrashDump
from ..replay.server import ServerDidNotStart
from ..report.model import Tool
from ..version import __version__
from . import caches, stats
from .candidates import Commits, Releases, source
from .judge import Oracle, expectation_from, replay_runs, run_record, signature_text
from .model import RESULT, STEP_LOG, BisectResult, Commit, FixCheck, Release, Step, label
from .options import BisectOptions

OnStep = Callable[[Step], None]


class Bisect:
    """One bisect's state: what it tries (commits or releases), the expected crash once known,
    the steps so far."""

    def __init__(self, options: BisectOptions, on_step: OnStep | None = None):
        self.options = options
        self.on_step = on_step
        self.source = source(options)
        #: what a step keeps came partly from the server's output: the launch's and the
        #: environment's secrets are masked before it is logged or printed
        self.redactor = Redactor.for_launch(list(options.launch), dict(os.environ))
        self.imports_checked = False
        self.steps: list[Step] = []
        self.oracle = Oracle(expected=options.expected)
        self.rate = 0.0
        #: the lowest rate the bad side's runs allow at the asked confidence (stats.lower_bound):
        #: what a good verdict's runs are counted against
        self.rate_bound = 0.0
        self.bad_counts = (0, 0)
        self.runs_for_good = 1
        options.output.mkdir(parents=True, exist_ok=True)
        self.log = options.output / STEP_LOG
        self.log.write_text("")

    def record(self, step: Step) -> Step:
        step = Step.model_validate(self.redactor.json(step.model_dump(mode="json")))
        self.steps.append(step)
        with open(self.log, "a") as log:
            log.write(step.model_dump_json() + "\n")
        if self.on_step:
            self.on_step(step)
        return step

    def try_revision(self, name: str, role, dump: CrashDump) -> Step:
        """Empty the caches, check out and build (or install) ``name``, replay, judge."""
        tag = name if isinstance(self.source, Releases) else name[:12]
        base = self.options.output / f"step-{len(self.steps) + 1:02d}-{tag}"
        cleared = caches.clear(self.options.clear_caches)
        prepared = self.source.prepare(name, base.with_suffix(".build.log"))
        revision = self.source.describe(name)
        done = {"revision": revision, "role": role, "build_s": prepared.seconds,
                "caches_cleared": cleared}
        if not prepared.ok:
            return self.record(Step(**done, verdict="skip", reproduced=0, reason=prepared.why))
        if not self.imports_checked:
            self.source.check_imports(name, prepared.launch)
            self.imports_checked = True
        try:
            if role == "bad-endpoint":
                return self.record(self._bad_side(done, prepared.launch, dump, base))
            runs = replay_runs(self.options, prepared.launch, dump, self.runs_for_good, base)
        except ServerDidNotStart as problem:
            if role == "bad-endpoint":  # the very first server: the launch command itself is wrong
                raise ServerDidNotStart(self.redactor.text(
                    f"the server did not start on --bad {tag}: {problem}")) from None
            return self.record(Step(**done, verdict="skip", reproduced=0,
                                    reason=f"the server did not start: {problem}"))
        verdicts = [self.oracle.verdict(run) for run in runs]
        records = [run_record(n, run, verdict)
                   for n, (run, verdict) in enumerate(zip(runs, verdicts, strict=True), 1)]
        last, verdict = runs[-1], verdicts[-1]
        if verdict == "reproduced":
            step = Step(**done, verdict="bad", reproduced=1, runs=records,
                        reason=f"the expected crash reproduced in run {len(runs)}")
        elif last.attempt.signals:
            step = Step(**done, verdict="skip", reproduced=0, runs=records,
                        reason=f"another crash ({verdict}): {signature_text(last)}")
        else:
            reached = stats.confidence_reached(self.rate_bound, len(runs))
            k, n = self.bad_counts
            step = Step(**done, verdict="good", reproduced=0, runs=records,
                        confidence=round(reached, 4),
                        reason=f"no crash in {counted(len(runs), 'run')}: {reached:.1%} sure, the bad "
                               f"side's rate being at least {self.rate_bound:.2f} ({k}/{n} runs, "
                               f"{self.options.confidence:.0%} confidence)")
        return self.record(step)

    def _bad_side(self, done: dict, launch: tuple[str, ...], dump: CrashDump, base) -> Step:
        """Every --repeat run on --bad: the crash's rate, and its signature when not given."""
        runs = replay_runs(self.options, launch, dump, self.options.repeat, base,
                           stop_on_crash=False)
        crashed = [run for run in runs if run.attempt.signals]
        if self.oracle.expected is None and crashed:
            self.oracle = Oracle(expected=expectation_from(crashed[0].attempt.observed),
                                 wanted=crashed[0].served)
        verdicts = [self.oracle.verdict(run) for run in runs]
        records = [run_record(n, run, verdict)
                   for n, (run, verdict) in enumerate(zip(runs, verdicts, strict=True), 1)]
        k = verdicts.count("reproduced")
        self.rate = stats.rate(k, len(runs))
        self.bad_counts = (k, len(runs))
        if not k:
            return Step(**done, verdict="skip", reproduced=0, runs=records,
                        reason=f"reproduced 0/{len(runs)}")
        confidence = self.options.confidence
        self.rate_bound = stats.lower_bound(k, len(runs), confidence)
        needed = stats.runs_needed(self.rate_bound, confidence)
        self.runs_for_good = min(needed, self.options.max_runs)
        capped = (f" (--max-runs; {confidence:.0%} takes {needed})"
                  if needed > self.runs_for_good else "")
        return Step(**done, verdict="bad", reproduced=k, runs=records,
                    reason=f"reproduced {k}/{len(runs)}: a rate of at least {self.rate_bound:.2f} "
                           f"at {confidence:.0%} confidence; a good verdict takes "
                           f"{counted(self.runs_for_good, 'clean run')}{capped}")


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
    first: Commit | Release | None = None
    candidates: list[Commit | Release] = field(default_factory=list)
    fix: FixCheck | None = None


def bisect(options: BisectOptions, on_step: OnStep | None = None) -> BisectResult:
    """Find the first commit after --good where the crash --bad shows reproduces; or, with
    --check-fix, whether a commit fixes the crash its parent shows."""
    started = time.monotonic()
    state = Bisect(options, on_step)
    line = state.source
    good, commits, fix = None, list[str](), ""
    if isinstance(line, Commits) and options.check_fix:
        fix, bad = line.fix_and_parent()
    else:
        good, commits = line.span()
        bad = commits[-1]
    dump = load(options.dump)
    if not dump.requests:
        raise BadInput(f"--dump {options.dump}: holds no requests to replay")
    line.begin()
    try:
        answer = (_check_fix(state, dump, fix, bad) if fix
                  else _search(state, dump, good or "", commits))
    finally:
        line.end()
    result = BisectResult(
        tool=Tool(version=__version__), repo=None if options.versions else str(options.repo),
        good=good, bad=bad,
        fix=answer.fix, dump=options.dump, outcome=answer.outcome, why=answer.why,
        first_bad=answer.first, candidates=answer.candidates,
        expected=_describe(state.oracle), bad_rate=round(state.rate, 4),
        bad_rate_bound=round(state.rate_bound, 4),
        runs_for_good=state.runs_for_good, confidence=options.confidence, steps=state.steps,
        skips=[step for step in state.steps if step.verdict == "skip"], log=str(state.log),
        notes=line.notes,
        wall_s=round(time.monotonic() - started, 3))
    result = BisectResult.model_validate(state.redactor.json(result.model_dump(mode="json")))
    (options.output / RESULT).write_text(result.model_dump_json(indent=2) + "\n")
    return result


def _search(state: Bisect, dump: CrashDump, good: str, commits: list[str]) -> Answer:
    """Halve the commits (or releases) after ``good`` (the last of them is --bad) down to the
    first bad one."""
    endpoint = state.try_revision(commits[-1], "bad-endpoint", dump)
    if endpoint.verdict != "bad":
        return Answer("inconclusive", f"the crash did not reproduce on --bad: {endpoint.reason}")
    clean = state.try_revision(good, "good-endpoint", dump)
    if clean.verdict != "good":
        return Answer("inconclusive", f"--good is not clean: {clean.reason}")
    low, high, tried = -1, len(commits) - 1, set[int]()
    while high - low > 1:
        index = _next(commits, low, high, tried)
        if index is None:
            left = [state.source.describe(rev) for rev in commits[low + 1:high + 1]]
            return Answer("inconclusive", "only skipped commits lie between the last good and "
                          f"the first bad: the first bad is one of {len(left)}", candidates=left)
        tried.add(index)
        step = state.try_revision(commits[index], "bisect", dump)
        if step.verdict == "bad":
            high = index
        elif step.verdict == "good":
            low = index
    first = state.source.describe(commits[high])
    return Answer("found", f"{label(first)} is the first bad {first.kind}", first=first)


#: a fix's verdict from its step's
_FIX_VERDICTS = {"good": "fixed", "bad": "not fixed", "skip": "another crash"}


def _check_fix(state: Bisect, dump: CrashDump, fix: str, parent: str) -> Answer:
    """The parent first (the crash, its rate, its signature), then the fix with as many runs
    as a good verdict takes."""
    endpoint = state.try_revision(parent, "bad-endpoint", dump)
    if endpoint.verdict != "bad":
        return Answer("inconclusive", f"the crash did not reproduce on the parent {parent[:12]}: "
                      f"{endpoint.reason}")
    step = state.try_revision(fix, "fix", dump)
    verdict = _FIX_VERDICTS[step.verdict]
    assert isinstance(step.revision, Commit)  # --check-fix takes commits only (options.py)
    return Answer(verdict, f"{fix[:12]}: {verdict}: {step.reason}",
                  fix=FixCheck(revision=step.revision, verdict=verdict))


def _describe(oracle: Oracle) -> str:
    expected = oracle.expected
    if expected is None:
        return "none: the crash never reproduced"
    if oracle.wanted is not None:
        return (f"signature {oracle.wanted.hash} (coarse {oracle.wanted.coarse}) "
                f"{oracle.wanted.title} ({expected.source}, signed by serve)")
    parts = [expected.fault_class, expected.kernel, *expected.patterns]
    return f"{' | '.join(part for part in parts if part)} ({expected.source})"
