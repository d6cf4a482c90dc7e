"""The user's checkout, driven one step at a time: crashlab decides each step, so it checks out
commits itself instead of handing the loop to ``git bisect run``."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInput, EnvironmentProblem


@dataclass(frozen=True)
class CommitInfo:
    hash: str
    subject: str
    author_date: str
    files: list[str]


class Checkout:
    """A git work tree crashlab may move between commits and put back where it was."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise BadInput(f"--repo {self.path}: not a directory")
        if self._git("rev-parse", "--is-inside-work-tree", check=False) != "true":
            raise BadInput(f"--repo {self.path}: not a git work tree")

    def _git(self, *args: str, check: bool = True) -> str:
        try:
            done = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True,
                                  text=True)
        except FileNotFoundError:
            raise EnvironmentProblem("git is not installed (bisect drives a git checkout)") from None
        if check and done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["failed"])[0]
            raise BadInput(f"git {' '.join(args[:2])}: {first}")
        return done.stdout.strip()

    def changed_files(self) -> list[str]:
        """Tracked files with uncommitted changes."""
        return self._git("diff", "HEAD", "--name-only").splitlines()

    def refuse_dirty(self) -> None:
        """Checking out over uncommitted changes would lose them or build them into every step."""
        if self.changed_files():
            raise BadInput(f"--repo {self.path}: the work tree has uncommitted changes; commit "
                           "or stash them first")

    def resolve(self, rev: str, option: str) -> str:
        found = self._git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        if not found:
            raise BadInput(f"{option} {rev}: no such commit in {self.path}")
        return found

    def between(self, good: str, bad: str) -> list[str]:
        """The commits after ``good`` up to ``bad``, oldest first, on the paths from one to the
        other (what git bisect considers); BadInput when ``good`` is not an ancestor of ``bad``."""
        if subprocess.run(["git", "-C", str(self.path), "merge-base", "--is-ancestor", good, bad],
                          capture_output=True).returncode != 0:
            raise BadInput(f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}")
        listed = self._git("rev-list", "--reverse", "--ancestry-path", f"{good}..{bad}")
        return listed.split()

    def head(self) -> str:
        """Where to come back to: the branch's name, or the commit when HEAD is detached."""
        branch = self._git("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return branch or self._git("rev-parse", "HEAD")

    def checkout(self, rev: str) -> None:
        """A commit's hash leaves HEAD detached; the branch head() named puts it back."""
        self._git("checkout", "--quiet", rev)

    def info(self, commit: str) -> CommitInfo:
        subject, date = self._git("show", "-s", "--format=%s%n%aI", commit).split("\n", 1)
        files = self._git("diff-tree", "--no-commit-id", "--name-only", "-r", "--root", commit)
        return CommitInfo(hash=commit, subject=subject, author_date=date, files=files.split("\n")
                          if files else [])
