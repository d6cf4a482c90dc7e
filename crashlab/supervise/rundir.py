"""The run directory: one per ``crashlab serve``, one sub-folder per incarnation of the server.

    <runs-dir>/<time>-<host>-<pid>/
      manifest.json  report.json  report.md
      environment.json          the machine at launch (crashlab env --json for the server's
                                interpreter), secrets masked
      incarnation-1/
        launch.json             the command and environment, as run, secrets masked
        stdout.log  stderr.log  the server's output, byte for byte
        server_info.json        SGLang's /server_info once healthy, secrets masked
        maps-start.txt          /proc/PID/maps of the server's processes once healthy, and
        maps-crash.txt          while the first coredump is written (crashlab.supervise.procmaps)
        cores/                  finished GPU coredumps; cores/incoming/ is where the driver writes
        requests/               SGLang's --crash-dump-folder (<host>/crash_dump_*.pkl)
        pipes/                  the driver's user-trigger pipes and PyTorch's Flight Recorder
                                pipes (crashlab dump-now)
        flight-recorder/        PyTorch's Flight Recorder dumps, rank-<R> (on a watchdog timeout)
      incarnation-2/ ...        after a restart
      captures/<time>/          hang captures (crashlab.hangs.layout): dump-now, serve --hang-after
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInput, EnvironmentProblem


@dataclass(frozen=True)
class IncarnationDir:
    number: int
    path: Path

    @property
    def cores(self) -> Path:
        return self.path / "cores"

    @property
    def incoming(self) -> Path:
        return self.cores / "incoming"

    @property
    def requests(self) -> Path:
        return self.path / "requests"

    @property
    def pipes(self) -> Path:
        return self.path / "pipes"

    @property
    def flight_recorder(self) -> Path:
        return self.path / "flight-recorder"

    @property
    def launch(self) -> Path:
        return self.path / "launch.json"

    @property
    def server_info(self) -> Path:
        return self.path / "server_info.json"

    def log(self, stream: str) -> Path:
        return self.path / f"{stream}.log"

    def create(self) -> IncarnationDir:
        for folder in (self.incoming, self.requests, self.pipes, self.flight_recorder):
            folder.mkdir(parents=True, exist_ok=True)
        return self


def incarnation(run_dir: Path, number: int) -> IncarnationDir:
    return IncarnationDir(number, run_dir / f"incarnation-{number}")


def create(runs_dir: Path) -> Path:
    """A new, empty run directory under runs_dir (created if needed)."""
    if runs_dir.exists() and not runs_dir.is_dir():
        raise BadInput(f"--runs-dir {runs_dir}: exists and is not a directory")
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{socket.gethostname()}-{os.getpid()}"
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        run_dir, number = runs_dir / name, 1
        while True:  # the same second and pid: a second run from one Python process
            try:
                run_dir.mkdir()
                break
            except FileExistsError:
                number += 1
                run_dir = runs_dir / f"{name}-{number}"
    except OSError as exc:
        raise EnvironmentProblem(f"cannot create a run directory in {runs_dir}: {exc.strerror}") from None
    return run_dir.resolve()
