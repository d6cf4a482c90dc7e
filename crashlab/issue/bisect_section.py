"""The body's Bisect section: what ``crashlab bisect`` found (the first bad commit or release, or
a fix's verdict), how sure its good verdicts are, the skips with their signatures, the steps.

It stands after Reproduction: after how to make the crash happen, a maintainer's next question
is which change brought it, and the answer (a commit to read or revert) is worth more to them
than the environment and the triage below it; high in the body, it is also never what the
budget's last cut takes. Subjects, file names, versions, reasons and crash lines come from
outside: each goes through markdown_escape.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..bisect.model import RESULT, STEP_LOG, BisectResult, Commit, Release, label, title
from ..notation import counted
from ..report.markdown_escape import cell, code, inline

#: Files of the first bad commit the body names; result.json in the bundle lists them all.
FILES_SHOWN = 30


@dataclass(frozen=True)
class BisectShown:
    """A bisect as the body shows it: its verdict, cleaned, and where its step log is."""

    result: BisectResult
    #: the folder given, on the reporter's machine (cleaned)
    folder: str
    #: the verdict's name in the bundle; None when left out
    result_member: str | None
    #: the step log's name in the bundle; None when left out or not there
    log_member: str | None
    #: whether the folder holds a step log (a user may pass on result.json alone)
    has_log: bool = True


def section(bisects: list[BisectShown], steps: bool = True) -> list[str]:
    """The section's lines (none without a bisect); ``steps=False`` leaves out the step table (to
    fit: the step log in the bundle holds every step)."""
    if not bisects:
        return []
    out = ["### Bisect", ""]
    for number, shown in enumerate(bisects, 1):
        if len(bisects) > 1:
            out += [f"#### Bisect {number}", ""]
        out += _bisect(shown, steps)
    return out


def _bisect(shown: BisectShown, steps: bool) -> list[str]:
    result = shown.result
    out = [f"Outcome: **{inline(result.outcome)}**: {inline(result.why)}", ""]
    out += _verdict(result)
    bad = result.bad[:12] if result.repo is not None else result.bad
    rate = (f"reproduced it at rate {result.bad_rate:.2f}, at least {result.bad_rate_bound:.2f} "
            f"at {result.confidence:.0%} confidence; a good verdict takes "
            f"{counted(result.runs_for_good, 'clean run')}" if result.bad_rate
            else "did not reproduce it")
    out += [f"- Expected crash: {inline(result.expected)}",
            f"- The bad side ({code(bad)}) {rate}",
            f"- Reproducer replayed at each step: {code(result.dump)}", ""]
    if result.skips:
        out += ["Skipped (another crash or a failed build: never blamed):", ""]
        out += [f"- {code(label(step.revision))} {inline(title(step.revision))}: {inline(step.reason)}"
                for step in result.skips]
        out.append("")
    if steps and result.steps:
        out += ["| verdict | revision | k/N | reason |", "|---|---|---|---|"]
        out += [f"| {inline(step.verdict)} | {cell(code(label(step.revision)))} | "
                f"{step.reproduced}/{len(step.runs)} | {cell(inline(step.reason))} |"
                for step in result.steps]
        out.append("")
    out += [f"{counted(len(result.steps), 'step')} in {result.wall_s:,.1f} s. The verdict: "
            f"{_where(shown.result_member, f'{shown.folder}/{RESULT}')}; the step log: "
            f"{_where(shown.log_member, f'{shown.folder}/{STEP_LOG}') if shown.has_log else 'none'}.",
            ""]
    for note in result.notes:
        out += [f"_Note: {inline(note)}_", ""]
    return out


def _where(member: str | None, path: str) -> str:
    return (f"{code(member)} in the attached bundle" if member
            else f"not in the bundle; on the reporter's machine at {code(path)}")


def _verdict(result: BisectResult) -> list[str]:
    """The answer's lines: the fix's verdict, the first bad revision, or the candidates."""
    if result.fix is not None:
        fix = result.fix.revision
        return [f"- Fix {code(fix.hash)} {inline(fix.subject)}: **{inline(result.fix.verdict)}** "
                f"(against its parent {code(result.bad[:12])})", *_commit(fix)]
    first = result.first_bad
    if isinstance(first, Release):
        return [f"- First bad release: {inline(first.version)}, installed by {code(first.install)}"]
    if isinstance(first, Commit):
        return [f"- First bad commit: {code(first.hash)} {inline(first.subject)}",
                *_commit(first)]
    if not result.candidates:
        return []
    return ["- The first bad is one of:", *(f"  - {code(label(revision))} {inline(title(revision))}"
                                            for revision in result.candidates)]


def _commit(commit: Commit) -> list[str]:
    shown = ", ".join(code(name) for name in commit.files[:FILES_SHOWN])
    more = len(commit.files) - FILES_SHOWN
    if more > 0:
        shown += f" and {counted(more, 'more file')} (result.json lists them)"
    return [f"- Author date: {inline(commit.author_date)}",
            f"- Files changed: {shown or 'none'}"]
