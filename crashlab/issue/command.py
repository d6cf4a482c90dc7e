"""``crashlab report``: inputs -> cleaned candidates -> the bundle under its budget -> the body.

The body and report.json go into the bundle last, since they list what the bundle left out;
when they do not fit in what is left, the last member added is taken out again (and listed as
left out) until they do. A budget too small for them alone is bad input. The body is in place
before the bundle is, and a failure to write either (a full disk, a folder that cannot be
written) leaves neither behind and is an environment problem.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..advice.dump import advised
from ..advice.evidence import advised_log
from ..bisect.model import RESULT, STEP_LOG, BisectResult
from ..errors import BadInput, EnvironmentProblem
from ..hangs.files import run_folder
from ..hangs.model import HangReading
from ..incidents.kernellogfile import read_kernel_log
from ..incidents.xidcheck import check as check_xids
from ..incidents.xidgpus import RunPlaces
from ..incidents.xidtriage import triage
from ..index import capture, fleet
from ..index.fleet import kept_triage
from ..index.records import Facets, NewCrash
from ..privacy.policy import Privacy
from ..privacy.redact import MASK
from ..report.advice import Advice
from ..report.kernellog import XidTriage
from ..report.model import Tool, TriageReport
from ..report.run import RunReport
from ..supervise import files, gpuplaces
from ..textsize import parse_size, shown
from ..version import __version__
from . import body, local, members, relaunch, title
from .bisect_section import BisectShown
from .environment import ReportEnvironment, environment
from .inputs import CoreInput, DumpInput, Inputs, read
from .model import HangRank, HangSummary, IssueReport, LeftOut, Member, RequestDumpSummary
from .tarball import BudgetedTarball

#: GitHub's limit for a file attached to an issue.
DEFAULT_MAX_BYTES = 25 * 10**6
SGLANG_URL = "http://127.0.0.1:30000"


@dataclass(frozen=True)
class ReportOptions:
    inputs: list[str]
    out: Path | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    anonymize: bool = False
    #: add the environment of the machine the report is made on, labelled as such
    this_machine: bool = False
    #: explain each coredump's faults (crashlab.explain)
    explain: bool = True
    #: --db: the crash index whose facets of the crash's signature the body shows (where it
    #: holds the crash); None: the default index
    db: str | None = None
    #: --host and --deployment: where the coredumps crashed, in the user's words
    host: str | None = None
    deployment: str | None = None
    #: --gpu-dumps: bundle the GPU dumps a hang capture took, as coredumps
    gpu_dumps: bool = False
    #: --kernel-log: a file of dmesg, journalctl -k or syslog text from the crashed node
    kernel_log: str | None = None

    @classmethod
    def from_command_line(cls, *, inputs, out, max_size, anonymize, this_machine,
                          no_explain, gpu_dumps=False, kernel_log=None) -> ReportOptions:
        """The options as click parsed them (names as in crashlab/cli/report.py); BadInput for
        a --max-size that is not a size."""
        return cls(inputs=list(inputs), out=out, max_bytes=parse_size(max_size),
                   anonymize=anonymize, this_machine=this_machine, explain=not no_explain,
                   gpu_dumps=gpu_dumps, kernel_log=kernel_log)


@dataclass(frozen=True)
class Made:
    issue: IssueReport
    body: str
    #: what was read, for the crash index to record
    inputs: Inputs | None = None
    #: what the machine that made the triage could not do, for the terminal (crashlab.issue.local)
    lacking: list[str] = field(default_factory=list)
    #: warnings for the terminal (an index that could not be read)
    warnings: list[str] = field(default_factory=list)


def _launch_of(inputs: Inputs) -> tuple[list[str], dict[str, str]]:
    """(the launch command, its environment) as the inputs recorded them (secrets masked): the
    run's as serve launched it, else a request dump's, made runnable."""
    for run in inputs.runs:
        return list(run.manifest.command), run.launch().environment
    for dump in inputs.all_dumps:
        if dump.dump is not None and dump.dump.launch_command:
            try:
                argv = shlex.split(dump.dump.launch_command)
            except ValueError:
                argv = dump.dump.launch_command.split()
            return relaunch.runnable(argv), {str(k): str(v) for k, v in (dump.dump.server_args or {}).items()}
    return [], {}


def _privacy(inputs: Inputs, options: ReportOptions) -> Privacy:
    argv, env = _launch_of(inputs)
    hosts = [run.manifest.crashlab.host for run in inputs.runs]
    hosts += [options.host] if options.host else []
    paths = [str(run.path) for run in inputs.runs] + [run.manifest.cwd for run in inputs.runs]
    paths += [str(item.path.resolve()) for item in inputs.all_cores]
    paths += [str(item.path.resolve()) for item in inputs.all_dumps]
    paths += [str(bisect.path) for bisect in inputs.bisects]
    paths += [bisect.result.repo for bisect in inputs.bisects if bisect.result.repo]
    paths += [str(hang.folder) for hang in inputs.hangs]
    paths += [str(run_folder(hang.folder)) for hang in inputs.hangs]
    paths += [str(Path(options.kernel_log).resolve())] if options.kernel_log else []
    return Privacy.for_launch(argv, env, options.anonymize, hosts, paths)


def _clean_run(report: RunReport, privacy: Privacy) -> RunReport:
    return RunReport.model_validate(privacy.json(report.model_dump(mode="json")))


def _bisects_shown(inputs: Inputs, bundled: set[str], privacy: Privacy) -> list[BisectShown]:
    """Each bisect given, its verdict cleaned, with the names its files have in the bundle."""
    shown = []
    for number, bisect in enumerate(inputs.bisects):
        folder = members.bisect_folder(inputs, number)
        result = BisectResult.model_validate(privacy.json(bisect.result.model_dump(mode="json")))
        shown.append(BisectShown(
            result=result, folder=privacy.text(str(bisect.path)),
            result_member=folder + RESULT if folder + RESULT in bundled else None,
            log_member=folder + STEP_LOG if folder + STEP_LOG in bundled else None,
            has_log=bisect.step_log is not None))
    return shown


def _hang_summary(reading: HangReading, folder: str, bundled: set[str], privacy: Privacy,
                  capture: Path) -> HangSummary:
    """A hang as report.json tells it (READING already cleaned and named as bundled)."""
    member = folder + "reading.json"
    return HangSummary(
        reading=member if member in bundled else None, capture=privacy.text(str(capture)),
        headline=reading.headline(), found=reading.found,
        signature=reading.signature.short if reading.signature is not None else None,
        verdicts=reading.verdicts,
        ranks=[HangRank(rank=r.rank, pid=r.pid, role=r.role, state=r.state, where=r.where)
               for r in reading.ranks],
        groups=reading.groups, sources=reading.sources)


def runs_dir(inputs: Inputs) -> Path:
    """Where the index of an older crashlab would lie: beside the first run given."""
    return Path(inputs.runs[0].path).absolute().parent if inputs.runs else Path("crashlab-runs")


def _fleet(inputs: Inputs, db: str | None, warn: Callable[[str], None]) -> Facets | None:
    """The facets of the first crash's signature, where the index holds that crash."""
    try:
        crashes = [c for c in capture.from_report_inputs(inputs) if isinstance(c, NewCrash)]
    except Exception:  # noqa: BLE001 - recording says why, once, after the report is made
        return None
    return fleet.facets_of_recorded(crashes[0], db, runs_dir(inputs), warn) if crashes else None


def _clean_facets(facets: Facets, privacy: Privacy) -> Facets:
    return Facets.model_validate(privacy.json(facets.model_dump(mode="json")))


def _shown_triage(core: CoreInput, names: dict[Path, str], privacy: Privacy,
                  lacking: set[str]) -> TriageReport:
    """A coredump's triage as the body shows it: without the debugger view the reporting
    machine could not make (why, with its own paths, goes to LACKING, for its terminal), named
    as bundled (members.bundled), cleaned."""
    assert core.report is not None  # only a triaged coredump is shown
    shown = members.bundled(local.triage(core.report, lacking), core.path, names[core.path])
    return TriageReport.model_validate(privacy.json(shown.model_dump(mode="json")))


def restart_command(launch: list[str], variables: dict[str, str]) -> str:
    """The shell command that starts the server again as it was launched: the launch command,
    under ``env`` with the variables the run's environment.json recorded of the launch (those
    that steer CUDA, NCCL, torch and SGLang), where it recorded any; a masked one (a secret) is
    left out, for the body to name."""
    assignments = [f"{name}={value}" for name, value in sorted(variables.items()) if value != MASK]
    return shlex.join(["env", *assignments, *launch] if assignments else launch)


def _replay_command(member: str, launch: list[str], variables: dict[str, str]) -> str:
    from ..supervise.launch import base_url, health_url, is_sglang

    url = health_url(launch, is_sglang(launch)) if launch else None
    command = ["crashlab", "replay", member, "--url", base_url(url) if url else SGLANG_URL]
    if launch:
        command += ["--restart-cmd", restart_command(launch, variables)]
    return shlex.join(command)


def _request_dumps(dumps: list[DumpInput], names: dict[Path, str], bundled: set[str],
                   launch: list[str], variables: dict[str, str],
                   privacy: Privacy) -> list[RequestDumpSummary]:
    found = []
    for dump in dumps:
        if dump.dump is None:
            continue
        member = names[dump.path] if names[dump.path] in bundled else None
        minimized = names[dump.path].removesuffix(".pkl") + ".min.pkl"
        found.append(RequestDumpSummary(
            path=privacy.text(str(dump.path)), member=member, requests=len(dump.dump.requests),
            in_flight=len(dump.dump.in_flight), layout=dump.dump.layout,
            replay=_replay_command(member or privacy.text(str(dump.path)), launch, variables),
            minimized=minimized if minimized in bundled else None))
    return found


def _headline(inputs: Inputs, xid: XidTriage | None = None) -> str:
    """What the title leads with: the crash's signature title (the run's, else that of the
    coredump that shows the crash, else of any coredump, else the kernel log's incident), else
    the summary."""
    signatures = [run.report.signature for run in inputs.runs if run.report is not None]
    signatures += [report.signature for _, report in _faults(inputs)]
    signatures += [core.report.signature for core in inputs.all_cores if core.report is not None]
    signatures += [xid.signature] if xid is not None else []
    signatures += [hang.reading.signature for hang in inputs.hangs]
    found = next((signature for signature in signatures if signature is not None), None)
    return found.title if found is not None else _summary(inputs)


def _summary(inputs: Inputs) -> str:
    for run in inputs.runs:
        if run.report is not None:
            return run.report.summary
    for core in inputs.all_cores:
        if core.report is not None:
            return core.report.summary
    for hang in inputs.hangs:
        return hang.reading.headline()
    for dump in inputs.all_dumps:
        if dump.dump is not None:
            return (f"SGLang request dump: {len(dump.dump.requests)} requests, "
                    f"{len(dump.dump.in_flight)} in flight")
    if inputs.bisects and not inputs.runs:
        return f"crashlab bisect: {inputs.bisects[0].result.why}"
    outcome = inputs.runs[0].manifest.outcome if inputs.runs else None
    return f"crashlab serve run: {outcome.reason if outcome else 'no outcome recorded'}"


def _notes(inputs: Inputs) -> list[str]:
    notes = [f"request dump {dump.path.name} could not be read: {dump.error}"
             for dump in inputs.all_dumps if dump.error]
    notes += [f"coredump {core.path.name} could not be read: {core.error}"
              for core in inputs.all_cores if core.error]
    notes += [f"{run.path.name}: the run has no report.json (no crash was triaged)"
              for run in inputs.runs if run.report is None]
    return notes


def _faults(inputs: Inputs) -> list[tuple[CoreInput, TriageReport]]:
    """The coredumps that show the crash, with their triage: FAULT dumps of a run, or given
    directly with a fault."""
    return [(core, core.report) for core in inputs.all_cores
            if core.report is not None and core.report.found and core.label in (None, "FAULT")]


def _described_core(inputs: Inputs) -> tuple[CoreInput, TriageReport] | None:
    """The coredump whose tables describe the crashed machine, with its triage: the first that
    shows the crash, else the first read."""
    read_ones = [(core, core.report) for core in inputs.all_cores if core.report is not None]
    return next(iter(_faults(inputs) + read_ones), None)


def _kernel_log(inputs: Inputs, options: ReportOptions) -> XidTriage | None:
    """The --kernel-log's Xids: held against the first dump that shows the fault (they join its
    triage; the log's host against the one its run or --host names), else an incident of their
    own, signed with the request dump's shape."""
    if options.kernel_log is None:
        return None
    log = read_kernel_log(options.kernel_log)
    faults = _faults(inputs)
    if faults:
        core, report = faults[0]
        log.checks = check_xids(log, report, capture.origin(Path(core.path)).host or options.host)
        report.kernel_log = log
        report.advice = advised(report)
        return None
    dumps = [dump.dump for dump in inputs.all_dumps if dump.dump is not None]
    shape = f"{dumps[0].layout}, {len(dumps[0].in_flight)} in flight" if dumps else None
    triaged = triage(log, shape, _run_places(inputs))
    triaged.advice = advised_log(log)
    return triaged


def _run_places(inputs: Inputs) -> RunPlaces | None:
    """What the first run given recorded of its GPUs and ranks (its last incarnation's launch
    and processes), for placing the log's GPUs; None without a run."""
    if not inputs.runs:
        return None
    run = inputs.runs[0]
    last = run.manifest.incarnations[-1] if run.manifest.incarnations else None
    return gpuplaces.of_run(run.path, last.number if last else 1, last.processes if last else [])


def make(options: ReportOptions) -> Made:
    inputs = read(options.inputs, options.explain,
                  kept=lambda core, read_so_far: kept_triage(core, options.db,
                                                             runs_dir(read_so_far)))
    xid = _kernel_log(inputs, options)
    privacy = _privacy(inputs, options)
    warnings: list[str] = list(inputs.repeats)
    fleet = _fleet(inputs, options.db, warnings.append)
    if fleet is not None and privacy.anonymizer is not None:  # the fleet's other hosts too
        for host in (v.value for f in fleet.fields if f.name == "host" for v in f.values):
            if host is not None:
                privacy.anonymizer.add_host(host)
    out = (options.out or Path.cwd()).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as problem:
        raise EnvironmentProblem(f"--out {out}: cannot be created ({problem.strerror})") from None
    candidates, names = members.candidates(inputs, privacy, options.gpu_dumps)
    core_triage = _described_core(inputs)
    found_environment = environment(
        inputs.runs[0].path if inputs.runs else None, privacy,
        (names[core_triage[0].path], _shown_triage(core_triage[0], names, privacy, set()))
        if core_triage else None,
        options.this_machine, given=(options.host, options.deployment))
    for name, described in (("environment.json", found_environment.environment),
                            ("this-machine.environment.json", found_environment.this_machine)):
        if described is not None:
            candidates.insert(0, members.Candidate(name, "environment", 0, Path(name),
                                                   privacy.document(described.model_dump(mode="json"))))
    body_path = bundle_path = tarball = None
    try:
        body_path, bundle_path = _reserve(out)
        tarball = BudgetedTarball(bundle_path, options.max_bytes, bundle_path.name.removesuffix(".tar.gz"))
        made = _pack(inputs, options, privacy, found_environment, candidates, names, tarball,
                     body_path, bundle_path,
                     _clean_facets(fleet, privacy) if fleet is not None else None,
                     XidTriage.model_validate(privacy.json(xid.model_dump(mode="json")))
                     if xid is not None else None)
        made = replace(made, warnings=warnings)
        made.issue.bundle_bytes = tarball.close()
        files.write_atomic(body_path, made.body.encode("utf-8"))  # the body first: never a bundle without it
        tarball.put_in_place()
        return replace(made, inputs=inputs)
    except BaseException as problem:
        if tarball is not None:
            tarball.discard()
        if body_path is not None:
            body_path.unlink(missing_ok=True)
        if isinstance(problem, OSError):
            raise EnvironmentProblem(f"the report cannot be written: {problem.filename or out}: "
                                     f"{problem.strerror or problem}") from None
        raise


def _reserve(out: Path) -> tuple[Path, Path]:
    """(body, bundle) names in ``out`` that no other report holds, the body's created empty
    (O_EXCL) to hold them: two reports in the same second into one folder (a script, two
    terminals) each get names of their own."""
    stem = f"crashlab-report-{time.strftime('%Y%m%d-%H%M%S')}"
    name, number = stem, 1
    while True:
        body_path, bundle_path = out / f"{name}.md", out / f"{name}.tar.gz"
        if not bundle_path.exists():
            try:
                os.close(os.open(body_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                return body_path, bundle_path
            except FileExistsError:
                pass
        number += 1
        name = f"{stem}-{number}"


def _add_members(candidates: list[members.Candidate], tarball: BudgetedTarball, privacy: Privacy,
                 max_bytes: int) -> tuple[list[Member], list[LeftOut]]:
    """Add each candidate the tarball has room for, in order; the (added, left out) lists, a
    refused candidate or one past the budget left out with why."""
    added: list[Member] = []
    left_out: list[LeftOut] = []

    def leave_out(candidate: members.Candidate, reason: str) -> None:
        left_out.append(LeftOut(path=privacy.text(str(candidate.source)), member=candidate.name,
                                kind=candidate.kind, size_bytes=candidate.size,
                                reason=privacy.text(reason)))

    for candidate in candidates:
        if candidate.refused:
            leave_out(candidate, candidate.refused)
            continue
        assert candidate.content is not None  # only a refused candidate has none
        room = tarball.room()
        compressed = tarball.add(candidate.name, candidate.content)
        if compressed is None:
            leave_out(candidate, f"does not fit in the {shown(max(room, 0))} left of the "
                                 f"{shown(max_bytes)} budget")
        else:
            added.append(Member(name=candidate.name, kind=candidate.kind, size_bytes=candidate.size,
                                compressed_bytes=compressed, source=privacy.text(str(candidate.source))))
    return added, left_out


def _advice(runs: list[RunReport], primary: TriageReport | None,
            xid: XidTriage | None) -> Advice | None:
    """The last incident's advice (serve weighed the most there), else the first FAULT dump's,
    else the kernel log's."""
    said = [incident.advice for run in runs for incident in run.incidents if incident.advice]
    if said:
        return said[-1]
    return primary.advice if primary is not None else xid.advice if xid is not None else None


def _pack(inputs: Inputs, options: ReportOptions, privacy: Privacy,
          found_environment: ReportEnvironment, candidates: list[members.Candidate],
          names: dict[Path, str], tarball: BudgetedTarball, body_path: Path,
          bundle_path: Path, fleet: Facets | None, xid: XidTriage | None) -> Made:
    added, left_out = _add_members(candidates, tarball, privacy, options.max_bytes)
    launch = privacy.argv(_launch_of(inputs)[0])
    # the launch's environment as the run recorded it (cleaned: found_environment is)
    variables = found_environment.environment.variables if found_environment.environment else {}
    lacking: set[str] = set()
    runs = [local.run(_clean_run(run.report, privacy), lacking)
            for run in inputs.runs if run.report is not None]
    direct = [(names[core.path], _shown_triage(core, names, privacy, lacking))
              for core in inputs.cores if core.report is not None]
    faults = _faults(inputs)
    primary = _shown_triage(faults[0][0], names, privacy, lacking) if faults else None
    hangs = [members.shown_reading(hang, privacy, members.hang_folder(inputs, number))
             for number, hang in enumerate(inputs.hangs)]
    while True:
        bundled = {member.name for member in added}
        issue = IssueReport(
            tool=Tool(version=__version__),
            title=title.make(privacy.text(_headline(inputs, xid)), found_environment.versions()),
            inputs=[privacy.text(name) for name in options.inputs],
            found=inputs.found or (xid is not None and xid.found), xid_triage=xid,
            anonymized=privacy.anonymized, body=privacy.text(str(body_path)), body_chars=0,
            bundle=privacy.text(str(bundle_path)), max_bytes=options.max_bytes, compression="gzip",
            members=added, left_out=left_out,
            request_dumps=_request_dumps(inputs.all_dumps, names, bundled, launch, variables,
                                         privacy),
            environment_origin=found_environment.origin, launch=shlex.join(launch) if launch else None,
            host=found_environment.given_host, deployment=found_environment.given_deployment,
            hangs=[_hang_summary(reading, members.hang_folder(inputs, number), bundled, privacy,
                                 hang.folder)
                   for number, (hang, reading) in enumerate(zip(inputs.hangs, hangs, strict=True))],
            advice=_advice(runs, primary, xid))
        text, cuts = body.render(body.Facts(
            title=issue.title, launch=launch or None, runs=runs, cores=direct,
            primary=primary, fleet=fleet, hangs=hangs, bisects=_bisects_shown(inputs, bundled, privacy),
            environment=found_environment, issue=issue, notes=_notes(inputs), xid=xid))
        issue.shortened, issue.body_chars = cuts, len(text)
        text = privacy.redactor.serialized(text)
        document = privacy.redactor.serialized(issue.model_dump_json(indent=2)).encode() + b"\n"
        if tarball.add("report.md", text.encode()) is not None:
            if tarball.add("report.json", document) is not None:
                return Made(issue, text, lacking=sorted(lacking))
            tarball.drop_last()
        if not added:
            raise BadInput(f"--max-size {shown(options.max_bytes)}: too small for the report "
                           "itself (report.md and report.json)")
        tarball.drop_last()
        dropped = added.pop()
        left_out.insert(0, LeftOut(path=dropped.source, member=dropped.name, kind=dropped.kind,
                                   size_bytes=dropped.size_bytes,
                                   reason="taken out to make room for report.md and report.json "
                                          f"within the {shown(options.max_bytes)} budget"))
