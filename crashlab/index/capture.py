"""The crashes a report holds, as the index records them: one per GPU dump (each rank's, FAULT or
COLLATERAL), or one per incident that left no dump (a Python exception, a killed process), each
with its signature, host, GPUs, driver and versions, its first failure and its server's part in
a deployment (what crashlab.incidents groups by); and the driver Xid lines a run read.

A dump's signature is computed from its own triage (crashlab.signature); an unreadable dump's
and a dumpless incident's from the incident, so that each restart of a run gets its own.

What is recorded is the crash's, never the reading machine's: a dump's time is the one its driver
wrote in it, its host that of the serve run it lies in or the one the user names, else unknown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..env import Environment, load
from ..errors import BadInput, CrashlabError
from ..hangs.model import HangReading
from ..incidents import XidLine
from ..incidents.xid import from_findings
from ..launchline import RecordedLaunch
from ..published import parse
from ..report.kernellog import XidTriage
from ..report.model import TriageReport
from ..report.run import Deployment, Incident, ProcessRecord, RunReport, dump_pid
from ..signature import compute
from . import fleet_facts
from .copies import sha256_of
from .records import CrashFile, NewCrash

#: The word for a host nobody recorded, in messages and keys (the index holds NULL).
UNKNOWN_HOST = "unknown"
#: How many folders up from a dump its run directory may be (<run>/incarnation-N/cores/DUMP,
#: or cores/incoming/ while it is written).
_RUN_DEPTH = 4


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
                                          else _manifest(run_dir).get("host"))
    crashes: list[NewCrash | XidLine] = []
    for incident in report.incidents:
        key = f"{facts['host'] or UNKNOWN_HOST}:{run_dir}#{incident.incarnation}"
        first = _first_failure(incident)
        shared = dict(facts, recorded_by=recorded_by, source=str(run_dir), run_dir=str(run_dir),
                      incarnation=incident.incarnation, **_deployment_facts(report.deployment))
        # a run directory is serve's: crashlab made every file in it, and gc may delete them
        extras = [CrashFile(path=str(run_dir / r.path), kind=r.kind, size_bytes=r.size_bytes,
                            owned=True)
                  for r in incident.request_dumps] + _evidence(run_dir, incident)
        if incident.kind == "survived":  # one crash per fault, beside the incarnation's own
            line = incident.findings[0]
            key = f"{key}:survived:{line.stream}:{line.line}"
        if not incident.dumps:
            crashed = min(_failures(incident), key=lambda failure: failure[0], default=None)
            crashes.append(NewCrash(key=key, signature=compute(incident),
                                    label="SURVIVED" if incident.kind == "survived" else None,
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
                dump_sha256=dump.sha256, triage=dump.report,
                facts=fleet_facts.merged(
                    fleet_facts.of_environment(environment, triaged.get("gpu_index"),
                                               _visible_devices(run_dir, incident)), launched,
                    fleet_facts.of_incident(incident, failed), triaged),
                **_process_facts(process), **shared))
        crashes += from_findings(incident.findings, facts["host"] or UNKNOWN_HOST, str(run_dir))
    return crashes


def _manifest(run_dir: Path) -> dict:
    """The host serve ran on and its --deployment label, from the run's manifest.json (read as
    plain JSON: the manifest's model is serve's, above the index); empty where unreadable."""
    try:
        manifest = json.loads((Path(run_dir) / "manifest.json").read_text("utf-8"))
        host, options = manifest["crashlab"]["host"], manifest.get("options") or {}
        label = options.get("deployment") if isinstance(options, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {"host": host if isinstance(host, str) and host else None,
            "deployment": label if isinstance(label, str) and label else None}


def _visible_devices(run_dir: Path, incident: Incident) -> str | None:
    """CUDA_VISIBLE_DEVICES as the incarnation was launched with it (its launch.json); None
    where unset or unreadable."""
    launch = RecordedLaunch.read(run_dir / incident.directory / "launch.json")
    return launch.environment.get("CUDA_VISIBLE_DEVICES")


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


@dataclass(frozen=True)
class Origin:
    """Where a dump read on its own came from: the serve run directory it lies in (if any), the
    host it crashed on and its deployment label, each None where nobody recorded it."""

    run_dir: Path | None = None
    host: str | None = None
    deployment: str | None = None


def run_of(path: Path) -> Path | None:
    """The serve run directory a dump lies in (one holding manifest.json, a few folders up:
    <run>/incarnation-N/cores/DUMP); None for a dump elsewhere."""
    for folder in Path(path).absolute().parents[:_RUN_DEPTH]:
        if (folder / "manifest.json").is_file():
            return folder
    return None


def _run_origin(run_dir: Path) -> Origin:
    """The host and label a run recorded: the host from its environment.json, else its
    report.json, else its manifest.json; the label from its report, else its manifest."""
    environment = _saved_environment(run_dir)
    manifest = _manifest(run_dir)
    deployment = None
    try:
        deployment = parse(RunReport, (run_dir / "report.json").read_bytes()).deployment
    except (OSError, ValueError):  # no report yet (a run still crashing), or a damaged one
        deployment = None
    host = (environment.host_name if environment is not None else None) or \
        (deployment.host if deployment is not None else None) or manifest.get("host")
    label = (deployment.label if deployment is not None else None) or manifest.get("deployment")
    return Origin(run_dir=run_dir, host=host, deployment=label)


def origin(path: Path, host: str | None = None, deployment: str | None = None) -> Origin:
    """Where the dump at PATH came from: its run's record where it lies in one, the user's
    HOST and DEPLOYMENT (inspect --record --host/--deployment) otherwise, never the machine
    reading it. A user's word that contradicts the run's is bad input: one of them is wrong."""
    run_dir = run_of(path)
    if run_dir is None:
        return Origin(host=host, deployment=deployment)
    found = _run_origin(run_dir)
    for option, given, recorded in (("--host", host, found.host),
                                    ("--deployment", deployment, found.deployment)):
        if given is not None and recorded is not None and given != recorded:
            raise BadInput(f"{option} {given}: the dump lies in the serve run {run_dir}, which "
                           f"recorded {recorded}; leave {option} out")
    return Origin(run_dir=run_dir, host=found.host or host,
                  deployment=found.deployment or deployment)


def crash_time(path: Path, report: TriageReport) -> float:
    """When the dump was written: the timestamp its driver wrote in .cudbg.meta (seconds since
    the epoch, UTC); for a dump without one (a driver before r565), the file's modification
    time, which a copy or a clone does not keep (inspect --record says so)."""
    stamp = report.dump.timestamp
    return float(stamp) if stamp else Path(path).stat().st_mtime


def from_coredump(path: Path, report: TriageReport, recorded_by: str,
                  copy: Path | None = None, digest: str | None = None,
                  where: Origin | None = None) -> NewCrash:
    """A coredump read on its own (crashlab inspect --record, crashlab report CORE): known by its
    contents (DIGEST, their SHA-256, read from the file where not given), at the time its driver
    wrote in it, on the host of WHERE (by default, what its run recorded: origin()), with what
    the dump itself says of its GPUs and driver. The file is the user's, recorded by reference
    (gc never deletes it); with COPY (inspect --record --copy) the crash's file is that copy,
    which the index took and owns."""
    path = Path(path).absolute()
    kept = copy.absolute() if copy is not None else path
    size = path.stat().st_size
    digest = digest or sha256_of(path)
    where = where if where is not None else origin(path)
    gpus = sorted({d.name for d in report.devices if d.name})
    return NewCrash(
        key=f"sha256:{digest}", dump_sha256=digest, signature=compute(report),
        crashed_at=crash_time(path, report), recorded_by=recorded_by,
        source=str(kept), summary=report.summary, host=where.host,
        deployment=where.deployment, gpus=", ".join(gpus) or None,
        driver=report.dump.driver_version, pid=dump_pid(path.name),
        facts=fleet_facts.merged(fleet_facts.of_triage(report)), triage=report,
        files=[CrashFile(path=str(kept), kind="coredump", size_bytes=size,
                         owned=copy is not None)])


def from_hang(folder: Path, reading: HangReading, recorded_by: str,
              where: Origin | None = None) -> NewCrash | None:
    """A hang across ranks read from the capture FOLDER (crashlab inspect RUN_DIR --record,
    report, serve): a crash of kind hang, signed by its collective-hang signature (the same hang
    in new processes, after a restart or on another host, has the same one), at the time the
    capture began, on the host of its run (or the ranks' host, or the user's word), with the
    reading kept for show and the web view. None where no verdict places the hang: there is
    nothing to sign it by."""
    from ..hangs.files import run_folder
    from ..hangs.layout import CAPTURE

    if reading.signature is None:
        return None
    folder = Path(folder).absolute()
    run = run_folder(folder)
    run_dir = run if (run / "manifest.json").is_file() else None
    if where is None:
        where = _run_origin(run_dir) if run_dir is not None else Origin()
    hosts = sorted({rank.host for rank in reading.ranks if rank.host})
    host = where.host or (hosts[0] if len(hosts) == 1 else None)
    started = _epoch(reading.capture.started_at)
    record = folder / CAPTURE
    return NewCrash(
        key=f"hang:{host or UNKNOWN_HOST}:{folder}", kind="hang", hang=reading,
        signature=reading.signature, crashed_at=started, first_failure_at=started,
        recorded_by=recorded_by, source=str(folder), summary=reading.headline(), host=host,
        deployment=where.deployment, run_dir=str(run_dir) if run_dir is not None else None,
        files=[CrashFile(path=str(record), kind="hang-capture",
                         size_bytes=record.stat().st_size if record.is_file() else 0)])


def from_kernel_log(path: Path, triaged: XidTriage, recorded_by: str,
                    where: Origin | None = None) -> NewCrash | None:
    """A GPU fault triaged from a kernel log alone (inspect --kernel-log --record, report): a
    crash of kind kernel-log, signed by its gpu-xid signature (the same Xid fault on another run
    or host has the same one), known by the log's contents, at the time of its first dated Xid
    line (else the file's modification time), on the host of WHERE (the user's word), else the
    one host the log's syslog prefixes name, with the triage kept for show and the web view. None
    where the log holds no Xid: nothing to sign."""
    if triaged.signature is None:
        return None
    path = Path(path).absolute()
    xids = triaged.kernel_log.xids
    hosts = sorted({event.host for event in xids if event.host})
    where = where or Origin()
    host = where.host or (hosts[0] if len(hosts) == 1 else None)
    dated = [event.time for event in xids if event.time]
    crashed_at = _epoch(dated[0]) if dated else path.stat().st_mtime
    return NewCrash(
        key=f"kernel-log:{sha256_of(path)}", kind="kernel-log", signature=triaged.signature,
        xid_triage=triaged,
        crashed_at=crashed_at, recorded_by=recorded_by, source=str(path),
        summary=triaged.summary, host=host, deployment=where.deployment,
        files=[CrashFile(path=str(path), kind="kernel-log", size_bytes=path.stat().st_size)])


def from_capture(folder: Path, recorded_by: str) -> list[NewCrash]:
    """The hang a capture folder shows, read as inspect reads it: none where no verdict places
    it or the capture cannot be read (inspect RUN_DIR says why)."""
    from ..api import read_hang

    try:
        hang = from_hang(folder, read_hang(folder), recorded_by)
    except CrashlabError:
        return []
    return [hang] if hang is not None else []


def from_run_captures(run_dir: Path, recorded_by: str) -> list[NewCrash]:
    """Every hang of a serve run directory's captures (from_capture)."""
    from ..hangs.layout import capture_dirs

    return [hang for folder in capture_dirs(Path(run_dir)) for hang in from_capture(folder, recorded_by)]


def from_report_inputs(inputs, given: Origin | None = None) -> list[NewCrash | XidLine]:
    """What ``crashlab report`` read (crashlab.issue.inputs.Inputs): its runs, its hangs and its
    coredumps, each hang and coredump where its run or the user's word (GIVEN: report
    --host/--deployment) puts it."""
    given = given or Origin()
    crashes: list[NewCrash | XidLine] = [crash for run in inputs.runs if run.report is not None
                                         for crash in from_run(run.path, run.report, "report")]
    hangs = [from_hang(hang.folder, hang.reading, "report",
                       origin(hang.folder / "capture.json", given.host, given.deployment))
             for hang in inputs.hangs]
    crashes += [hang for hang in hangs if hang is not None]
    return crashes + [from_coredump(core.path, core.report, "report",
                                    where=origin(core.path, given.host, given.deployment))
                      for core in inputs.cores if core.report is not None]
