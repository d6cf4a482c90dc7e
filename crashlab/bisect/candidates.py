"""What a bisect tries, made ready to serve: a commit checked out and built (``--build``), or a
release installed into an environment of its own (``--versions``). Both give each step the
launch command its servers start with, and say where the server must import its package from."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInput
from . import imports
from .git import Checkout
from .model import Commit, Release
from .options import BisectOptions
from .releases import Environments


@dataclass(frozen=True)
class Prepared:
    """A revision ready or not: how long it took, and why not."""

    ok: bool
    seconds: float
    launch: tuple[str, ...]
    why: str = ""


class Commits:
    """The commits of a git checkout between --good and --bad, or --check-fix and its parent."""

    def __init__(self, options: BisectOptions):
        self.options = options
        self.checkout = Checkout(options.repo)
        self.origin = ""
        #: what the user must know besides the verdict (where the checkout was left)
        self.notes: list[str] = []

    def span(self) -> tuple[str, list[str]]:
        """(good, the commits after it up to bad, oldest first); the work tree must be clean."""
        self.checkout.refuse_dirty()
        good = self.checkout.resolve(self.options.good or "", "--good")
        bad = self.checkout.resolve(self.options.bad or "", "--bad")
        commits = self.checkout.between(good, bad)
        if not commits:
            raise BadInput("--good and --bad are the same commit: nothing to bisect")
        return good, commits

    def fix_and_parent(self) -> tuple[str, str]:
        self.checkout.refuse_dirty()
        fix = self.checkout.resolve(self.options.check_fix or "", "--check-fix")
        return fix, self.checkout.resolve(f"{fix}^", f"--check-fix {self.options.check_fix}'s parent")

    def begin(self) -> None:
        self.origin = self.checkout.head()

    def end(self) -> None:
        """The checkout goes back to the branch (or commit) it was on, unless tracked files
        changed meanwhile: those changes are kept, and the checkout stays where it is."""
        changed = self.checkout.changed_files()
        if changed:
            self.notes.append(f"the checkout stays at {self.checkout.head()}, not {self.origin}: "
                              f"{_changed(changed)}")
        elif self.origin:
            self.checkout.checkout(self.origin)

    def prepare(self, rev: str, log: Path) -> Prepared:
        changed = self.checkout.changed_files()
        if changed:
            raise BadInput(f"--repo {self.options.repo}: {_changed(changed)}; commit them, or make "
                           "--build leave tracked files alone, and start again")
        self.checkout.checkout(rev)
        if not self.options.build:
            return Prepared(ok=True, seconds=0.0, launch=self.options.launch)
        started = time.monotonic()
        with open(log, "wb") as out:
            done = subprocess.run(self.options.build, shell=True, cwd=self.options.repo, stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return Prepared(ok=done.returncode == 0, seconds=round(time.monotonic() - started, 3),
                        launch=self.options.launch,
                        why=f"--build exited with code {done.returncode} (its output: {log})")

    def check_imports(self, rev: str, launch: tuple[str, ...]) -> None:
        """Only without --build: a build may install the checkout anywhere (``pip install .``)."""
        if self.options.build:
            return
        imports.check(launch, self.options.repo, f"the checkout {self.options.repo}",
                      "Install it editable (pip install -e), put the checkout on PYTHONPATH, or "
                      "give a --build that installs it")

    def describe(self, rev: str) -> Commit:
        info = self.checkout.info(rev)
        return Commit(hash=info.hash, subject=info.subject, author_date=info.author_date,
                      files=info.files)


def _changed(files: list[str]) -> str:
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return (f"tracked files changed during the bisect ({shown}: by --build, or by hand), and "
            "crashlab never discards changes")


class Releases:
    """--versions, oldest first: the first is good, the last bad, each served from its own
    environment (releases.py), ``{python}`` in the launch command replaced by its interpreter."""

    def __init__(self, options: BisectOptions):
        self.options = options
        self.versions = list(options.versions)
        self.environments = Environments(options.releases_dir, options.base_python, options.install)
        self.reused: dict[str, bool] = {}
        self.notes: list[str] = []

    def span(self) -> tuple[str, list[str]]:
        return self.versions[0], self.versions[1:]

    def begin(self) -> None:
        """Nothing to put back: the user's environments are never touched."""

    def end(self) -> None:
        """As begin()."""

    def prepare(self, version: str, log: Path) -> Prepared:
        installed = self.environments.install(version, log)
        self.reused[version] = installed.reused
        launch = tuple(word.replace("{python}", str(installed.python)) for word in self.options.launch)
        return Prepared(ok=installed.ok, seconds=installed.seconds, launch=launch, why=installed.why)

    def check_imports(self, version: str, launch: tuple[str, ...]) -> None:
        imports.check(launch, self.environments.folder(version), f"release {version}'s environment",
                      "Something on PYTHONPATH or in the working directory hides the release")

    def describe(self, version: str) -> Release:
        return Release(version=version, python=str(self.environments.python(version)),
                       install=self.environments.shown_command(version),
                       reused=self.reused.get(version, False))


Source = Commits | Releases


def source(options: BisectOptions) -> Source:
    return Releases(options) if options.versions else Commits(options)
