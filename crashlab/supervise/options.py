"""What a caller asks of ``crashlab serve``, how it is told what happens, and what it gets back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..incidents.window import DEFAULT_WINDOW
from ..index.location import shown
from ..report.run import RunReport
from .environment import CoredumpMode
from .kernellog import KMSG

#: receives each line crashlab has to say while it supervises
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
    restart: str = "never"  # "on-crash" follows the crash's advice; "always" restarts onto a drained GPU too
    max_restarts: int = 3
    #: a crash after this many restarts within this many minutes is a crash loop: no restart
    crash_loop: tuple[int, float] = (3, 10.0)
    restart_delay: float = 5.0
    echo: bool = True
    kernel_log: str = KMSG
    #: add cuda-gdb's view to each dump's report where cuda-gdb exists
    debugger: bool = True
    #: the deployment this server belongs to (a prefill and a decode server of one
    #: PD-disaggregated SGLang share one), for grouping crashes into incidents
    deployment: str | None = None
    #: seconds after an incident's first failure in which another server's crash joins it
    incident_window: float = DEFAULT_WINDOW
    #: the crash index to record the run's crashes in (crashlab.index.location.resolve)
    db: str | None = None
    #: seconds of /health silence (after a first answer) before serve captures the hang;
    #: None: never (crashlab.supervise.hangwatch)
    hang_after: float | None = None
    hang_samples: int = 3
    hang_interval: float = 5.0
    #: end the hang capture with one GPU dump of every process (which ends them)
    hang_gpu_dump: bool = True
    #: attach cuda-gdb to every rank in every sample of the hang capture (stops it while read)
    hang_attach: bool = False

    @classmethod
    def from_command_line(cls, *, command, runs_dir, coredump, user_dumps, health_url,
                          health_interval, health_timeout, dump_timeout, grace, restart,
                          max_restarts, crash_loop, restart_delay, quiet, no_debugger, deployment,
                          incident_window, db, hang_after, hang_samples, hang_interval,
                          no_gpu_dump, attach) -> ServeOptions:
        """The options as click parsed them (names as in crashlab/cli/serve.py): the launch
        command as a list, the coredump mode as its enum, the negated switches turned round."""
        return cls(command=list(command), runs_dir=runs_dir, coredump=CoredumpMode(coredump),
                   user_dumps=user_dumps, health_url=health_url, health_interval=health_interval,
                   health_timeout=health_timeout, dump_timeout=dump_timeout, grace=grace,
                   restart=restart, max_restarts=max_restarts, crash_loop=crash_loop,
                   restart_delay=restart_delay,
                   echo=not quiet, debugger=not no_debugger, db=db, deployment=deployment,
                   incident_window=incident_window, hang_after=hang_after,
                   hang_samples=hang_samples, hang_interval=hang_interval,
                   hang_gpu_dump=not no_gpu_dump, hang_attach=attach)

    def as_manifest(self) -> dict:
        values = asdict(self)
        values.pop("command")
        values["runs_dir"] = str(self.runs_dir)
        values["coredump"] = self.coredump.value
        values["db"] = shown(self.db) if self.db else None
        return values


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int  # 0: a crash (or dumps) caught and triaged; 1: clean exit or plain stop
    result: str
    report: RunReport | None
