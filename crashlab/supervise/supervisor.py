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
4. the output pipes are drained to their end, the driver's named pipes removed (a run
   directory must copy), the last dumps and request dumps are collected and synced, every
   file is hashed;
5. the incident is triaged into report.json / report.md, recorded in the crash index and
   printed (its summary, signature, dumps, replay line), before any restart;
6. with --restart on-crash, a new incarnation starts after a doubling delay.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import psutil

from .. import __version__
from ..env import hostcore
from ..errors import CrashlabError
from ..launchline import disaggregation_role
from ..notation import counted
from ..privacy.redact import Redactor
from ..report import run_views
from ..report.advice import Advice
from ..report.hoststacks import NativeStack, PythonStack
from ..report.run import FileRecord, Incident
from ..vocabulary import XID
from . import (
    collect,
    files,
    hostcrash,
    incident,
    launch,
    rundir,
    runreport,
    sglang_records,
    survived,
    timestamps,
)
from .envcapture import write_environment
from .hangwatch import HangWatch
from .health import HealthWatch
from .incarnation import LiveIncarnation, RunContext
from .kernellog import KernelLog
from .logscan import StreamScanner
from .logtee import StreamTee
from .manifest import Crashlab, EnvironmentEntry, Manifest, ManifestStore, Outcome
from .options import Notify, RunOutcome, ServeOptions
from .proctree import ProcessTree, subreaper
from .shutdown import TICK, Shutdown
from .stopsignals import forwarded_stops
from .treewatch import TreeWatch

TREE_EVERY = 0.25
SAVE_EVERY = 0.5
PIPE_DRAIN_WAIT = 10.0
MAX_RESTART_DELAY = 300.0
#: what a host crash left: faulthandler's Python stacks, and per crashed process its core's bt
HostStacks = tuple[list[PythonStack], list[NativeStack]]

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
        launch.check_health_url(options.health_url)
        self.run_dir = rundir.create(Path(options.runs_dir))
        this_process = psutil.Process()
        now = timestamps.now()
        self.store = ManifestStore(self.run_dir, Manifest(
            status="running", created_at=now, updated_at=now,
            crashlab=Crashlab(version=__version__, pid=this_process.pid, host=socket.gethostname(),
                              process_started=this_process.create_time()),
            command=self.redactor.argv(options.command), cwd=str(self.cwd),
            sglang=launch.is_sglang(options.command), options=options.as_manifest(),
            role=disaggregation_role(options.command) if launch.is_sglang(options.command) else None,
            environment={}), self.redactor)
        self.context = RunContext(run_dir=self.run_dir, cwd=self.cwd, base_env=self.base_env,
                                  options=options, store=self.store, redactor=self.redactor,
                                  notify=self.notify)
        self.incidents: list[Incident] = []
        self.hang = HangWatch(self.run_dir, options, self.store, self.notify)
        #: why a host crash of the server leaves no core (its hard limit 0), decided as doctor does
        self.core_limit_problem = hostcore.limit_problem(hostcore.hard_limit())

    # -- called from a signal handler: flags only, the loop acts on them ---------------------
    def request_stop(self, signum: int) -> None:
        self._stops.append(signum)

    @property
    def stopping(self) -> bool:
        return bool(self._stops)

    def run(self) -> RunOutcome:
        previous = subreaper(True)
        try:
            write_environment(self.run_dir, self.options.command, self.base_env, self.redactor,
                              self.store, self.notify)
            number, restarts = 1, 0
            while True:
                kind = self._incarnation(number)
                if kind != "crash" or self.options.restart == "never" or self.stopping:
                    break
                refused = self._refusal(restarts)
                if refused is not None:
                    self.notify(refused)
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

    def _refusal(self, restarts: int) -> str | None:
        """Why the crashed server is not restarted, in one line; None where it is: the advice
        drains its GPU (unless --restart always), or says stop (a crash loop, a fatal crash)."""
        if restarts >= self.options.max_restarts:
            return f"not restarting: --max-restarts {self.options.max_restarts} reached"
        advice = self.incidents[-1].advice if self.incidents else None
        if advice is None or advice.action in ("restart", "workaround"):
            return None
        if advice.action == "stop":
            return f"not restarting: {advice.reason}"
        if self.options.restart == "always":
            self.notify(f"restarting onto {advice.gpu}, which the advice drains (--restart "
                        f"always): {advice.reason}")
            return None
        return (f"not restarting onto {advice.gpu}, which the advice drains: {advice.reason} "
                "(--restart always would restart)")

    # -- one incarnation ----------------------------------------------------------------
    def _incarnation(self, number: int) -> str | None:
        incarnation = LiveIncarnation(self.context, number)
        with self.store.edit() as manifest:
            manifest.incarnations.append(incarnation.record)
            manifest.environment = {setting.name: EnvironmentEntry(**setting.as_manifest())
                                    for setting in incarnation.settings}
        files.write_json(incarnation.dirs.launch, {
            "argv": self.redactor.argv(incarnation.plan.argv), "cwd": str(self.cwd),
            "sglang": incarnation.plan.sglang,
            "environment": self.redactor.environment(incarnation.env)})
        self.store.add_files([collect.record(self.run_dir, incarnation.dirs.launch, "launch")])
        self._status("running")

        if self.core_limit_problem is not None:
            self.notify(f"no host core: {self.core_limit_problem}")
            with self.store.edit():
                incarnation.record.warnings.append(f"no host core: {self.core_limit_problem}")
        process = launch.start(incarnation.plan.argv, incarnation.env, self.cwd)
        tees = [StreamTee(pipe, incarnation.dirs.log(stream),
                          getattr(sys, stream).buffer if self.options.echo else None,
                          StreamScanner(stream, incarnation.on_finding, redact=self.redactor.text),
                          self.redactor.text)
                for stream, pipe in (("stdout", process.stdout), ("stderr", process.stderr))
                if pipe is not None]  # always: launch.start() opens both
        for tee in tees:
            tee.start()
        tree = ProcessTree(process, self.redactor)
        kernel_log = KernelLog(StreamScanner("kmsg", incarnation.on_finding, kinds=frozenset({XID}),
                                             redact=self.redactor.text), self.options.kernel_log)
        with self.store.edit():
            incarnation.record.pid = process.pid
            incarnation.record.status = "running"
            incarnation.record.processes = tree.records()
            if kernel_log.unavailable:
                incarnation.record.kernel_log = kernel_log.unavailable
        collector = collect.DumpCollector(self.run_dir, incarnation.dirs.cores,
                                          incarnation.dump_sources(), tree.alive, incarnation.driver,
                                          since=time.time())
        watch = TreeWatch(incarnation, tree, collector, self.store, self.notify)
        shutdown = Shutdown(watch, self.options, self._stops, self._status)
        health = None
        if incarnation.record.health.url:
            health = HealthWatch(incarnation.record.health.url, self.options.health_interval,
                                 self.options.health_timeout, incarnation.on_health,
                                 incarnation.save_server_info)
            health.start()
        self.notify(f"incarnation {number}: pid {process.pid}, logs in {incarnation.dirs.path}")

        try:
            self._watch(watch, shutdown, kernel_log, health)
        finally:
            if health is not None:
                health.stop()
                with self.store.edit():
                    incarnation.record.health.checks = health.checks
                    incarnation.record.health.failures = health.failures
            if tree.alive():  # an exception above: never leave the server behind
                shutdown.signal_tree(signal.SIGKILL)
        return self._wrap_up(watch, kernel_log, tees)

    def _watch(self, watch: TreeWatch, shutdown: Shutdown, kernel_log: KernelLog,
               health: HealthWatch | None) -> None:
        """The loop, until a stop request or the end of the server's main process."""
        next_tree = next_save = 0.0
        while True:
            now = time.monotonic()
            if now >= next_tree:
                watch.poll_tree()
                next_tree = now + TREE_EVERY
            if now >= next_save:
                self._survived(watch.incarnation)
                self.hang.poll(health)
                self.hang.link()
                self.store.save_if_dirty(timestamps.now())
                next_save = now + SAVE_EVERY
            watch.poll_dumps()
            kernel_log.poll()
            if self.stopping:
                shutdown.on_request(self._stops[0])
                return
            if watch.tree.root.poll() is not None:
                watch.incarnation.root_ended_on_its_own = True
                watch.poll_tree()
                shutdown.after_root()
                return
            time.sleep(TICK)

    def _wrap_up(self, watch: TreeWatch, kernel_log: KernelLog, tees: list[StreamTee]) -> str | None:
        """Drain the pipes, collect the last dumps and request dumps, then triage."""
        incarnation, tree = watch.incarnation, watch.tree
        for tee in tees:
            if not tee.join(PIPE_DRAIN_WAIT):
                with self.store.edit():
                    incarnation.record.warnings.append(
                        f"{tee.log_path.name}: still open {PIPE_DRAIN_WAIT:g} s after the server "
                        "ended (a process outside the tree holds it); the log may be cut")
        kernel_log.close()
        watch.poll_tree()
        files.remove_fifos(incarnation.dirs.path)
        watch.add_dumps(watch.collector.collect_remaining())
        request_dumps = self._collect_request_dumps(incarnation)
        logs = [collect.record(self.run_dir, tee.log_path, "log") for tee in tees]
        flight_recorder = [collect.record(self.run_dir, path, "flight-recorder")
                           for path in sorted(incarnation.dirs.flight_recorder.iterdir())
                           if path.is_file()]
        kept, incarnation.sglang_records = sglang_records.collect_and_read(
            self.run_dir, incarnation.dirs, incarnation.env, self.cwd,
            datetime.fromisoformat(incarnation.record.started_at).timestamp(), request_dumps,
            socket.gethostname(), self.redactor.text)
        self.store.add_files(request_dumps + logs + flight_recorder + kept)
        self._survived(incarnation, closed=True)
        self.store.save(timestamps.now())  # a capture in flight waits for its dumps in it
        self.hang.finish()
        problems = [problem for tee in tees for problem in tee.problems]
        with self.store.edit():
            incarnation.record.processes = tree.records()
            incarnation.record.exit = tree.root_record.exit if tree.root_record else None
            incarnation.record.ended_at = timestamps.now()
            incarnation.record.warnings += problems
        dumps = [f for f in self.store.manifest.files
                 if f.kind == "coredump" and f.path.startswith(incarnation.record.directory + "/")]
        return self._triage(incarnation, dumps, request_dumps, self._host_stacks(incarnation, tees))

    def _host_stacks(self, incarnation: LiveIncarnation, tees: list[StreamTee]) -> HostStacks:
        started = datetime.fromisoformat(incarnation.record.started_at).timestamp()
        native = hostcrash.native_stacks(incarnation.record.processes, self.core_limit_problem,
                                         self.cwd, started, incarnation.dirs.cores, self.run_dir)
        cores = [self.run_dir / stack.core for stack in native if stack.core]
        if cores:
            self.store.add_files([collect.record(self.run_dir, core, "host-core") for core in cores])
        return hostcrash.python_stacks([tee.log_path for tee in tees]), native

    def _collect_request_dumps(self, incarnation: LiveIncarnation) -> list[FileRecord]:
        elsewhere = list(incarnation.mentioned_request_dumps)
        plan = incarnation.plan
        if plan.crash_dump_folder is not None and not plan.crash_dump_folder_is_ours:
            elsewhere += collect.request_dumps_in(plan.crash_dump_folder)
        started = datetime.fromisoformat(incarnation.record.started_at).timestamp()
        return collect.collect_request_dumps(self.run_dir, incarnation.dirs.requests, elsewhere,
                                             started, socket.gethostname())

    def _triage(self, incarnation: LiveIncarnation, dumps: list[FileRecord],
                request_dumps: list[FileRecord], host_stacks: HostStacks) -> str | None:
        triaged = []
        if dumps:
            self._status("triaging")
            self.notify(f"triaging {counted(len(dumps), 'coredump')}")
            triaged = incident.triage_dumps(self.run_dir, dumps, self.options.debugger)
        record = incarnation.record
        kind = incident.kind_of(record, triaged, request_dumps, incarnation.root_ended_on_its_own)
        with self.store.edit():
            record.incident = kind
            record.status = ("crashed" if kind == "crash" else
                             "stopped" if record.stopped_by_crashlab else "exited")
            crash_view = survived.without(record, survived.consumed(record.findings,
                                                                    incarnation.survived))
        if kind is not None:
            self.incidents.append(incident.build(self.run_dir, crash_view, kind, triaged,
                                                 request_dumps, self.options.debugger,
                                                 self.redactor.text))
            self.incidents[-1].python_stacks, self.incidents[-1].native_stacks = host_stacks
            self.incidents[-1].sglang = incarnation.sglang_records
            runreport.write(self.run_dir, self.store, self.redactor, self.incidents)
        self.store.save(timestamps.now())
        if kind is not None:
            self._announce(self.incidents[-1])
        return kind

    def _survived(self, incarnation: LiveIncarnation, closed: bool = False) -> None:
        """Each fault the server lived through whose traceback is in becomes an incident,
        written into the run's reports and the crash index at once (the server may run on for
        days)."""
        with self.store.edit():
            chains = survived.settled(incarnation.record.findings, incarnation.survived,
                                      datetime.now(timezone.utc), closed)
        if not chains:
            return
        built = [survived.incident(incarnation.record, found) for found in chains]
        incarnation.survived.update(survived.key(found[0]) for found in chains)
        self.incidents += built
        runreport.write(self.run_dir, self.store, self.redactor, self.incidents)
        self.store.save(timestamps.now())
        self._record()
        for one in built:
            for line in run_views.incident_lines(one):
                self.notify(line)

    def _announce(self, latest: Incident) -> None:
        """Record the crash in the index and print its lines now, not when the supervisor
        stops: a server restarted for days must not leave ``crashlab list`` blind. The advice
        weighs what the index knows, so it follows the recording."""
        self._record()
        latest.advice = self._advice(latest)
        runreport.write(self.run_dir, self.store, self.redactor, self.incidents)
        self.store.save(timestamps.now())
        for line in run_views.incident_lines(latest):
            self.notify(line)

    def _advice(self, latest: Incident) -> Advice:
        """What to do next: the incident's Xid lines and known fix, the index's history of its
        signature and GPU, and (when serve restarts) how often it restarted lately."""
        from ..advice.decide import RecentRestarts, advise
        from ..advice.evidence import of_incident
        from ..index.history import of_run

        evidence = of_incident(latest)
        if self.options.restart != "never":
            limit, minutes = self.options.crash_loop
            since = time.time() - minutes * 60
            restarts = sum(datetime.fromisoformat(record.started_at).timestamp() >= since
                           for record in self.store.manifest.incarnations[1:])
            evidence = replace(evidence, recent=RecentRestarts(restarts, limit, minutes))
        history = of_run(self.options.db, Path(self.options.runs_dir), self.run_dir,
                         latest.incarnation)
        if history is not None:
            evidence = replace(evidence, earlier=history.earlier, gpu=history.gpu)
        return advise(evidence)

    def _finish(self) -> RunOutcome:
        outcome = runreport.outcome(self.run_dir, self.store.manifest, self.incidents)
        self._conclude(outcome)
        report = runreport.build(self.run_dir, self.store.manifest, self.incidents) \
            if self.incidents else None
        return RunOutcome(self.run_dir, outcome.exit_code, outcome.result, report)

    def _record(self) -> None:
        """The run's crashes into the crash index, as report.json says them (secrets masked), and
        the hangs its captures show, each with a line naming its crash id and the index (what ``crashlab show ID`` takes);
        one warning line if the index cannot be written, never a failure of the run."""
        from ..index import capture
        from ..index.recording import record_all

        record_all(lambda: [*capture.from_run_dir(self.run_dir, "serve"),
                            *capture.from_run_captures(self.run_dir, "serve")],
                   self.options.db, Path(self.options.runs_dir), self.notify,
                   announce=lambda said: self.notify(f"the crash is {said}"))

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
    counts every child process started meanwhile as part of the server's tree. In the main
    thread, Ctrl-C, SIGTERM and SIGHUP stop the server meanwhile (waiting for dumps in flight);
    the caller's handlers are back when it returns.
    """
    return supervised(Supervisor(options, notify))


def supervised(supervisor: Supervisor) -> RunOutcome:
    """SUPERVISOR run with Ctrl-C, SIGTERM and a closing terminal (unless nohup) forwarded to the
    server's whole process group, as they would have reached it without crashlab in between;
    for a caller that says the run directory before the run starts (crashlab serve)."""
    with forwarded_stops(supervisor.request_stop):
        return supervisor.run()
