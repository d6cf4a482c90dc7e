"""One incarnation of the server: its directories, its environment, and what its output says.

The reader threads (logtee, kmsg, health) call ``on_finding`` and ``on_health``; the flags they
set (SGLang crashing, exit codes it reported, request dumps it mentioned) steer the ending.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import requests

from ..launchline import bearer
from ..logpatterns import CHILD_CRASHED, crash_line
from ..privacy.redact import Redactor
from ..report.run import Finding
from ..report.sglang_records import SGLangRecords
from ..vocabulary import COREDUMP, SGLANG_CRASH
from . import collect, environment, files, hangsources, launch, rundir, timestamps
from .manifest import Health, Incarnation, ManifestStore
from .options import Notify, ServeOptions

_DUMPED_TO = "before crash to "


@dataclass(frozen=True)
class RunContext:
    """What an incarnation needs of the run it belongs to, so that it does not hold the
    supervisor (which holds it): where the run is, what was asked, and where to say things."""

    run_dir: Path
    cwd: Path
    #: the environment crashlab was started with, which each incarnation's is made from
    base_env: dict[str, str]
    options: ServeOptions
    store: ManifestStore
    redactor: Redactor
    notify: Notify


class LiveIncarnation:
    """The live state of one server incarnation, beside its manifest record."""

    def __init__(self, run: RunContext, number: int):
        self.run = run
        self.dirs = rundir.incarnation(run.run_dir, number).create()
        self.plan = launch.plan(run.options.command, self.dirs.requests, run.cwd)
        self.stack = hangsources.Stack.of_run(run.run_dir)
        self.env, self.settings = environment.resolve(
            run.base_env, run.options.coredump, run.options.user_dumps, self.dirs.incoming,
            self.dirs.pipes, hangsources.wanted(self.stack, self.dirs.flight_recorder,
                                                self.dirs.pipes, hangsources.free_port()),
            hangsources.SPELLINGS)
        self.driver = collect.DriverProgress()
        self.sglang_crashing = False
        self.mentioned_request_dumps: list[Path] = []
        self.reported_exits: dict[int, int] = {}
        self.announced: set[str] = set()
        self.stop_sent = False
        self.root_ended_on_its_own = False
        #: the survived faults made incidents, by (stream, line) of their line
        self.survived: set[tuple[str, int]] = set()
        #: what SGLang itself wrote around the crash, read once the server has ended
        self.sglang_records: SGLangRecords | None = None
        url = run.options.health_url or launch.health_url(self.plan.argv, self.plan.sglang)
        self.record = Incarnation(
            number=number, directory=str(self.dirs.path.relative_to(run.run_dir)),
            status="starting", started_at=timestamps.now(), health=Health(url=url),
            kernel_log="watched")

    def dump_sources(self) -> list[collect.DumpSource]:
        """Where this incarnation's coredumps land: crashlab's own folder, and the user's
        CUDA_COREDUMP_FILE pattern where it names files rather than a pipe to a command."""
        store = self.run.store
        sources = [collect.DumpSource(str(self.dirs.incoming / "*"), ours=True)]
        template = self.env.get(environment.FILE)
        if template and not template.startswith(str(self.dirs.incoming)):
            pattern = environment.template_glob(str(self.run.cwd / template))
            if pattern is None:
                with store.edit():
                    self.record.warnings.append(f"{environment.FILE}={template!r} pipes dumps to a "
                                                "command: crashlab cannot collect them")
            else:
                sources.append(collect.DumpSource(pattern, ours=False))
        return sources

    # -- findings, from the reader threads ------------------------------------------------
    def on_finding(self, finding: Finding) -> None:
        if finding.kind == COREDUMP:
            self.driver.observe(finding.text)
            line = crash_line(finding.text)
            if line is None or not line.milestone:
                return  # progress chatter: tracked, not recorded (logpatterns' milestones are)
        if finding.kind == SGLANG_CRASH:
            self._observe_sglang_crash(finding.text)
        self.run.store.add_finding(self.record, finding)
        if finding.kind not in self.announced and finding.kind != COREDUMP:
            self.announced.add(finding.kind)
            self._announce(finding)

    def _observe_sglang_crash(self, text: str) -> None:
        """SGLang's crash path (its SIGQUIT handler, its watchdog naming a dead child, its
        request dump: logpatterns' crash_path lines) has begun: crashlab waits for it."""
        line = crash_line(text)
        if line is not None and line.crash_path:
            self.sglang_crashing = True
        crashed = CHILD_CRASHED.search(text)
        if crashed:
            self.reported_exits[int(crashed["pid"])] = int(crashed["code"])
        if _DUMPED_TO in text:
            self.mentioned_request_dumps.append(Path(text.rsplit(_DUMPED_TO, 1)[1].strip()))

    def _announce(self, finding: Finding) -> None:
        where = f" [{finding.rank}]" if finding.rank else ""
        lines = f"lines {finding.line}-{finding.end_line}" \
            if finding.end_line and finding.end_line != finding.line else f"line {finding.line}"
        self.run.notify(f"{finding.kind} in {finding.stream} {lines}{where}: "
                               f"{finding.text.strip()[:160]}")

    def on_health(self, state: str, detail: str) -> None:
        with self.run.store.edit():
            self.record.health.state = state
            if self.record.status in ("running", "healthy", "unhealthy"):
                self.record.status = state
            if state == "healthy" and self.record.health.first_healthy_at is None:
                self.record.health.first_healthy_at = timestamps.now()
            if state == "unhealthy":
                self.record.health.last_error = detail
            quiet = self.record.status not in ("running", "healthy", "unhealthy")
        if not quiet:  # while stopping or crashing, an unreachable server is no news
            self.run.notify(f"server is {state} ({self.record.health.url}: {detail})")

    def save_server_info(self, session: requests.Session, base: str) -> None:
        """SGLang's resolved arguments and version, as JSON (the pickle's server_args can be
        None); older releases only have /get_server_info. A server started with --api-key
        answers 401 without it, so the launch's own key is sent."""
        if not self.plan.sglang:
            return
        run = self.run
        for endpoint in ("/server_info", "/get_server_info"):
            try:
                response = session.get(base + endpoint, timeout=run.options.health_timeout,
                                       headers=bearer(self.plan.argv))
                if response.status_code == 200:
                    files.write_json(self.dirs.server_info, run.redactor.json(response.json()))
                    run.store.add_files([collect.record(run.run_dir, self.dirs.server_info,
                                                        "server-info")])
                    return
            except (requests.RequestException, ValueError):
                continue
