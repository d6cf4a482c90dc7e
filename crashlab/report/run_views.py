"""Human renderings of a RunReport: report.md (an issue body) and the short terminal summary.

report.md reads top down as a maintainer wants it: a one-line title (the summary, cut at a
word), the whole summary under it when it was cut, the command; then for each incident its
facts (exit, request dump, replay command), its coredumps with the FAULT dump's own triage
(headings nested under the incident's), its log findings in time order (repeats folded, all but
the first few collapsed) or, when no pattern matched, the end of its log; processes collapsed;
one footer. Columns stay few and cells short: GitHub's column is narrow. The embedded triage is
given whatever room GitHub's 65,536-character limit leaves.
"""

from __future__ import annotations

import shlex

from ..escape import escape
from . import markdown as dump_markdown
from .advice import advice_line
from .markdown_escape import cell, code, cut_to, fenced, html, inline, join
from .run import DumpTriage, Incident, RunReport
from .run_findings import Entry, entries

#: The title's length in characters as shown, "crashlab serve: " included.
TITLE_CHARS = 120
TITLE = "crashlab serve: "
#: Finding entries shown open; the rest are collapsed, up to MAX_ENTRIES in all.
ENTRIES_OPEN = 3
MAX_ENTRIES = 20
COMMAND_CHARS = 120
MIN_DUMP_BUDGET = 4_000
#: Where the FAULT dump's triage goes, until the rest of the body is measured.
_DUMP_VIEW = object()


def title(summary: str) -> str:
    """The summary as the title's text: whole, or cut at a word with "…" to fit TITLE_CHARS."""
    shown = escape(summary.strip())
    room = TITLE_CHARS - len(TITLE)
    if len(shown) <= room:
        return shown
    cut = shown[: room - 1]
    space = cut.rfind(" ")
    if space > room // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def _entry(entry: Entry) -> list[str]:
    rank = f" [{entry.rank}]" if entry.rank else ""
    repeated = entry.repeated()
    out = [f"- {code(_clock(entry.first.time))} {inline(f'{entry.kinds}{rank}, {entry.stream} {entry.lines}')}: "
           f"{code(entry.quote[:300])}" + (f" ({inline('same, ' + repeated)})" if repeated else "")]
    return out + ["", *fenced(entry.block(), indent="  "), ""]


def _clock(time: str) -> str:
    """``2026-11-23T20:08:06.103+00:00`` -> ``20:08:06.103`` (the date is in the incident's facts)."""
    return time[11:23] if len(time) >= 23 and time[10] == "T" else time


def _findings(incident: Incident) -> list[str]:
    if not incident.findings:
        return _log_tail(incident)
    grouped = entries(incident.findings)
    total = len(incident.findings) + incident.omitted_findings
    out = [f"**Log findings** ({total} in {len(grouped)} entries, in time order; all in report.json)", ""]
    for entry in grouped[:ENTRIES_OPEN]:
        out += _entry(entry)
    folded = grouped[ENTRIES_OPEN:MAX_ENTRIES]
    if folded:
        out += [f"<details><summary>{len(folded)} more finding entries</summary>", ""]
        for entry in folded:
            out += _entry(entry)
        out += ["</details>", ""]
    if len(grouped) > MAX_ENTRIES:
        out += [f"_{len(grouped) - MAX_ENTRIES} more entries in report.json._", ""]
    return out


def _log_tail(incident: Incident) -> list[str]:
    tail = incident.log_tail
    if tail is None:
        return ["No fault pattern matched in the logs, and they are empty.", ""]
    last = tail.first_line + len(tail.lines) - 1
    return [f"**End of {inline(tail.stream)}** (lines {tail.first_line}-{last}; no fault pattern "
            "matched in the logs)", "", *fenced(tail.lines), ""]


def _dumps(dumps: list[DumpTriage]) -> list[str]:
    if not dumps:
        return ["No GPU coredump was collected.", ""]
    return [f"- **{inline(d.label)}** {code(d.path)}: {inline(d.summary[:300])}"
            + (f" ({inline('; '.join(d.reasons))})" if d.reasons else "") for d in dumps] + [""]


def _processes(incident: Incident) -> list[str]:
    if not incident.processes:
        return []
    out = [f"<details><summary>Processes ({len(incident.processes)})</summary>", ""]
    for p in incident.processes:
        role = p.role + (f" {p.ranks}" if p.ranks else "")
        ended = p.exit.describe() if p.exit else "running"
        out.append(f"- **{inline(role)}** pid {p.pid} (parent {p.ppid}): {inline(ended)}; "
                   f"{code(p.cmdline.strip()[:COMMAND_CHARS])}")
    return out + ["", "</details>", ""]


def _incident(incident: Incident, embedded: DumpTriage | None, alone: bool, findings: bool) -> list:
    """``alone``: the run's only incident, whose summary the title already gives; ``findings``:
    whether its log findings follow (an issue body gathers them in a section of their own)."""
    rows = [] if alone else [("Summary", inline(incident.summary))]
    if incident.signature is not None:
        rows.append(("Signature", dump_markdown.signature_text(incident.signature)))
    if incident.advice is not None:
        rows.append(("Advice", inline(advice_line(incident.advice))))
    rows += [
        ("When", inline(f"{incident.started_at} to {incident.ended_at}")),
        ("Exit", inline("none: the server lived on" if incident.kind == "survived" else
                        (incident.exit.describe() if incident.exit else "unknown")
                        + (" (after crashlab's stop signal)" if incident.stopped_by_crashlab else ""))),
        ("Folder", code(incident.directory)),
    ]
    for r in incident.request_dumps:
        held = "" if r.requests is None else f", {r.requests} request{'s' * (r.requests != 1)}"
        rows.append(("Request dump", f"{code(r.path)} ({r.size_bytes} bytes{held})"))
    rows += [("Replay", code(command)) for command in incident.replay_commands]
    rows += [("Note", inline(note)) for note in incident.notes]
    out: list = [f"#### Incarnation {incident.incarnation}: {inline(incident.kind)}", "",
                 *dump_markdown.FIELD_TABLE]
    out += [f"| {k} | {cell(v)} |" for k, v in rows] + [""]
    out += ["**Coredumps**", ""] + _dumps(incident.dumps)
    if embedded is not None:
        out += [f"Triage of {code(embedded.path)}:", "", _DUMP_VIEW]
    if incident.kernel_log is not None:
        out += dump_markdown.kernel_log(incident.kernel_log, 5)
    return out + _host_stacks(incident) + _sglang(incident) \
        + (_findings(incident) if findings else []) + _processes(incident)


def _host_stacks(incident: Incident) -> list[str]:
    """A host crash's stacks: gdb's bt of each core (or why none) and faulthandler's frames."""
    out = []
    for native in incident.native_stacks:
        title = f"**Native stack** ({code(native.core)})" if native.core else "**Native stack**"
        out += [title + (f": {inline(native.signal)}" if native.signal else ""), ""]
        if native.core:
            out += ["The core is the process's memory, secrets included: share its stack, "
                    "not the core.", ""]
        if native.unavailable_reason:
            out += [f"None: {inline(native.unavailable_reason)}", ""]
        out += [f"{frame.level}. {code(frame.function or '??')}"
                + (f" at {code(f'{frame.file}:{frame.line}')}" if frame.file else "")
                for frame in native.frames] + ([""] if native.frames else [])
    for stack in incident.python_stacks:
        thread = f", thread {stack.thread}" if stack.thread else ""
        out += [f"**Python stack** (faulthandler: {inline(stack.error)}{inline(thread)})", ""]
        out += [f"- {code(frame.function)} in {code(frame.file)}, line {frame.line or '???'}"
                for frame in stack.frames] + [""]
    return out


def _sglang(incident: Incident) -> list[str]:
    """What SGLang itself wrote: the last batch lines, the last kernel calls, py-spy's stacks,
    the crash snapshot; each already masked and cut to its budget by serve."""
    records = incident.sglang
    if records is None:
        return []
    out = ["**What SGLang wrote**", ""]
    if records.batches:
        out += [f"Last scheduler batch lines ({len(records.batches)}):", "", *fenced(records.batches), ""]
    for log in records.kernel_api:
        earlier = f", {log.omitted_calls} earlier left out" if log.omitted_calls else ""
        out += [f"Last kernel-API calls in {code(log.source)} (oldest first{inline(earlier)}):", ""]
        for call in log.calls:
            raised = f": raised {code(call.exception)}" if call.exception else ""
            when = f"{code(call.time)} " if call.time else ""
            out.append(f"- {when}{code(call.function)}{raised}")
        last = log.calls[-1]
        if not last.returned and any(call.returned for call in log.calls):
            out += ["", f"The last call, {code(last.function)}, had not returned when the log ended "
                        "(no output logged, as the others have)."]
        if last.lines:
            more = [f"… {last.omitted_lines} more lines"] if last.omitted_lines else []
            out += ["", "<details><summary>The last call's inputs</summary>", "",
                    *fenced(last.lines + more), "</details>"]
        out.append("")
    for stacks in records.py_spy:
        out += [f"py-spy's stacks of pid {stacks.pid}" + (f": {inline(stacks.error)}" if stacks.error else ":"), ""]
        for thread in stacks.threads:
            name = f" {inline(thread.name)}" if thread.name else ""
            out += [f"- thread {code(thread.thread)}{name} ({inline(thread.state)}):",
                    *fenced(thread.frames, indent="  ")]
        out.append("")
    for snapshot in records.crash_snapshots:
        out += [f"Crash snapshot {code(snapshot.path)}" + (f": {inline(snapshot.error)}" if snapshot.error else ""), ""]
        out += [f"- {code(name)}: {code(value)}" for name, value in snapshot.fields.items()]
        if snapshot.omitted_fields:
            out.append(f"- _{snapshot.omitted_fields} more fields in the file_")
        out.append("")
    return out


def log_findings(incident: Incident) -> str:
    """One incident's log findings (or the end of its log), as report.md shows them."""
    return join(_findings(incident))


def markdown(report: RunReport, limit: int = dump_markdown.GITHUB_LIMIT) -> str:
    shown = title(report.summary)
    out: list = [f"### {TITLE}{inline(shown)}", ""]
    if shown != escape(report.summary.strip()):
        out += [inline(report.summary), ""]
    out += [f"Command: {code(shlex.join(report.command))}", "",
            f"Run directory: {code(report.source.path)}", ""]
    head = join(out)
    footer = f"<sub>crashlab {html(report.tool.version)}, run report schema {report.schema_version}</sub>\n"
    return head + incidents(report, limit - len(head) - len(footer)) + footer


def incidents(report: RunReport, limit: int, findings: bool = True) -> str:
    """The incidents and the run's warnings in at most ``limit`` characters, the first FAULT
    dump's triage embedded with whatever room the rest leaves. ``findings=False`` leaves the
    log findings out (see :func:`log_findings`)."""
    faults = [(number, d) for number, i in enumerate(report.incidents) for d in i.dumps
              if d.label == "FAULT" and d.report]
    holder, fault = faults[0] if faults else (None, None)
    out: list = []
    for number, incident in enumerate(report.incidents):
        out += _incident(incident, fault if number == holder else None, len(report.incidents) == 1,
                         findings)
    if report.warnings:
        out += ["**Warnings**", ""] + [f"- {inline(w)}" for w in report.warnings] + [""]
    if fault is None or fault.report is None:
        return cut_to(join(out), limit)
    at = out.index(_DUMP_VIEW)
    head, tail = join(out[:at]), join(out[at + 1:])
    budget = max(limit - len(head) - len(tail) - 200, MIN_DUMP_BUDGET)
    view = dump_markdown.render(fault.report, budget, heading_level=5, footer=False, titled=False)
    return cut_to(head + view + tail, limit)


def summary_lines(report: RunReport) -> list[str]:
    """What ``crashlab serve`` prints at the end: the fault, where the report is, replay."""
    lines = [line for incident in report.incidents for line in incident_lines(incident)]
    lines.append(report_line(report))
    return lines


def incident_lines(incident: Incident) -> list[str]:
    """One incident's lines, which serve prints as soon as it is triaged (before a restart)."""
    lines = [f"incarnation {incident.incarnation}: {incident.kind}: {incident.summary}"]
    if incident.signature is not None:
        lines.append(f"  signature {incident.signature.short}")
    if incident.advice is not None:
        lines.append(f"  advice: {advice_line(incident.advice)}")
    for dump in incident.dumps:
        lines.append(f"  {dump.label:<10} {dump.path}: {'; '.join(dump.reasons)}")
    lines += [f"  replay: {command}" for command in incident.replay_commands]
    return lines


def report_line(report: RunReport) -> str:
    return f"report: {report.source.path}/report.md (JSON: {report.source.path}/report.json)"
