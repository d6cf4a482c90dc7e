"""What ``crashlab bisect --json`` prints, and the step log's lines: the published model."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..published import ClosedModel
from ..report.model import Tool

StepVerdict = Literal["good", "bad", "skip"]
#: the verdict, in the output folder beside the step log (what ``--json`` prints): named here, with
#: the model, for ``crashlab report`` to find a bisect's folder by
RESULT = "result.json"
#: the step log in the output folder: one Step as a JSON line as each step ends
STEP_LOG = "steps.jsonl"


class Run(ClosedModel):
    """One replay of the reproducer against a freshly started server."""

    number: int
    """The run's number within its step, from 1."""
    verdict: str
    """The verdict: reproduced, no crash, different crash, unconfirmed. By serve's signature
    (the same hash or coarse key as the bad side's crash) where both were signed, else by
    replay's oracle."""
    duration_s: float
    """Seconds from the first request sent to the verdict."""
    time_to_failure_s: float | None = None
    """For a run that crashed: seconds from the run's start to the first sign of the crash (the
    server's exit, a failed /health, a fault line); None when it did not crash."""
    signature: str | None = None
    """What the crash showed: serve's signature hash where serve signed it, its fault classes,
    kernels and first fault line."""
    signature_hash: str | None = None
    """The hash of serve's signature of the crash (``crashlab show`` takes it)."""
    signature_coarse: str | None = None
    """Its coarse key: the signature without its site, the same bug where lines moved."""


class Commit(ClosedModel):
    """A commit of the bisected repository."""

    kind: Literal["commit"] = "commit"
    """What was tried: a commit checked out."""
    hash: str
    """The full commit hash."""
    subject: str
    """The first line of its message."""
    author_date: str
    """Its author date, ISO 8601."""
    files: list[str] = Field(default_factory=list)
    """The files it changed."""


class Release(ClosedModel):
    """A release installed into an environment of its own (``--versions``)."""

    kind: Literal["release"] = "release"
    """What was tried: a release installed."""
    version: str
    """The version, as --versions gave it."""
    python: str
    """The interpreter of its environment: what ``{python}`` in the launch command became."""
    install: str
    """The install command run for it, secrets masked."""
    reused: bool = False
    """Whether its environment was kept from an earlier bisect (nothing installed this time)."""


#: what a step tried: a commit or a release, told apart by ``kind``
Revision = Annotated[Commit | Release, Field(discriminator="kind")]


def label(revision: Commit | Release) -> str:
    """A revision as a step line names it: a commit's short hash, or a release's version."""
    return revision.hash[:12] if isinstance(revision, Commit) else revision.version


def title(revision: Commit | Release) -> str:
    """Its one-line description: a commit's subject, or the install a release took."""
    return revision.subject if isinstance(revision, Commit) else revision.install


class Step(ClosedModel):
    """One commit tried: built, served, replayed, judged."""

    revision: Revision
    """The commit checked out, or the release installed."""
    role: Literal["bad-endpoint", "good-endpoint", "bisect", "fix"]
    """Why it was tried: the --bad commit (or --check-fix's parent) checked first, the --good
    commit, a bisect step, or the --check-fix commit."""
    verdict: StepVerdict
    """bad: the expected crash reproduced; good: it did not in enough runs; skip: another crash,
    a build or install that failed, or a server that did not start: never counted bad."""
    reproduced: int
    """Runs in which the expected crash reproduced (k of k/N)."""
    runs: list[Run] = Field(default_factory=list)
    """Every run of the step (N of k/N)."""
    confidence: float | None = None
    """For good: how sure its clean runs make it, 1 - (1 - p)^N, p the lowest rate the bad
    side's runs allow at the asked confidence (bad_rate_bound), not their k/N."""
    reason: str
    """Why the verdict: the counts, the other crash's signature, the build's failure."""
    build_s: float = 0.0
    """Seconds the --build command (or a release's install) took."""
    caches_cleared: list[str] = Field(default_factory=list)
    """The --clear-cache folders emptied before the step."""


class FixCheck(ClosedModel):
    """--check-fix's verdict: the commit against its parent, with the same statistics."""

    revision: Commit
    """The commit tried as a fix."""
    verdict: Literal["fixed", "not fixed", "another crash", "inconclusive"]
    """fixed: no crash in enough runs where the parent reproduces it; not fixed: it reproduces;
    another crash: the commit crashes otherwise; inconclusive: the parent does not reproduce it."""


class BisectResult(ClosedModel):
    """The verdict of a bisect: the first bad commit, or why none was found."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """crashlab's name and version."""
    repo: str | None = None
    """The repository bisected; None over releases (--versions)."""
    good: str | None = None
    """The --good commit's hash (over releases: the first version); None with --check-fix."""
    bad: str
    """The --bad commit's hash (over releases: the last version), or with --check-fix its
    commit's parent."""
    fix: FixCheck | None = None
    """With --check-fix: whether the commit fixes the crash its parent shows."""
    dump: str
    """The reproducer replayed at each step."""
    outcome: Literal["found", "inconclusive", "fixed", "not fixed", "another crash"]
    """found: a first bad commit; inconclusive: skips or endpoints left no answer; with
    --check-fix, the fix's verdict."""
    why: str
    """One sentence on the outcome."""
    first_bad: Revision | None = None
    """The first commit (or release) where the expected crash reproduces."""
    candidates: list[Revision] = Field(default_factory=list)
    """When inconclusive because of skips: the commits (or releases) any of which may be the
    first bad one."""
    expected: str
    """The crash that counts as bad: the bad side's signature, or --expect's patterns."""
    bad_rate: float
    """The reproduction rate measured on the --bad commit (k/N)."""
    bad_rate_bound: float = 0.0
    """The lowest rate the --bad commit's k/N allows at the asked confidence (the one-sided
    Clopper-Pearson bound: 0.47 for 4/4 at 95%); the runs a good verdict takes are counted
    against it, since k/N alone overstates a rate measured in a few runs."""
    runs_for_good: int
    """Runs without the crash that make a commit good at the asked confidence against
    bad_rate_bound, capped by --max-runs."""
    confidence: float
    """The asked confidence of a good verdict."""
    steps: list[Step] = Field(default_factory=list)
    """Every commit tried, in order."""
    skips: list[Step] = Field(default_factory=list)
    """The steps skipped, each with the other crash's signature in its reason."""
    log: str
    """The step log: one JSON line per step. Beside it, result.json holds this verdict."""
    notes: list[str] = Field(default_factory=list)
    """What to know besides the verdict: e.g. the checkout left where it was because tracked
    files changed during the bisect (crashlab never discards changes)."""
    wall_s: float
    """Seconds the whole bisect took."""
