"""The crashes a report holds, as the index records them: one per GPU dump (each rank's, FAULT or
COLLATERAL), or one per incident that left no dump (a Python exception, a killed process), each
with its signature, host, GPUs, driver and versions, its first failure and its server's part in
a deployment (what crashlab.incidents groups by); and the driver Xid lines a run read.

A dump's signature is computed from its own triage (crashlab.signature); an unreadable dump's
and a dumpless incident's from the incident, so that each restart of a run gets its own.
"""

from __future__ import annotations

import json
import socket
from datetime import datetime
from pathlib import Path

from ..env import Environment, load
from ..errors import CrashlabError
from ..incidents import XidLine
from ..incidents.xid import from_findings
from ..published import parse
from ..report.model import TriageReport
from ..report.run import Deployment, Incident, ProcessRecord, RunReport, dump_pid
from ..signature import compute
from . import fleet_facts
from .records import CrashFile, NewCrash


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _facts(environment: Environment | None) -> dict:
    """Host, GPUs, driver and versions from the environment a run captured at launch."""
    if environment is None:
        return {}
    versions = {p.name: p.version for p in environment.packages if p.version}
    if environment.torch is not None and environment.torch.version:
        versions.setdefault("torch", environment.torch.version)
    gpus = sorted({g.name for g in environment.gpus if g.name})
    return {"host": environment.host_name, "gpus": ", ".join(gpus) or None,
            "driver": environment.driver.version, "versions": versions,
            "sglang": versions.get("sglang"), "torch": versions.get("torch")}


def _saved_environment(run_dir: Path) -> Environment | None:
    try:
        return load(run_dir)
    except CrashlabError:  # a damaged environment.json costs the versions, not the record
        return None


def _process_facts(process: ProcessRecord | None) -> dict:
    if process is None:
        return {}
    return {"pid": process.pid, "role": process.role, "rank": process.ranks}


def from_run(run_dir: Path, report: RunReport, recorded_by: str) -> list[NewCrash | XidLine]:
    """Every crash of a serve run directory (its report.json, parsed), with the first failure
    and the server's part that grouping into incidents needs, and the driver Xid lines the run
    read from the kernel log."""
    run_dir = Path(run_dir).absolute()
    environment = _saved_environment(run_dir)
    facts = _facts(environment)
    launched = fleet_facts.of_launch(report.command)
    facts["host"] = facts.get("host") or (report.deployment.host if report.deployment
                                          else socket.gethostname())
    crashes: list[NewCrash | XidLine] = []
    for incident in report.incidents:
        key = f"{facts['host']}:{run_dir}#{incident.incarnation}"
        first = _first_failure(incident)
        shared = dict(facts, recorded_by=recorded_by, source=str(run_dir), run_dir=str(run_dir),
                      incarnation=incident.incarnation, **_deployment_facts(report.deployment))
        # a run directory is serve's: crashlab made every file in it, and gc may delete them
        extras = [CrashFile(path=str(run_dir / r.path), kind=r.kind, size_bytes=r.size_bytes,
                            owned=True)
                  for r in incident.request_dumps] + _evidence(run_dir, incident)
        if not incident.dumps:
            crashed = min(_failures(incident), key=lambda failure: failure[0], default=None)
            crashes.append(NewCrash(key=key, signature=compute(incident),
                                    crashed_at=_epoch(incident.ended_at), first_failure_at=first,
                                    summary=incident.summary, files=extras,
                                    facts=fleet_facts.merged(
                                        fleet_facts.of_environment(environment, None), launched,
                                        fleet_facts.of_incident(incident, first)),
                                    **_process_facts(crashed[1] if crashed else None), **shared))
        for number, dump in enumerate(incident.dumps):
            process = dump.writer(incident.processes)
            signature = compute(dump.report if dump.report is not None else incident)
            files = [CrashFile(path=str(run_dir / dump.path), kind="coredump",
                               size_bytes=dump.size_bytes, owned=True)] + (extras if number == 0 else [])
            written = _epoch(dump.written_at)
            failed = min(first, written) if dump.label == "FAULT" else written
            triaged = fleet_facts.of_triage(dump.report) if dump.report is not None else {}
            crashes.append(NewCrash(
                key=f"{key}:{dump.path}", signature=signature, crashed_at=written,
                first_failure_at=failed, summary=dump.summary, label=dump.label, files=files,
                facts=fleet_facts.merged(
                    fleet_facts.of_environment(environment, triaged.get("gpu_index"),
                                               _visible_devices(run_dir, incident)), launched,
                    fleet_facts.of_incident(incident, failed), triaged),
                **_process_facts(process), **shared))
        crashes += from_findings(incident.findings, facts["host"], str(run_dir))
    return crashes


def _visible_devices(run_dir: Path, incident: Incident) -> str | None:
    """CUDA_VISIBLE_DEVICES as the incarnation was launched with it (its launch.json); None
    where unset or unreadable."""
    try:
        launch = json.loads((run_dir / incident.directory / "launch.json").read_text("utf-8"))
        return launch["environment"].get("CUDA_VISIBLE_DEVICES")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _evidence(run_dir: Path, incident) -> list[CrashFile]:
    """The server's logs of the incident and the run's report.md, listed with the crash so that
    its page links them (a Python crash has no coredump to open instead); gc never deletes
    them (not owned), it only forgets them."""
    paths = [(run_dir / incident.directory / name, "log") for name in ("stderr.log", "stdout.log")]
    paths.append((run_dir / "report.md", "report"))
    return [CrashFile(path=str(path), kind=kind, size_bytes=path.stat().st_size)
            for path, kind in paths if path.is_file()]


def _first_failure(incident: Incident) -> float:
    """When the incarnation first failed: the earliest of its fault lines and the abnormal ends
    of its processes. A FAULT dump takes this time: it is finished long after the fault (a
    multi-gigabyte dump takes minutes to write); a COLLATERAL dump keeps the time it was
    finished."""
    seen = [_epoch(f.time) for f in incident.findings]
    seen += [ended for ended, _ in _failures(incident)]
    return min(seen, default=_epoch(incident.ended_at))


def _failures(incident: Incident) -> list[tuple[float, ProcessRecord]]:
    """(when it ended, the process) for each of the server's processes that ended abnormally."""
    return [(_epoch(p.ended_at), p) for p in incident.processes
            if p.ended_at and p.exit is not None and not p.exit.clean]


def _deployment_facts(deployment: Deployment | None) -> dict:
    """The --deployment label and the server's part in it, from a report of a crashlab that
    knew them."""
    if deployment is None:
        return {}
    return {"deployment": deployment.label, "server_role": deployment.role}


def from_run_dir(run_dir: Path, recorded_by: str) -> list[NewCrash | XidLine]:
    """The crashes of a run directory whose report.json serve wrote; none without one."""
    path = Path(run_dir) / "report.json"
    if not path.is_file():
        return []
    return from_run(run_dir, parse(RunReport, path.read_bytes()), recorded_by)


def from_coredump(path: Path, report: TriageReport, recorded_by: str,
                  copy: Path | None = None) -> NewCrash:
    """A coredump read on its own (crashlab inspect --record, crashlab report CORE): known by its
    contents' place and size, with what the dump itself says of its GPUs and driver. The file is
    the user's, recorded by reference (gc never deletes it); with COPY (inspect --record --copy)
    the crash's file is that copy, which the index took and owns."""
    path = Path(path).absolute()
    kept = copy.absolute() if copy is not None else path
    stat = path.stat()
    gpus = sorted({d.name for d in report.devices if d.name})
    return NewCrash(
        key=f"{socket.gethostname()}:{path}:{stat.st_size}:{stat.st_mtime_ns}",
        signature=compute(report), crashed_at=stat.st_mtime, recorded_by=recorded_by,
        source=str(kept), summary=report.summary, host=socket.gethostname(),
        gpus=", ".join(gpus) or None, driver=report.dump.driver_version,
        pid=dump_pid(path.name), facts=fleet_facts.merged(fleet_facts.of_triage(report)),
        files=[CrashFile(path=str(kept), kind="coredump", size_bytes=stat.st_size,
                         owned=copy is not None)])


def from_report_inputs(inputs) -> list[NewCrash | XidLine]:
    """What ``crashlab report`` read (crashlab.issue.inputs.Inputs): its runs and its coredumps."""
    crashes = [crash for run in inputs.runs if run.report is not None
               for crash in from_run(run.path, run.report, "report")]
    return crashes + [from_coredump(core.path, core.report, "report")
                      for core in inputs.cores if core.report is not None]
