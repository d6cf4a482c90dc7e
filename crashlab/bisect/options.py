"""What ``crashlab bisect`` was asked, checked before anything is checked out."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInput
from ..replay.expect import from_options
from ..replay.oracle import Watch
from ..replay.result import Expectation
from ..replay.send import Plan
from . import caches, releases
from .model import RESULT, STEP_LOG


@dataclass(frozen=True)
class BisectOptions:
    repo: Path
    #: --good and --bad; None with --check-fix
    good: str | None
    bad: str | None
    #: --check-fix: the commit said to fix the crash, tried against its parent
    check_fix: str | None
    dump: str
    url: str
    #: the command that starts the server: the words after ``--``
    launch: tuple[str, ...]
    build: str | None
    #: --versions, oldest first; empty when bisecting commits
    versions: tuple[str, ...]
    #: --install's template ({python}, {version}), --base-python and where the environments live
    install: str
    base_python: str
    releases_dir: Path
    #: --clear-cache: folders emptied before each step
    clear_caches: list[Path]
    #: runs on the --bad commit, to measure the reproduction rate
    repeat: int
    confidence: float
    max_runs: int
    #: --expect/--expect-kernel; None: the crash the --bad commit shows is the expected one
    expected: Expectation | None
    watch: Watch
    plan: Plan
    start_timeout: float
    output: Path
    as_json: bool

    @classmethod
    def from_command_line(cls, *, repo, good, bad, check_fix, dump, url, launch, build, versions,
                          install, base_python, releases_dir, clear_cache, repeat, confidence,
                          max_runs, expect, expect_kernel, health_interval, health_timeout,
                          settle, start_timeout, output, as_json) -> BisectOptions:
        if not launch:
            raise BadInput("bisect: give the server's launch command after --")
        _check_what_to_bisect(good, bad, check_fix, versions, build, launch)
        if not 0.0 < confidence < 1.0:
            raise BadInput(f"--confidence {confidence}: a fraction between 0 and 1")
        if not Path(dump).is_file():
            raise BadInput(f"--dump {dump}: no such file")
        # another bisect there would overwrite its step log and verdict
        earlier = [name for name in (STEP_LOG, RESULT) if (Path(output) / name).exists()]
        if earlier:
            raise BadInput(f"--out {output}: holds an earlier bisect ({earlier[0]}); give another "
                           "--out, or move that one away (crashlab does not overwrite it)")
        watch = Watch(health_interval=health_interval,
                      health_timeout=health_timeout, settle=settle)
        kept_releases = Path(releases_dir) if releases_dir else releases.default_root()
        keep = caches.protected(Path(repo), Path(output), Path(dump), kept_releases)
        return cls(repo=Path(repo), good=good, bad=bad, check_fix=check_fix, dump=dump, url=url.rstrip("/"),
                   launch=tuple(launch), build=build,
                   versions=tuple(releases.parse_versions(versions)) if versions else (),
                   install=install, base_python=base_python or sys.executable,
                   releases_dir=kept_releases,
                   clear_caches=caches.checked(clear_cache, keep), repeat=repeat, confidence=confidence,
                   max_runs=max_runs, expected=from_options(expect, expect_kernel), watch=watch,
                   plan=Plan.choose(), start_timeout=start_timeout, output=Path(output),
                   as_json=as_json)


def _check_what_to_bisect(good, bad, check_fix, versions, build, launch) -> None:
    """Commits (--good/--bad), a fix (--check-fix) or releases (--versions): one of them."""
    python_named = any("{python}" in word for word in launch)
    if versions:
        if good or bad or check_fix or build:
            raise BadInput("bisect: --versions bisects releases, oldest good and newest bad: drop "
                           "--good, --bad, --check-fix and --build (--install installs each)")
        if not python_named:
            raise BadInput("bisect --versions: start the server with {python}, the interpreter of "
                           "each release's environment (-- {python} -m sglang.launch_server ...)")
        return
    if python_named:
        raise BadInput("bisect: {python} in the launch command is for --versions")
    if check_fix and (good or bad):
        raise BadInput("bisect: --check-fix tries a commit against its parent: drop --good "
                       "and --bad")
    if not check_fix and not (good and bad):
        raise BadInput("bisect: give --good and --bad, --check-fix REV, or --versions")
