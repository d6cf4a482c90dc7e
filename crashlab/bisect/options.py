"""What ``crashlab bisect`` was asked, checked before anything is checked out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInput
from ..replay.expect import from_options
from ..replay.oracle import FAULT_PATTERNS, Watch
from ..replay.result import Expectation
from ..replay.send import Plan


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
    def from_command_line(cls, *, repo, good, bad, check_fix, dump, url, launch, build, repeat, confidence,
                          max_runs, expect, expect_kernel, health_interval, health_timeout,
                          settle, start_timeout, output, as_json) -> BisectOptions:
        if not launch:
            raise BadInput("bisect: give the server's launch command after --")
        if check_fix and (good or bad):
            raise BadInput("bisect: --check-fix tries a commit against its parent: drop --good "
                           "and --bad")
        if not check_fix and not (good and bad):
            raise BadInput("bisect: give --good and --bad (or --check-fix REV)")
        if not 0.0 < confidence < 1.0:
            raise BadInput(f"--confidence {confidence}: a fraction between 0 and 1")
        if not Path(dump).is_file():
            raise BadInput(f"--dump {dump}: no such file")
        watch = Watch(patterns=FAULT_PATTERNS, health_interval=health_interval,
                      health_timeout=health_timeout, settle=settle)
        return cls(repo=Path(repo), good=good, bad=bad, check_fix=check_fix, dump=dump, url=url.rstrip("/"),
                   launch=tuple(launch), build=build, repeat=repeat, confidence=confidence,
                   max_runs=max_runs, expected=from_options(expect, expect_kernel), watch=watch,
                   plan=Plan.choose(), start_timeout=start_timeout, output=Path(output),
                   as_json=as_json)
