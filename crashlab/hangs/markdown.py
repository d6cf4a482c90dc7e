"""The Markdown view of a hang reading, for an issue body (crashlab report's Hang section): the
verdicts with their evidence, the ranks and their states, each process group's first
disagreement, and how each source fared.

Every name, path and stack came from another machine's processes: each goes through
crashlab.report.markdown_escape (code spans, table cells, running text), never as markup.
"""

from __future__ import annotations

from ..report.markdown_escape import cell, code, inline
from .model import PLACING, HangReading, RankReading
from .verdicts import group_text, pg_text

#: Evidence lines shown per verdict (the bundle's reading has them all).
MAX_EVIDENCE = 10


def render(reading: HangReading, heading_level: int = 4) -> str:
    """The reading as Markdown, its headings at HEADING_LEVEL."""
    mark = "#" * heading_level
    capture = reading.capture
    out = [f"{mark} {inline(reading.headline())}", "",
           f"Capture {code(capture.path)} ({inline(capture.trigger)}, {capture.samples} host "
           f"samples {capture.interval_s:g} s apart, {capture.gpu_dumps} GPU dumps)."]
    if reading.signature is not None:
        out.append(f"Signature {code(reading.signature.short)}.")
    out.append("")
    for verdict in reading.verdicts:
        word = "**" if verdict.kind in PLACING else "_"
        out += [f"{word}{verdict.kind}{word}: {inline(verdict.line)}", ""]
        out += [f"- {inline(fact)}" for fact in verdict.evidence[:MAX_EVIDENCE]]
        if len(verdict.evidence) > MAX_EVIDENCE:
            out.append(f"- _{len(verdict.evidence) - MAX_EVIDENCE} more in the bundle's reading_")
        out.append("")
    out += _ranks(reading, mark) + _groups(reading, mark) + _sources(reading, mark)
    if reading.warnings:
        out += [f"- {inline(warning)}" for warning in reading.warnings] + [""]
    return "\n".join(out) + "\n"


def _progress(rank: RankReading) -> str:
    said = []
    for group in rank.groups:
        last = group.last_enqueued
        if last is None:
            continue
        done = {True: "completed", False: "not completed", None: "completion unknown"}[last.completed]
        said.append(f"{pg_text(group.pg, group.pg_desc)}: {last.op} #{last.seq} ({done})")
    return "; ".join(said) or "no Flight Recorder dump"


def _ranks(reading: HangReading, mark: str) -> list[str]:
    out = [f"{mark}# Ranks", "", "| rank | pid | state | where | newest collective |",
           "|---|---|---|---|---|"]
    for rank in reading.ranks:
        pid = str(rank.pid) if rank.pid is not None else ""
        where = code(rank.where) if rank.where else "unknown"
        out.append(f"| {rank.rank} | {pid} | {rank.state} | {cell(where)} | "
                   f"{cell(inline(_progress(rank)))} |")
    return [*out, ""]


def _groups(reading: HangReading, mark: str) -> list[str]:
    if not reading.groups:
        return []
    out = [f"{mark}# Process groups", ""]
    for group in reading.groups:
        out.append(f"- {inline(group_text(group))}")
        out += [f"  - {inline(side.text())}" for side in group.sides]
    return [*out, ""]


def _sources(reading: HangReading, mark: str) -> list[str]:
    if not reading.sources:
        return []
    out = [f"{mark}# Sources", "", "| source | status | rows | ranks | note |", "|---|---|---|---|---|"]
    for source in reading.sources:
        ranks = ", ".join(map(str, source.ranks)) or "machine"
        out.append(f"| {source.source} | {source.status} | {source.rows} | {ranks} | "
                   f"{cell(inline(source.note or ''))} |")
    return [*out, ""]
