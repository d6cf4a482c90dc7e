"""What ``crashlab replay`` was asked, checked once and turned into the runner's values.

Every option is checked before the dump is read: a contradiction, a bad pattern, a bad budget
or a missing compute-sanitizer is refused at once, not after minutes of loading.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput
from .expect import from_options
from .minimize import Budget
from .result import Expectation

if TYPE_CHECKING:
    from .oracle import Watch
    from .runner import Fidelity, Target
    from .send import Plan


@dataclass(frozen=True)
class ReplayOptions:
    """The options of one ``crashlab replay``, as the runner takes them."""

    dump: str
    as_json: bool
    #: the server to replay against; None: list the dump, replay nothing
    target: Target | None
    #: how requests are sent and the server watched; None with no target
    plan: Plan | None
    watch: Watch | None
    repeat: int
    #: the crash that counts as reproduced (--expect, --expect-kernel); None: not given
    expected: Expectation | None
    #: --any-crash: any crash counts, none is looked for in a run directory either
    any_crash: bool
    #: seconds of p99 send lateness beyond which an attempt did not keep its schedule
    late_threshold: float
    force_decode: str
    #: --minimize's budget of trials or time; None: replay, do not minimize
    minimize: Budget | None
    #: where --minimize writes the minimal dump
    output: str

    @classmethod
    def from_command_line(cls, *, dump, as_list, as_json, url, speed, max_rate, concurrency,
                          timeout, repeat, watch_cores, watch_log, fault_pattern, pid,
                          health_interval, health_timeout, settle, restart_cmd, start_timeout,
                          do_minimize, budget, output, late_threshold, force_decode, expect,
                          expect_kernel, any_crash, harden, api_key) -> ReplayOptions:
        """The options as click parsed them (names as in crashlab/cli/replay.py); BadInput, or
        EnvironmentProblem for --harden sanitizer without compute-sanitizer."""
        contradiction = _contradiction(as_list=as_list, url=url, minimize=do_minimize,
                                       restart_cmd=restart_cmd, harden=harden,
                                       any_crash=any_crash, expect=expect or expect_kernel)
        if contradiction:
            raise BadInput(f"replay: {contradiction}")
        expected = from_options(expect, expect_kernel)
        trials = Budget.parse(budget)
        target = plan = watch = None
        if url:  # a listing replays nothing: HTTP and process watching are not even imported
            from .harden import harden as harden_command
            from .oracle import Watch
            from .runner import Target
            from .send import Plan

            plan = Plan.choose(speed=speed, max_rate=max_rate, concurrency=concurrency,
                               timeout=timeout)
            watch = Watch(pid=pid, cores=watch_cores, log=watch_log,
                          patterns=tuple(fault_pattern),
                          health_interval=health_interval, health_timeout=health_timeout,
                          settle=settle)
            hardened = harden_command(restart_cmd, harden) if harden else None
            target = Target(url=url, restart_cmd=restart_cmd, start_timeout=start_timeout,
                            harden=hardened, api_key=api_key)
        return cls(dump=dump, as_json=as_json, target=target, plan=plan, watch=watch,
                   repeat=repeat, expected=expected, any_crash=any_crash,
                   late_threshold=late_threshold / 1000, force_decode=force_decode,
                   minimize=trials if do_minimize else None,
                   output=output or str(Path(dump).with_suffix("")) + ".min.pkl")

    def fidelity(self, expected: Expectation | None) -> Fidelity:
        from .runner import Fidelity

        return Fidelity(expected=expected, late_threshold=self.late_threshold,
                        force=self.force_decode)


def _contradiction(*, as_list, url, minimize, restart_cmd, harden, any_crash,
                   expect) -> str | None:
    """The first options that cannot go together, as the sentence that refuses them."""
    rules = (
        (as_list and url, "--list lists the dump and replays nothing: drop --url or --list"),
        (url is None and (minimize or restart_cmd), "--minimize and --restart-cmd need --url"),
        (minimize and not restart_cmd,
         "--minimize needs --restart-cmd (each trial starts a fresh server)"),
        (harden and not restart_cmd,
         "--harden changes how --restart-cmd runs the server: give --restart-cmd"),
        (any_crash and expect, "--any-crash and --expect/--expect-kernel contradict each other"),
    )
    return next((why for broken, why in rules if broken), None)
