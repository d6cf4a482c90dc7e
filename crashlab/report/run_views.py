"""Human renderings of a RunReport: report.md (an issue body) and the short terminal summary.

report.md leads with what a maintainer needs (the fault, the exit, the replay command), then
each incident's dumps, log findings with their context, and processes; the FAULT dump's own
triage is embedded through the single-dump Markdown view, given whatever room GitHub's
65,536-character limit leaves.
"""

from __future__ import annotations

import shlex

from . import markdown as dump_markdown
from .markdown_escape import cell, code, cut_to, fenced, html, inline, join
from .run import DumpTriage, Finding, Incident, RunReport

MAX_FINDINGS_SHOWN = 8
MAX_FRAMES_SHOWN = 12
MIN_DUMP_BUDGET = 4_000


def _finding(finding: Finding) -> list[str]:
    rank = f" [{finding.rank}]" if finding.rank else ""
    out = [f"- {code(finding.time)} {inline(f'{finding.kind}{rank}, {finding.stream}')} line "
           f"{finding.line}: {code(finding.text.strip()[:300])}"]
    if finding.frames:
        frames = finding.frames[-MAX_FRAMES_SHOWN:]
        hidden = len(finding.frames) - len(frames)
        body = [f"... {hidden} outer frame(s)"] if hidden else []
        for f in frames:
            body += [f"{f.file}:{f.line} in {f.function}"] + ([f"    {f.code}"] if f.code else [])
    else:
        body = finding.before + [f">>> {finding.text}"] + finding.after
    return out + ["", *fenced([line[:300] for line in body], indent="  "), ""]


def _dumps(dumps: list[DumpTriage]) -> list[str]:
    if not dumps:
        return ["No GPU coredump was collected.", ""]
    rows = ["| # | label | file | what | why |", "|---|---|---|---|---|"]
    for number, dump in enumerate(dumps, 1):
        rows.append(f"| {number} | **{cell(inline(dump.label))}** | {cell(code(dump.path))} | "
                    f"{cell(inline(dump.summary[:300]))} | {cell(inline('; '.join(dump.reasons)))} |")
    return rows + [""]


def _incident(incident: Incident) -> list[str]:
    rows = [
        ("Summary", inline(incident.summary)),
        ("When", inline(f"{incident.started_at} to {incident.ended_at}")),
        ("Exit", inline((incident.exit.describe() if incident.exit else "unknown")
                        + (" (after crashlab's stop signal)" if incident.stopped_by_crashlab else ""))),
        ("Folder", code(incident.directory)),
    ]
    rows += [("Request dump", f"{code(r.path)} ({r.size_bytes} bytes)") for r in incident.request_dumps]
    rows += [("Replay", code(command)) for command in incident.replay_commands]
    rows += [("Note", inline(note)) for note in incident.notes]
    out = [f"#### Incarnation {incident.incarnation}: {inline(incident.kind)}", "", "| | |", "|---|---|"]
    out += [f"| {k} | {cell(v)} |" for k, v in rows] + [""]
    out += ["**Coredumps**", ""] + _dumps(incident.dumps)
    shown = incident.findings[:MAX_FINDINGS_SHOWN]
    if shown:
        out += [f"**Log findings** ({len(incident.findings) + incident.omitted_findings}, "
                f"first {len(shown)} shown; all in report.json)", ""]
        for finding in shown:
            out += _finding(finding)
    out += [f"<details><summary>Processes ({len(incident.processes)})</summary>", "",
            "| pid | ppid | role | ranks | ended | command |", "|---|---|---|---|---|---|"]
    for p in incident.processes:
        out.append(f"| {p.pid} | {p.ppid} | {cell(inline(p.role))} | {cell(inline(str(p.ranks or '')))} | "
                   f"{cell(inline(p.exit.describe() if p.exit else 'running'))} | "
                   f"{cell(code(p.cmdline[:120]))} |")
    return out + ["", "</details>", ""]


def markdown(report: RunReport, limit: int = dump_markdown.GITHUB_LIMIT) -> str:
    head = [f"### crashlab serve: {inline(report.summary)}", "",
            f"Command: {code(shlex.join(report.command))}", "",
            f"Run directory: {code(report.source.path)}", ""]
    for incident in report.incidents:
        head += _incident(incident)
    if report.warnings:
        head += ["**Warnings**", ""] + [f"- {inline(w)}" for w in report.warnings] + [""]
    body = join(head)
    fault = next((d for i in report.incidents for d in i.dumps if d.label == "FAULT" and d.report), None)
    if fault is not None:
        budget = max(limit - len(body) - 200, MIN_DUMP_BUDGET)
        body += join(["", "---", "", f"#### FAULT dump {code(fault.path)}", ""])
        body += dump_markdown.render(fault.report, budget)
    footer = f"\n<sub>crashlab {html(report.tool.version)}, run report schema {report.schema_version}</sub>\n"
    return cut_to(body, limit - len(footer)) + footer


def summary_lines(report: RunReport) -> list[str]:
    """What ``crashlab serve`` prints at the end: the fault, where the report is, replay."""
    lines = []
    for incident in report.incidents:
        lines.append(f"incarnation {incident.incarnation}: {incident.kind}: {incident.summary}")
        for dump in incident.dumps:
            lines.append(f"  {dump.label:<10} {dump.path}: {'; '.join(dump.reasons)}")
        lines += [f"  replay: {command}" for command in incident.replay_commands]
    lines.append(f"report: {report.source.path}/report.md (JSON: {report.source.path}/report.json)")
    return lines
