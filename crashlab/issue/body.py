"""The issue body: SGLang's bug template (Describe the bug, Reproduction, Environment), then the
triage, the logs and the attachment, in at most GitHub's 65,536 characters.

A bisect's verdict, where one was given, is a section of its own after Reproduction
(crashlab.issue.bisect_section says why there).

The triage is the views' own: serve's report.md renders a run (crashlab.report.run_views) and
inspect's --markdown a coredump (crashlab.report.markdown), each given the room the rest of the
body leaves. While that room is below MIN_TRIAGE, the body sheds, in this order and saying so
in itself: a bisect's step table (its verdict lines stay: they name the commit, the step table
only how the search got there), the log findings, the triage of coredumps beyond the first, the
environment's topology and variables, the list of what the bundle left out beyond
LEFT_OUT_SHOWN entries. A step that would shed nothing from this body is passed over. Everything
shed is in the bundle. Every text from outside goes through markdown_escape.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..hangs import markdown as hang_markdown
from ..hangs.model import HangReading
from ..index.markdown import facets_lines
from ..index.records import Facets
from ..launchline import option_value
from ..notation import counted
from ..privacy.redact import MASK
from ..report import markdown as dump_markdown
from ..report import run_views, text
from ..report.advice import advice_line
from ..report.kernellog import XidTriage
from ..report.markdown_escape import code, cut_to, fenced, html, inline, join
from ..report.model import TriageReport
from ..report.run import RunReport
from ..textsize import shown
from . import environment as report_environment
from .bisect_section import BisectShown, section
from .model import IssueReport, LeftOut, RequestDumpSummary

LIMIT = dump_markdown.GITHUB_LIMIT
MIN_TRIAGE = 4_000
LEFT_OUT_SHOWN = 10


@dataclass
class Facts:
    """What the body tells, every text already cleaned (redacted, anonymized)."""

    title: str
    launch: list[str] | None
    runs: list[RunReport]
    cores: list[tuple[str, TriageReport]]  # (name in the bundle or path, report) given directly
    primary: TriageReport | None  # the first FAULT dump's triage
    environment: report_environment.ReportEnvironment
    issue: IssueReport
    notes: list[str] = field(default_factory=list)
    #: the facets of the crash's signature across the fleet, where the index holds the crash
    fleet: Facets | None = None
    #: the bisects given, each with where its files are
    bisects: list[BisectShown] = field(default_factory=list)
    #: each hang capture's reading, cleaned and named as bundled
    hangs: list[HangReading] = field(default_factory=list)
    #: the incident triaged from --kernel-log, where no GPU dump shows the fault
    xid: XidTriage | None = None


@dataclass(frozen=True)
class _Detail:
    logs: bool = True
    all_cores: bool = True
    full_environment: bool = True
    left_out: int = 10_000
    bisect_steps: bool = True
    cuts: tuple[str, ...] = ()


#: (what is shed, as the body says it; the change; whether this body has any of it)
_STEPS: tuple[tuple[str, dict, Callable[[Facts], bool]], ...] = (
    ("the bisect's step table (the bundle has its steps.jsonl)", dict(bisect_steps=False),
     lambda facts: bool(facts.bisects)),
    ("log findings (the bundle has the logs and run/report.json)", dict(logs=False),
     lambda facts: bool(facts.runs)),
    ("triage of coredumps beyond the first (the bundle has each one's triage JSON)",
     dict(all_cores=False), lambda facts: len(facts.cores) > 1),
    ("the environment's topology and variables (the bundle has environment.json)",
     dict(full_environment=False), lambda facts: True),
    (f"the list of files left out of the bundle beyond {LEFT_OUT_SHOWN} (report.json lists them)",
     dict(left_out=LEFT_OUT_SHOWN), lambda facts: len(facts.issue.left_out) > LEFT_OUT_SHOWN),
)
_TRIAGE = object()


def render(facts: Facts, limit: int = LIMIT) -> tuple[str, list[str]]:
    """(the body, what was shed to fit, in order)."""
    detail = _Detail()
    for label, change, applies in (("", {}, lambda facts: True), *_STEPS):
        if not applies(facts):
            continue
        if label:
            detail = replace(detail, cuts=detail.cuts + (label,), **change)
        parts = _parts(facts, detail)
        at = parts.index(_TRIAGE)
        head, tail = join(parts[:at]), join(parts[at + 1:])
        room = limit - len(head) - len(tail)
        if room >= MIN_TRIAGE:
            break
    triage = _triage(facts, detail, max(room, MIN_TRIAGE))
    return cut_to(head + triage + tail, limit), list(detail.cuts)


def _parts(facts: Facts, detail: _Detail) -> list:
    out: list = ["### Describe the bug", "", f"**{inline(facts.title)}**", ""]
    xid_lines = [f"- {inline(facts.xid.summary)}"] if facts.xid is not None else []
    items = (_fault_lines(facts.primary) or _crash_lines(facts.runs) or xid_lines) + \
        _hang_lines(facts.hangs) + \
        [f"- {inline(note)}" for note in facts.notes]
    if facts.issue.advice is not None:
        items.append(f"- Advice: {inline(advice_line(facts.issue.advice))}")
    if items:
        out += [*items, ""]
    if detail.cuts:
        out += [f"_Shortened to fit GitHub's limit: left out {inline('; '.join(detail.cuts))}._", ""]
    out += ["### Reproduction", ""] + _reproduction(facts)
    out += section(facts.bisects, steps=detail.bisect_steps)
    out += ["### Environment", ""] + _environment(facts, detail)
    if facts.fleet is not None and facts.fleet.crashes > 1:  # one crash's "fleet" says nothing
        out += facets_lines(facts.fleet, heading="### Across the fleet: what stays and what "
                                                 "varies over the {crashes} of its "
                                                 "signature in the crash index")
    for reading in facts.hangs:
        out += ["### Hang across ranks", "", hang_markdown.render(reading, heading_level=4)]
    out += ["### Triage", "", _TRIAGE]
    out += _logs(facts, detail) + _attachment(facts.issue, detail)
    out.append(f"<sub>crashlab {html(facts.issue.tool.version)}, report-bundle schema "
               f"{facts.issue.schema_version}</sub>")
    return out


def _fault_lines(report: TriageReport | None) -> list[str]:
    if report is None or not report.faults:
        return []
    fault = report.faults[0]
    out = [f"- Exception: {inline(text.exception_line(fault))}",
           f"- Kernel: {code(text.kernel_line(fault))}",
           f"- Where: {inline(text.place(fault))}"]
    if fault.sass.source:
        out.append(f"- Source: {code(text.source_chain(fault.sass.source))}")
    if fault.owner is not None:
        out.append(f"- Owner: {inline(text.owner_line(fault.owner))}")
    if report.debugger is not None:
        out.append(f"- Debugger: {inline(text.debugger_status(report.debugger))}")
    return out


def _hang_lines(hangs: list[HangReading]) -> list[str]:
    """Each hang's first verdict, as "Describe the bug" names it."""
    return [f"- Hang: {inline(reading.verdicts[0].line if reading.verdicts else reading.headline())}"
            for reading in hangs]


#: the innermost frames of a traceback that "Describe the bug" names
KEY_FRAMES = 3
#: findings whose text is the exception a crash raised
_RAISED = ("traceback", "scheduler-exception", "sglang-crash", "fatal")


def _crash_lines(runs: list[RunReport]) -> list[str]:
    """A crash with no GPU dump (a Python exception, a signal): its exception line, the
    innermost frames of its traceback, and how the server ended, from the first crash of a run."""
    incident = next((i for run in runs for i in run.incidents if i.kind == "crash"), None)
    if incident is None:
        return []
    out = []
    raised = next((f for kind in _RAISED for f in incident.findings if f.kind == kind), None)
    if raised is not None:
        out.append(f"- Exception: {code(raised.text)}")
        frames = next((f.frames for f in incident.findings if f.frames), [])
        for frame in reversed(frames[-KEY_FRAMES:]):
            where = f"{frame.file.rsplit('/', 1)[-1]}:{frame.line} in {frame.function}"
            out.append(f"  - {code(where)}" + (f": {code(frame.code)}" if frame.code else ""))
    if incident.exit is not None:
        out.append(f"- Server: {inline(incident.summary)}")
    return out


def _reproduction(facts: Facts) -> list[str]:
    note = "anonymized" if facts.issue.anonymized else "secrets masked"
    out: list[str] = []
    if facts.launch:
        out += [f"Launch command ({note}):", "", *fenced([shlex.join(facts.launch)]), ""]
    else:
        out += ["The launch command is not known (no run directory, and no request dump that "
                "recorded it).", ""]
    for dump in facts.issue.request_dumps:
        out += _replay(dump)
    if facts.issue.request_dumps and facts.launch and option_value(facts.launch, "--api-key"):
        out += [f"The server's API key is masked above: put a key back in {code('--restart-cmd')}; "
                f"replay sends the same one to the server it starts.", ""]
    recorded = facts.environment.environment
    masked = sorted(name for name, value in (recorded.variables if recorded else {}).items()
                    if value == MASK)
    if facts.issue.request_dumps and facts.launch and masked:
        out += [f"{code('--restart-cmd')} starts the server with the variables the run's "
                f"environment.json recorded of its launch, but for the masked ones: "
                f"{', '.join(map(code, masked))}; add those with their values.", ""]
    if not facts.issue.request_dumps and facts.bisects:
        out += [f"No SGLang request dump was given; the bisect below replayed "
                f"{code(facts.bisects[0].result.dump)} at each step (give it to "
                f"{code('crashlab report')} too, and the bundle holds it).", ""]
    elif not facts.issue.request_dumps:
        out += ["No SGLang request dump was recorded, so there is nothing to replay.", ""]
    return out


def _replay(dump: RequestDumpSummary) -> list[str]:
    where = (f"{code(dump.member)} in the attached bundle" if dump.member
             else f"left out of the bundle; on the reporter's machine at {code(dump.path)}")
    out = [f"Replay the {counted(dump.requests, 'recorded request')} ({dump.in_flight} in flight at the "
           f"crash; {where}) against a fresh server, from the extracted bundle:", "",
           *fenced([dump.replay]), ""]
    if dump.minimized:
        out += [f"Minimized reproducer: {code(dump.minimized)} (made by "
                f"{code('crashlab replay --minimize')}); replay it the same way.", ""]
    else:
        out += [f"No minimized reproducer yet: {code('crashlab replay ... --minimize')} with the "
                f"same {code('--restart-cmd')} makes one.", ""]
    return out


def _environment(facts: Facts, detail: _Detail) -> list[str]:
    return [report_environment.markdown(facts.environment, full=detail.full_environment)]


def _triage(facts: Facts, detail: _Detail, room: int) -> str:
    cores = facts.cores if detail.all_cores else facts.cores[:1]
    views = len(facts.runs) + len(cores)
    if not views and facts.xid is not None:
        return join(dump_markdown.kernel_log(facts.xid.kernel_log, 4))
    if not views and facts.hangs:
        return "No coredump and no run report: the hang's reading above is the triage.\n\n"
    if not views:
        return "No coredump and no run report: the triage is the reproduction above.\n\n"
    share = room // views
    out = [run_views.incidents(run, share, findings=False) for run in facts.runs]
    out += [f"#### {code(name) or 'a coredump'}\n\n" + dump_markdown.render(report, share - len(name) - 20,
                                                            heading_level=5, footer=False,
                                                            titled=False)
            for name, report in cores]
    if len(cores) < len(facts.cores):
        out.append(f"_{len(facts.cores) - len(cores)} more coredumps: their triage is in the bundle._\n\n")
    return "".join(out)


def _logs(facts: Facts, detail: _Detail) -> list[str]:
    logs = [m for m in facts.issue.members if m.kind == "log"]
    out = ["### Logs", ""]
    if logs:
        out += ["Excerpts of the server's logs (their first and last lines) are in the bundle: "
                + ", ".join(code(m.name) for m in logs) + ".", ""]
    if not facts.runs:
        out += ["No server logs: no run directory was given.", ""]
    if not detail.logs:
        return out
    for run in facts.runs:
        for incident in run.incidents:
            out += [f"<details><summary>Log findings of incarnation {incident.incarnation}"
                    "</summary>", "", run_views.log_findings(incident), "</details>", ""]
    return out


def _attachment(issue: IssueReport, detail: _Detail) -> list[str]:
    name = issue.bundle.rsplit("/", 1)[-1]
    out = ["### Attachment", "",
           f"Attach {code(name)} (gzip; under {inline(shown(issue.max_bytes))}): report.md and "
           f"report.json, and {len(issue.members)} more files, listed in its report.json.", ""]
    if issue.left_out:
        out += ["Left out of the bundle:", ""]
        out += [_left_out_line(item) for item in issue.left_out[:detail.left_out]]
        if len(issue.left_out) > detail.left_out:
            out.append(f"- _{len(issue.left_out) - detail.left_out} more in report.json_")
        out.append("")
    return out


def _left_out_line(item: LeftOut) -> str:
    what = code(item.path) if item.member is None else f"{code(item.member)}, from {code(item.path)}"
    return f"- {what} ({inline(item.kind)}, {inline(shown(item.size_bytes))}): {inline(item.reason)}"
