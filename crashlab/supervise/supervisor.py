"""``crashlab serve``: run a server, watch it, keep every artifact of its crash, triage it.

One loop, in the calling thread, ticks every TICK seconds: it polls the process tree, collects
finished coredumps, reads the kernel log, handles a stop request and notices the end of the
server. Beside it, one thread per output pipe (logtee) and one for /health (health) feed it
through the manifest, which the loop saves when it changed.

The order of an ending is the point of the whole thing:
1. the server (or one of its processes) dies, or the user asks crashlab to stop it;
2. while a coredump is being written (driver progress lines, a file open or growing) or SGLang
   is in its own pre-crash sequence, crashlab waits, up to --dump-timeout, instead of killing;
3. whatever is left of the tree gets the stop signal, then SIGKILL after --grace;
4. the output pipes are drained to their end, the last dumps and request dumps are collected
   and synced, every file is hashed;
5. the incident is triaged into report.json / report.md;
6. with --restart on-crash, a new incarnation starts after a doubling delay.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

import psutil
import requests

from .. import __version__
from ..errors import EXIT_FOUND, EXIT_NOTHING, CrashlabError
from ..report import run_views
from ..report.model import Source, Tool
from ..report.redact import Redactor
from ..report.run import FileRecord, Finding, Incident, RunReport
from . import collect, environment, files, incident, launch, rundir, timestamps
from .environment import CoredumpMode
from .health import HealthWatch
from .kernellog import KMSG, KernelLog
from .logscan import CHILD_CRASHED, StreamScanner
from .logtee import StreamTee
from .manifest import Crashlab, EnvironmentEntry, Health, Incarnation, Manifest, ManifestStore, Outcome
from .proctree import CRASH_SIGNALS, ProcessTree, subreaper

TICK = 0.1
TREE_EVERY = 0.25
SAVE_EVERY = 0.5
KILL_WAIT = 10.0
PIPE_DRAIN_WAIT = 10.0
MAX_RESTART_DELAY = 300.0

#: SGLang log lines that mean "I am crashing and writing my dumps": crashlab waits for it.
_SGLANG_CRASHING = ("SIGQUIT received", "Dumping requests before crash", "Waiting ",
                    "crashed with exit code", "Received sigquit")
_DUMPED_TO = "before crash to "

Notify = Callable[[str], None]


@dataclass
class ServeOptions:
    command: list[str]
    runs_dir: Path = Path("crashlab-runs")
    coredump: CoredumpMode = CoredumpMode.LIGHTWEIGHT
    user_dumps: bool = False
    health_url: str | None = None  # None: derived from --host/--port of the command
    health_interval: float = 10.0
    health_timeout: float = 30.0
    dump_timeout: float = 600.0
    grace: float = 30.0
    restart: str = "never"  # or "on-crash"
    max_restarts: int = 3
    restart_delay: float = 5.0
    echo: bool = True
    kernel_log: str = KMSG
    #: add cuda-gdb's view to each dump's report where cuda-gdb exists
    debugger: bool = True

    def as_manifest(self) -> dict:
        values = asdict(self)
        values.pop("command")
        values["runs_dir"] = str(self.runs_dir)
        values["coredump"] = self.coredump.value
        return values


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int  # 0: a crash (or dumps) caught and triaged; 1: clean exit or plain stop
    result: str
    report: RunReport | None


class _Incarnation:
    """The live parts of one server incarnation (threads, tree, collector)."""

    def __init__(self, supervisor: "Supervisor", number: int):
        self.sup = supervisor
        self.dirs = rundir.incarnation(supervisor.run_dir, number).create()
        self.plan = launch.plan(supervisor.options.command, self.dirs.requests, supervisor.cwd)
        self.env, self.settings = environment.resolve(
            supervisor.base_env, supervisor.options.coredump, supervisor.options.user_dumps,
            self.dirs.incoming, self.dirs.pipes)
        self.driver = collect.DriverProgress()
        self.sglang_crashing = False
        self.mentioned_request_dumps: list[Path] = []
        self.reported_exits: dict[int, int] = {}
        self.announced: set[str] = set()
        self.stop_sent = False
        self.root_ended_on_its_own = False
        url = supervisor.options.health_url or launch.health_url(self.plan.argv, self.plan.sglang)
        self.record = Incarnation(
            number=number, directory=str(self.dirs.path.relative_to(supervisor.run_dir)),
            status="starting", started_at=timestamps.now(), health=Health(url=url),
            kernel_log="watched")

    # -- findings, from the reader threads ------------------------------------------------
    def on_finding(self, finding: Finding) -> None:
        if finding.kind == "coredump":
            self.driver.observe(finding.text)
            if "Detected an exception" not in finding.text and "Writing ELF" not in finding.text \
                    and "Starting GPU coredump" not in finding.text:
                return  # progress chatter: tracked, not recorded
        if finding.kind == "sglang-crash":
            if any(marker in finding.text for marker in _SGLANG_CRASHING):
                self.sglang_crashing = True
            crashed = CHILD_CRASHED.search(finding.text)
            if crashed:
                self.reported_exits[int(crashed["pid"])] = int(crashed["code"])
            if _DUMPED_TO in finding.text:
                self.mentioned_request_dumps.append(Path(finding.text.rsplit(_DUMPED_TO, 1)[1].strip()))
        self.sup.store.add_finding(self.record, finding)
        if finding.kind not in self.announced and finding.kind != "coredump":
            self.announced.add(finding.kind)
            where = f" [{finding.rank}]" if finding.rank else ""
            lines = f"lines {finding.line}-{finding.end_line}" \
                if finding.end_line and finding.end_line != finding.line else f"line {finding.line}"
            self.sup.notify(f"{finding.kind} in {finding.stream} {lines}{where}: "
                            f"{finding.text.strip()[:160]}")

    def on_health(self, state: str, detail: str) -> None:
        with self.sup.store.edit():
            self.record.health.state = state
            if self.record.status in ("running", "healthy", "unhealthy"):
                self.record.status = state
            if state == "healthy" and self.record.health.first_healthy_at is None:
                self.record.health.first_healthy_at = timestamps.now()
            if state == "unhealthy":
                self.record.health.last_error = detail
            quiet = self.record.status not in ("running", "healthy", "unhealthy")
        if not quiet:  # while stopping or crashing, an unreachable server is no news
            self.sup.notify(f"server is {state} ({self.record.health.url}: {detail})")

    def save_server_info(self, session: requests.Session, base: str) -> None:
        """SGLang's resolved arguments and version, as JSON (the pickle's server_args can be
        None); older releases only have /get_server_info."""
        if not self.plan.sglang:
            return
        for endpoint in ("/server_info", "/get_server_info"):
            try:
                response = session.get(base + endpoint, timeout=self.sup.options.health_timeout)
                if response.status_code == 200:
                    files.write_json(self.dirs.server_info, self.sup.redactor.json(response.json()))
                    self.sup.store.add_files([collect.record(self.sup.run_dir, self.dirs.server_info,
                                                             "server-info")])
                    return
            except (requests.RequestException, ValueError):
                continue


class Supervisor:
    def __init__(self, options: ServeOptions, notify: Notify | None = None):
        self.options = options
        self.cwd = Path.cwd().resolve()
        self.base_env = dict(os.environ)
        #: knows the launch's secrets: everything crashlab writes or says goes through it
        self.redactor = Redactor.for_launch(options.command, self.base_env)
        told = notify or (lambda message: None)
        self.notify: Notify = lambda message: told(self.redactor.serialized(message))
        self._stops: list[int] = []
        # validate the command before any directory is made for it
        launch.plan(options.command, Path("requests"), self.cwd)
        self.run_dir = rundir.create(Path(options.runs_dir))
        me = psutil.Process()
        now = timestamps.now()
        self.store = ManifestStore(self.run_dir, Manifest(
            status="running", created_at=now, updated_at=now,
            crashlab=Crashlab(version=__version__, pid=me.pid, host=socket.gethostname(),
                              process_started=me.create_time()),
            command=self.redactor.argv(options.command), cwd=str(self.cwd),
            sglang=launch.is_sglang(options.command), options=options.as_manifest(),
            environment={}), self.redactor)
        self.incidents: list[Incident] = []

    # -- called from a signal handler: flags only, the loop acts on them ---------------------
    def request_stop(self, signum: int) -> None:
        self._stops.append(signum)

    @property
    def stopping(self) -> bool:
        return bool(self._stops)

    def run(self) -> RunOutcome:
        previous = subreaper(True)
        try:
            number, restarts = 1, 0
            while True:
                kind = self._incarnation(number)
                if not (kind == "crash" and self.options.restart == "on-crash"
                        and restarts < self.options.max_restarts and not self.stopping):
                    break
                restarts += 1
                delay = min(self.options.restart_delay * 2 ** (restarts - 1), MAX_RESTART_DELAY)
                self._status("waiting-to-restart")
                self.notify(f"restarting in {delay:g} s ({restarts} of {self.options.max_restarts})")
                if not self._sleep(delay):
                    break
                number += 1
        except CrashlabError as exc:  # the command could not be started
            self._conclude(Outcome(result="failed", exit_code=exc.exit_code, reason=str(exc)))
            raise
        finally:
            if previous is not None:
                subreaper(previous)
        return self._finish()

    # -- one incarnation ----------------------------------------------------------------
    def _incarnation(self, number: int) -> str | None:
        inc = _Incarnation(self, number)
        with self.store.edit() as manifest:
            manifest.incarnations.append(inc.record)
            manifest.environment = {s.name: EnvironmentEntry(**s.as_manifest()) for s in inc.settings}
        files.write_json(inc.dirs.launch, {
            "argv": self.redactor.argv(inc.plan.argv), "cwd": str(self.cwd), "sglang": inc.plan.sglang,
            "environment": self.redactor.environment(inc.env)})
        self.store.add_files([collect.record(self.run_dir, inc.dirs.launch, "launch")])
        self._status("running")

        process = launch.start(inc.plan.argv, inc.env, self.cwd)
        tees = [StreamTee(pipe, inc.dirs.log(stream),
                          getattr(sys, stream).buffer if self.options.echo else None,
                          StreamScanner(stream, inc.on_finding, redact=self.redactor.text),
                          self.redactor.text)
                for stream, pipe in (("stdout", process.stdout), ("stderr", process.stderr))]
        for tee in tees:
            tee.start()
        tree = ProcessTree(process, self.redactor)
        kernel_log = KernelLog(StreamScanner("kmsg", inc.on_finding, kinds=frozenset({"xid"}),
                                             redact=self.redactor.text), self.options.kernel_log)
        with self.store.edit():
            inc.record.pid = process.pid
            inc.record.status = "running"
            inc.record.processes = tree.records()
            if kernel_log.unavailable:
                inc.record.kernel_log = kernel_log.unavailable
        collector = collect.DumpCollector(self.run_dir, inc.dirs.cores, self._dump_sources(inc),
                                          tree.alive, inc.driver, since=time.time())
        health = None
        if inc.record.health.url:
            health = HealthWatch(inc.record.health.url, self.options.health_interval,
                                 self.options.health_timeout, inc.on_health, inc.save_server_info)
            health.start()
        self.notify(f"incarnation {number}: pid {process.pid}, logs in {inc.dirs.path}")

        try:
            self._watch(inc, tree, collector, kernel_log)
        finally:
            if health is not None:
                health.stop()
                with self.store.edit():
                    inc.record.health.checks, inc.record.health.failures = health.checks, health.failures
            if tree.alive():  # an exception above: never leave the server behind
                self._terminate(tree, collector, signal.SIGKILL)
        return self._wrap_up(inc, tree, collector, kernel_log, tees)

    def _dump_sources(self, inc: _Incarnation) -> list[collect.DumpSource]:
        sources = [collect.DumpSource(str(inc.dirs.incoming / "*"), ours=True)]
        template = inc.env.get(environment.FILE)
        if template and not template.startswith(str(inc.dirs.incoming)):
            pattern = environment.template_glob(str(self.cwd / template))
            if pattern is None:
                with self.store.edit():
                    inc.record.warnings.append(f"{environment.FILE}={template!r} pipes dumps to a "
                                               "command: crashlab cannot collect them")
            else:
                sources.append(collect.DumpSource(pattern, ours=False))
        return sources

    def _watch(self, inc: _Incarnation, tree: ProcessTree, collector: collect.DumpCollector,
               kernel_log: KernelLog) -> None:
        next_tree = next_save = 0.0
        while True:
            now = time.monotonic()
            if now >= next_tree:
                self._poll_tree(inc, tree)
                next_tree = now + TREE_EVERY
            if now >= next_save:
                self.store.save_if_dirty(timestamps.now())
                next_save = now + SAVE_EVERY
            self._collect(collector.poll())
            kernel_log.poll()
            if self.stopping:
                self._stop(inc, tree, collector, self._stops[0])
                return
            if tree.root.poll() is not None:
                inc.root_ended_on_its_own = True
                self._poll_tree(inc, tree)
                self._after_root(inc, tree, collector)
                return
            time.sleep(TICK)

    def _poll_tree(self, inc: _Incarnation, tree: ProcessTree) -> None:
        appeared, ended = tree.poll()
        ended += tree.reported_exits(inc.reported_exits)
        if not (appeared or ended):
            return
        with self.store.edit():
            inc.record.processes = tree.records()
            inc.record.forgotten_processes = tree.forgotten
        for record in ended:
            if record.exit is not None and record.exit.signal in CRASH_SIGNALS:
                ranks = f" {record.ranks}" if record.ranks else ""
                self.notify(f"{record.role}{ranks} (pid {record.pid}) {record.exit.describe()}")

    def _collect(self, records: list[FileRecord]) -> None:
        if records:
            self.store.add_files(records)
            for record in records:
                self.notify(f"coredump collected: {record.path} ({record.size_bytes} bytes"
                            f"{'' if record.complete else ', INCOMPLETE'})")

    def _evidence_in_flight(self, inc: _Incarnation, tree: ProcessTree,
                            collector: collect.DumpCollector) -> list[str]:
        if not tree.alive():
            return []
        reasons = collector.still_writing()
        if inc.sglang_crashing and tree.root.poll() is None:
            reasons.append("SGLang is in its pre-crash sequence (request dump, coredump wait)")
        return reasons

    def _wait_for_evidence(self, inc: _Incarnation, tree: ProcessTree,
                           collector: collect.DumpCollector) -> None:
        """Wait, up to --dump-timeout, while a dump is in flight; a second stop cuts it short."""
        deadline = time.monotonic() + self.options.dump_timeout
        told = False
        while (reasons := self._evidence_in_flight(inc, tree, collector)):
            if time.monotonic() >= deadline:
                with self.store.edit():
                    inc.record.warnings.append(f"gave up waiting after --dump-timeout "
                                               f"{self.options.dump_timeout:g} s: {'; '.join(reasons)}")
                self.notify(f"--dump-timeout reached, going on: {'; '.join(reasons)}")
                return
            if len(self._stops) >= 2:
                return
            if not told:
                told = True
                self._status("waiting-for-dumps")
                self.notify(f"waiting for evidence before killing anything: {'; '.join(reasons)}"
                            f" (up to {self.options.dump_timeout:g} s; a second Ctrl-C stops now)")
                with self.store.edit():
                    inc.record.status = "crashing"
            self._poll_tree(inc, tree)
            self._collect(collector.poll())
            self.store.save_if_dirty(timestamps.now())
            time.sleep(TICK)

    def _stop(self, inc: _Incarnation, tree: ProcessTree, collector: collect.DumpCollector,
              signum: int) -> None:
        self.notify(f"received {signal.Signals(signum).name}: stopping the server")
        self._wait_for_evidence(inc, tree, collector)
        with self.store.edit():
            inc.record.stopped_by_crashlab = True
            inc.record.status = "stopping"
        self._status("stopping")
        self._terminate(tree, collector, signum, inc)

    def _after_root(self, inc: _Incarnation, tree: ProcessTree,
                    collector: collect.DumpCollector) -> None:
        """The launched process is gone; what it left running is stopped once no dump is in
        flight, so nothing outlives the run."""
        self._wait_for_evidence(inc, tree, collector)
        if tree.alive():
            self.notify(f"the server's main process ended; stopping the {len(tree.alive())} "
                        "process(es) it left")
            self._terminate(tree, collector, signal.SIGTERM, inc)

    def _terminate(self, tree: ProcessTree, collector: collect.DumpCollector, signum: int,
                   inc: _Incarnation | None = None) -> None:
        """The signal to the whole tree, then SIGKILL after --grace (or a second stop)."""
        if inc is not None:
            if not inc.stop_sent and tree.root.poll() is not None:
                inc.root_ended_on_its_own = True
            inc.stop_sent = True
        tree.signal_all(signum)
        stops = len(self._stops)
        deadline = time.monotonic() + (self.options.grace if signum != signal.SIGKILL else KILL_WAIT)
        while tree.alive() and time.monotonic() < deadline and len(self._stops) == stops:
            time.sleep(TICK)
            tree.poll()
            self._collect(collector.poll())
        if tree.alive() and signum != signal.SIGKILL:
            self.notify(f"{len(tree.alive())} process(es) still running after --grace "
                        f"{self.options.grace:g} s: SIGKILL")
            tree.signal_all(signal.SIGKILL)
            deadline = time.monotonic() + KILL_WAIT
            while tree.alive() and time.monotonic() < deadline:
                time.sleep(TICK)
                tree.poll()
        tree.poll()

    def _wrap_up(self, inc: _Incarnation, tree: ProcessTree, collector: collect.DumpCollector,
                 kernel_log: KernelLog, tees: list[StreamTee]) -> str | None:
        for tee in tees:
            if not tee.join(PIPE_DRAIN_WAIT):
                with self.store.edit():
                    inc.record.warnings.append(f"{tee.log_path.name}: still open {PIPE_DRAIN_WAIT:g} s "
                                               "after the server ended (a process outside the tree "
                                               "holds it); the log may be cut")
        kernel_log.close()
        self._poll_tree(inc, tree)
        self._collect(collector.collect_remaining())
        elsewhere = list(inc.mentioned_request_dumps)
        if inc.plan.crash_dump_folder is not None and not inc.plan.crash_dump_folder_is_ours:
            elsewhere += collect.request_dumps_in(inc.plan.crash_dump_folder)
        started = datetime.fromisoformat(inc.record.started_at).timestamp()
        request_dumps = collect.collect_request_dumps(self.run_dir, inc.dirs.requests, elsewhere,
                                                      started, socket.gethostname())
        logs = [collect.record(self.run_dir, tee.log_path, "log") for tee in tees]
        self.store.add_files(request_dumps + logs)
        problems = [p for tee in tees for p in tee.problems]
        with self.store.edit():
            inc.record.processes = tree.records()
            inc.record.exit = tree.root_record.exit
            inc.record.ended_at = timestamps.now()
            inc.record.warnings += problems
        dumps = [f for f in self.store.manifest.files
                 if f.kind == "coredump" and f.path.startswith(inc.record.directory + "/")]
        return self._triage(inc, dumps, request_dumps)

    def _triage(self, inc: _Incarnation, dumps: list[FileRecord],
                request_dumps: list[FileRecord]) -> str | None:
        triaged = []
        if dumps:
            self._status("triaging")
            self.notify(f"triaging {len(dumps)} coredump(s)")
            triaged = incident.triage_dumps(self.run_dir, dumps, self.options.debugger)
        kind = incident.kind_of(inc.record, triaged, request_dumps, inc.root_ended_on_its_own)
        with self.store.edit():
            inc.record.incident = kind
            inc.record.status = ("crashed" if kind == "crash" else
                                 "stopped" if inc.record.stopped_by_crashlab else "exited")
        if kind is not None:
            self.incidents.append(incident.build(self.run_dir, inc.record, kind, triaged,
                                                 request_dumps, self.options.debugger,
                                                 self.redactor.text))
            self._write_report()
        self.store.save(timestamps.now())
        return kind

    def _report(self) -> RunReport:
        crash = any(i.kind == "crash" for i in self.incidents)
        size = sum(f.size_bytes for f in self.store.manifest.files)
        return RunReport(
            tool=Tool(version=__version__), status="crash" if crash else "dumps",
            summary=self.incidents[0].summary if len(self.incidents) == 1 else
            f"{len(self.incidents)} incidents; first: {self.incidents[0].summary}",
            source=Source(path=str(self.run_dir), size_bytes=size, kind="run"),
            command=self.store.manifest.command, incidents=self.incidents,
            warnings=[w for inc in self.store.manifest.incarnations for w in inc.warnings])

    def _write_report(self) -> None:
        report = self._report()
        files.write_atomic(self.run_dir / "report.json",
                           self.redactor.serialized(report.model_dump_json(indent=2)).encode() + b"\n")
        files.write_atomic(self.run_dir / "report.md",
                           self.redactor.serialized(run_views.markdown(report)).encode())
        self.store.add_files([collect.record(self.run_dir, self.run_dir / name, "report")
                              for name in ("report.json", "report.md")])

    def _finish(self) -> RunOutcome:
        manifest = self.store.manifest
        last = manifest.incarnations[-1] if manifest.incarnations else None
        if self.incidents:
            crash = any(i.kind == "crash" for i in self.incidents)
            result = "crash" if crash else "dumps"
            outcome = Outcome(result=result, exit_code=EXIT_FOUND, reason=self._report().summary)
        elif last is not None and last.stopped_by_crashlab:
            outcome = Outcome(result="stopped", exit_code=EXIT_NOTHING,
                              reason="stopped on request, no crash")
        else:
            outcome = Outcome(result="clean-exit", exit_code=EXIT_NOTHING,
                              reason=f"server {last.exit.describe() if last and last.exit else 'ended'}")
        self._conclude(outcome)
        return RunOutcome(self.run_dir, outcome.exit_code, outcome.result,
                          self._report() if self.incidents else None)

    def _conclude(self, outcome: Outcome) -> None:
        with self.store.edit() as manifest:
            manifest.outcome = outcome
            manifest.status = "done"
            manifest.ended_at = timestamps.now()
        self.store.save(timestamps.now())

    def _status(self, status: str) -> None:
        with self.store.edit() as manifest:
            manifest.status = status
        self.store.save(timestamps.now())

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless a stop comes; False if one did."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.stopping:
                return False
            time.sleep(TICK)
        return not self.stopping


def serve(options: ServeOptions, notify: Notify | None = None) -> RunOutcome:
    """Supervise one server until it ends (and its restarts, if asked); see the module doc.

    Run it in a process of its own (the CLI does): it makes the process a child subreaper and
    counts every child process started meanwhile as part of the server's tree.
    """
    return Supervisor(options, notify).run()
