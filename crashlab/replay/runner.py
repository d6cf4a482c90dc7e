"""Replay a dump against a server N times, or minimize it: the pipelines under ``crashlab replay``.

One attempt = (restart the server, if crashlab manages it) -> watch -> send -> settle -> verdict.
Without --restart-cmd the server the user started is replayed against as it is; once it has
crashed, later attempts cannot run and are reported as skipped. The verdict compares the crash
with the expected one (signature.py), so that a replay that finds another crash says so and the
minimizer does not shrink toward it; each attempt also says whether it kept its schedule.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..errors import EnvironmentProblem
from ..launchline import bearer
from ..privacy.redact import Redactor
from ..report.tool import Tool
from ..version import __version__
from .compare import divergence
from .force import Forcing, forceable, probe_trace
from .minimize import Budget, BudgetExhausted, ddmin
from .oracle import Oracle, Watch
from .records import CrashDump, Request
from .result import (
    Attempt,
    Expectation,
    ForceDecode,
    Harden,
    Minimization,
    Pacing,
    ReplayResult,
    RequestOutcome,
    Schedule,
)
from .send import Plan, Sender
from .server import ManagedServer, healthy
from .signature import compare, observe
from .writer import write_subset

Progress = Callable[[int, int], None]
#: After the first sign of a crash, how long to wait for the rest (exit, log lines, cores).
_CORROBORATE_S = 0.5


@dataclass
class Fidelity:
    """How faithful a replay must be, and what counts as reproducing the recorded crash."""

    expected: Expectation | None = None
    late_threshold: float = 0.05
    force: str = "auto"  # "auto", "trace", "length" or "off"
    decided: ForceDecode | None = field(default=None, repr=False)

    def forcing(self, batch: list[Request], target: Target) -> Forcing:
        """The decode forcing for this replay, decided once (auto probes the first server)."""
        if self.decided is None:
            self.decided = self._decide(batch, target)
        return Forcing(self.decided.used)

    def _decide(self, batch: list[Request], target: Target) -> ForceDecode:
        count = sum(map(forceable, batch))
        if self.force == "off":
            return ForceDecode(asked="off", used="off", reason="--force-decode off")
        if count == 0:
            return ForceDecode(asked=self.force, used="off",
                               reason="the dump recorded no output lengths to force")
        if self.force in ("trace", "length"):
            return ForceDecode(asked=self.force, used=self.force, requests=count,
                               reason=f"--force-decode {self.force}")
        takes, answer = probe_trace(target.url, headers=target.headers)
        used = "trace" if takes else "length"
        reason = ("the server takes trace_decode_token_ids" if takes else
                  "the server does not take trace_decode_token_ids: min_new_tokens = "
                  "max_new_tokens = the recorded count, ignore_eos")
        return ForceDecode(asked="auto", used=used, reason=reason, requests=count,
                           probe=f"POST /generate max_new_tokens=-1 trace_decode_token_ids=[0] -> {answer}")


@dataclass
class Target:
    """The server: a URL, and the command that (re)starts it when crashlab manages it."""

    url: str
    restart_cmd: str | None = None
    start_timeout: float = 600.0
    server_log: Path | None = None
    harden: Harden | None = None
    #: the server's --api-key; by default the one --restart-cmd starts it with
    api_key: str | None = None
    #: what messages call restart_cmd: the option that gave it, or (bisect) what it runs
    command_name: str = "--restart-cmd"
    _server: ManagedServer | None = field(default=None, repr=False)

    def server(self) -> ManagedServer | None:
        if self.restart_cmd and self._server is None:
            log = self.server_log
            if log is None:
                descriptor, name = tempfile.mkstemp(prefix="crashlab-server-", suffix=".log")
                os.close(descriptor)
                log = Path(name)
            command, env, hint = self.restart_cmd, {}, ""
            if self.harden is not None:
                command, env = self.harden.command, self.harden.env
                hint = (f"; --harden {self.harden.profile} ran it as: {self.redactor.text(command)}"
                        + (" (an SGLang without the KV canary refuses --kv-canary)"
                           if self.harden.profile != "sanitizer" else ""))
            self._server = ManagedServer(command, self.url, log, self.start_timeout, env, hint,
                                         self.command_name)
        return self._server

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()

    @cached_property
    def _restart_argv(self) -> list[str]:
        try:
            return shlex.split(self.restart_cmd or "")
        except ValueError:  # unbalanced quotes: /bin/sh will say so; its words are still known
            return (self.restart_cmd or "").split()

    @cached_property
    def headers(self) -> dict[str, str]:
        """What every request carries: SGLang started with --api-key refuses the rest with 401
        (its /health* needs no key, so health checks go without)."""
        return bearer(self._restart_argv, self.api_key)

    @cached_property
    def redactor(self) -> Redactor:
        """Knows the secrets of --restart-cmd, of --api-key and of the environment they run in."""
        given = ["--api-key", self.api_key] if self.api_key else []
        return Redactor.for_launch([*self._restart_argv, *given],
                                   {**os.environ, **(self.harden.env if self.harden else {})})

    @property
    def reported_harden(self) -> Harden | None:
        """--harden's record, its command masked like any launch line."""
        if self.harden is None:
            return None
        return self.harden.model_copy(update={"command": self.redactor.text(self.harden.command)})

    @property
    def log(self) -> str | None:
        return str(self._server.log) if self._server else None


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def schedule_of(outcomes: list[RequestOutcome], plan: Plan, threshold: float) -> Schedule:
    """Lateness figures of one attempt; a schedule is kept when its p99 is within ``threshold``."""
    late = [max(0.0, o.late_s) for o in outcomes if o.late_s is not None]
    p99 = _percentile(late, 0.99)
    return Schedule(late_p50_s=_percentile(late, 0.5), late_p99_s=p99,
                    late_max_s=max(late) if late else None, threshold_s=threshold,
                    kept=None if p99 is None or plan.mode == "concurrency" else p99 <= threshold)


def _core_faults(paths: list[str]) -> list[tuple[str | None, str | None]]:
    """(kernel, exception name) of the first fault of each new coredump crashlab can read."""
    from ..api import inspect

    found: list[tuple[str | None, str | None]] = []
    for path in paths[:4]:
        try:
            faults = inspect(path, sass=False).faults
        except Exception:  # a core still being written, or not a CUDA core: no evidence
            continue
        if faults:
            kernel = faults[0].kernel
            found.append((kernel.name if kernel else None, faults[0].exception.name))
    return found


def attempt(batch: list[Request], target: Target, plan: Plan, watch: Watch, number: int,
            progress: Progress | None = None, fidelity: Fidelity | None = None) -> Attempt:
    """One replay of ``batch``; raises EnvironmentProblem if the server is not there to begin with."""
    fidelity = fidelity or Fidelity(force="off")
    server = target.server()
    child = server.start() if server else None
    if child is None and not healthy(target.url):
        raise EnvironmentProblem(f"no healthy server at {target.url} (GET /health failed); start it, "
                                 "or give --restart-cmd")
    forcing = fidelity.forcing(batch, target)
    oracle = Oracle(target.url, watch, child=child, server_log=server.log if server else None,
                    redact=target.redactor.text).start()
    started = time.monotonic()
    sender = Sender(target.url, batch, plan, oracle, progress, forcing, target.headers)
    outcomes = sender.run()
    if oracle.tripped.wait(watch.settle):
        time.sleep(min(watch.settle, _CORROBORATE_S))  # let the other evidence land too
    else:
        oracle.check_health()
    oracle.check()
    oracle.stop()
    by_index = {request.index: request for request in batch}
    for outcome in outcomes:
        if outcome.status == "ok" and outcome.output is not None:
            outcome.divergence = divergence(by_index[outcome.index], outcome.output)
    lags = [abs(o.sent_s - o.scheduled_s) for o in outcomes
            if o.sent_s is not None and o.scheduled_s is not None]
    observed = observe(oracle.fault_lines, _core_faults(oracle.new_cores))
    verdict, mismatch = compare(fidelity.expected, observed, bool(oracle.signals))
    delivered = [o.delivery for o in outcomes]
    return Attempt(number=number, reproduced=verdict in ("reproduced", "crashed"), verdict=verdict,
                   mismatch=mismatch, observed=observed, signals=list(oracle.signals),
                   requests=outcomes, sent=sum(o.sent_s is not None for o in outcomes),
                   answered=delivered.count("answered"),
                   failed_after_send=delivered.count("failed-after-send"),
                   never_sent=delivered.count("never-sent"), reconnects=sender.client.reconnects,
                   schedule=schedule_of(outcomes, plan, fidelity.late_threshold),
                   ok=sum(o.status == "ok" for o in outcomes),
                   divergences=sum(o.divergence is not None for o in outcomes),
                   duration_s=round(time.monotonic() - started, 3),
                   lag_p50_s=_percentile(lags, 0.5), lag_p99_s=_percentile(lags, 0.99))


def _pacing(plan: Plan) -> Pacing:
    return Pacing(mode=plan.mode, speed=plan.speed, max_rate=plan.max_rate,
                  concurrency=plan.concurrency, timeout_s=plan.timeout)


def _kept(attempts: list[Attempt]) -> bool | None:
    verdicts = [a.schedule.kept for a in attempts if a.schedule and a.schedule.kept is not None]
    return all(verdicts) if verdicts else None


def replay(dump: CrashDump, target: Target, plan: Plan, watch: Watch, repeat: int = 1,
           progress: Progress | None = None, fidelity: Fidelity | None = None,
           warnings: list[str] | None = None) -> ReplayResult:
    """Replay every request ``repeat`` times; the result counts the attempts that reproduced."""
    fidelity = fidelity or Fidelity()
    attempts, warnings = [], list(warnings or [])
    try:
        for number in range(1, repeat + 1):
            if number > 1 and not target.restart_cmd and not healthy(target.url):
                warnings.append(f"the server is down after attempt {number - 1}; the remaining "
                                f"{repeat - number + 1} attempts need --restart-cmd to run")
                break
            attempts.append(attempt(dump.requests, target, plan, watch, number, progress, fidelity))
    finally:
        target.close()
    return ReplayResult(tool=Tool(version=__version__), dump=dump.path, layout=dump.layout,
                        url=target.url, pacing=_pacing(plan), repeat=repeat,
                        reproductions=sum(a.reproduced for a in attempts), attempts=attempts,
                        expected=fidelity.expected, force_decode=fidelity.decided,
                        harden=target.reported_harden, schedule_kept=_kept(attempts),
                        server_log=target.log, warnings=dump.warnings + warnings)


def minimize(dump: CrashDump, target: Target, plan: Plan, watch: Watch, budget: Budget,
             output: str | os.PathLike, repeat: int = 1,
             on_trial: Callable[[int, int, bool], None] | None = None,
             fidelity: Fidelity | None = None, warnings: list[str] | None = None) -> ReplayResult:
    """ddmin over the requests (the in-flight ones tried alone first), each trial on a fresh server.

    A trial reproduces when any of its ``repeat`` attempts does: with an expected crash, only a
    crash that matches it (a "different crash" is a failed trial). Writes the smallest
    reproducing set to ``output`` in SGLang's layout.
    """
    fidelity = fidelity or Fidelity()
    if not target.restart_cmd:
        raise EnvironmentProblem("--minimize needs --restart-cmd: each trial starts a fresh server")
    requests = dump.requests
    first: list[Attempt] = []

    def fails(indices: list[int]) -> bool:
        batch = [requests[index] for index in sorted(indices)]
        runs = [attempt(batch, target, plan, watch, number, fidelity=fidelity)
                for number in range(1, repeat + 1)]
        if not first:
            first.extend(runs)
        crashed = any(run.reproduced for run in runs)
        if on_trial:
            on_trial(budget.used, len(indices), crashed)
        return crashed

    everything = [request.index for request in requests]
    in_flight = [request.index for request in dump.in_flight]
    minimal, exhausted = [], False
    try:
        budget.spend()
        if fails(everything):
            minimal = everything
            if 0 < len(in_flight) < len(everything):
                budget.spend()
                if fails(in_flight):
                    minimal = in_flight
            minimal, exhausted = ddmin(minimal, fails, budget)
    except BudgetExhausted:
        exhausted = True
    finally:
        target.close()
    kept = [requests[index] for index in minimal]
    if kept:
        write_subset(dump, kept, output)
    result = ReplayResult(
        tool=Tool(version=__version__), dump=dump.path, layout=dump.layout, url=target.url,
        pacing=_pacing(plan), repeat=repeat, reproductions=sum(a.reproduced for a in first[:repeat]),
        attempts=first[:repeat], expected=fidelity.expected, force_decode=fidelity.decided,
        harden=target.reported_harden, schedule_kept=_kept(first[:repeat]), server_log=target.log,
        warnings=list(dump.warnings) + list(warnings or []),
        minimization=Minimization(original=len(requests), minimal=minimal,
                                  minimal_rids=[requests[index].rid for index in minimal],
                                  trials=budget.used, budget=budget.describe(),
                                  budget_exhausted=exhausted, budget_left=budget.left(),
                                  elapsed_s=round(budget.elapsed(), 3),
                                  output=os.fspath(output) if kept else None))
    return result
