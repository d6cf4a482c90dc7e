"""``crashlab serve``'s flow (supervise the server, say where its run directory is and what came
of the run) and ``crashlab dump-now``'s; each gives the command's exit code back."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import EXIT_FOUND, EXIT_NOTHING, BadInput, EnvironmentProblem
from ..notation import counted
from ..report.run_views import report_line
from ..textsize import with_bytes
from . import environment
from .dumpnow import live_run
from .hangcapture import CaptureOptions, take
from .hangcapture.run import GPU_DUMP_ENDS_PROCESS, gpu_pipes, summary
from .manifest import MANIFEST, Manifest, load
from .options import Notify, ServeOptions
from .supervisor import Supervisor, supervised


def run(options: ServeOptions, say: Notify) -> int:
    """Supervise the server until it ends (serve() with the run directory and the outcome
    said): the exit code of ``crashlab serve``."""
    supervisor = Supervisor(options, say)
    say(f"run directory: {supervisor.run_dir}")
    outcome = supervised(supervisor)
    if outcome.report is not None:  # each incident's lines were printed when it was triaged
        say(report_line(outcome.report))
    else:
        say(f"{outcome.result}: nothing to triage (manifest: {outcome.run_dir}/manifest.json)")
    return outcome.exit_code


def dump_now_said(runs: list[Path], deployment: str | None, runs_dir: Path,
                  options: CaptureOptions, say: Notify) -> int:
    """``crashlab dump-now``: check every run first, say what a GPU dump does to a process
    before any capture starts, capture them all at once, then say what each capture holds and the command
    that reads each GPU dump; the command's exit code back."""
    if bool(runs) == bool(deployment):
        raise BadInput("give the run directories, or --deployment LABEL, not both or neither")
    runs = runs or deployment_runs(runs_dir, deployment or "")
    records = {run: ready(run, options) for run in runs}
    if options.gpu_dump:
        say(GPU_DUMP_ENDS_PROCESS)
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        results = list(pool.map(lambda run: take(run, "dump-now", options, say, records[run]), runs))
    found = []
    for run, result in zip(runs, results, strict=True):
        say(f"capture: {result.folder} ({counted(len(result.capture.ranks), 'rank')}, "
            f"{counted(options.samples, 'sample')})")
        for line in summary(result):
            say(line)
        collected = result.gpu.collected if result.gpu else []
        for record in collected:
            say(f"collected {run / record.path} ({with_bytes(record.size_bytes)}); "
                f"crashlab inspect {run / record.path}")
        if options.gpu_dump and not collected:
            say(f"no dump was collected within {options.dump_timeout:g} s")
        found.append(bool(collected) if options.gpu_dump else
                     any(row.status == "ok" for row in result.capture.sources))
    return EXIT_FOUND if all(found) else EXIT_NOTHING


def ready(run: Path, options: CaptureOptions) -> Manifest:
    """RUN's manifest once it is known to be capturable as asked: live, and with a pipe to dump
    through unless --no-gpu-dump."""
    record = live_run(run)
    if options.gpu_dump:
        try:
            pipes = gpu_pipes(run, record)
        except BadInput as exc:
            raise BadInput(f"{exc}; --no-gpu-dump takes host samples only") from None
        if not pipes:
            pipe = record.environment[environment.PIPE].value
            raise EnvironmentProblem(f"no live coredump pipe matches {pipe}: the server has not "
                                     "initialised CUDA yet, or has ended (--no-gpu-dump takes "
                                     "host samples only)")
    return record


def deployment_runs(runs_dir: Path, label: str) -> list[Path]:
    """The live runs of deployment LABEL in RUNS_DIR."""
    found = []
    for path in sorted(Path(runs_dir).glob(f"*/{MANIFEST}")):
        try:
            record = load(path.parent)
        except BadInput:
            continue
        if record.options.get("deployment") == label and record.status != "done":
            found.append(path.parent)
    if not found:
        raise EnvironmentProblem(f"no live run of deployment {label!r} in {runs_dir}")
    return found
