"""A TriageReport as a GitHub issue body: tables up front, SASS and details folded away.

GitHub refuses an issue body over 65,536 characters. The report is rendered at full detail
first; while it is too long, the least important parts are cut one step at a time (registers of
secondary faults, their SASS, where warps stand, long tables, the primary's registers, its SASS
window), each cut is named in the body, and a last resort truncation says so too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..notation import counted, dim, marker, short_source
from ..textsize import with_bytes
from . import text, why, xidtext
from .advice import advice_line
from .kernellog import KernelLog, XidTriage
from .markdown_escape import cell, code, cut_to, fenced, html, inline, join
from .model import DebuggerSection, Fault, TriageReport
from .signature import CrashSignature
from .suspects import suspect_items

GITHUB_LIMIT = 65_536
#: The head of a two-column table of facts: a header row of its own (an empty one renders as a
#: blank bar above the table, and a screen reader reads nothing for its columns).
FIELD_TABLE = ("| field | value |", "|---|---|")


@dataclass(frozen=True)
class _Detail:
    secondary_registers: bool = True
    secondary_sass: bool = True
    positions: int = 16
    kernel_rows: int = 10_000
    fault_rows: int = 10_000
    primary_registers: bool = True
    primary_sass_context: int = 10_000
    cuts: tuple[str, ...] = ()
    heading: int = 3  # the title's heading level; sections are one below
    footer: bool = True
    titled: bool = True  # False: the title a bold line, the sections at ``heading``

    @property
    def sections(self) -> int:
        """The heading level of the faults and the debugger's section."""
        return self.heading + 1 if self.titled else self.heading


_STEPS = (
    ("registers of secondary faults", dict(secondary_registers=False)),
    ("SASS of secondary faults", dict(secondary_sass=False)),
    ("positions of warps beyond 3 per kernel", dict(positions=3)),
    ("kernel rows beyond 50", dict(kernel_rows=50)),
    ("fault rows beyond 50", dict(fault_rows=50)),
    ("registers of the primary fault", dict(primary_registers=False)),
    ("SASS beyond 4 instructions around the faulting one", dict(primary_sass_context=4)),
    ("kernel rows beyond 5", dict(kernel_rows=5, positions=1)),
    ("fault rows beyond 5", dict(fault_rows=5)),
)


def render(report: TriageReport, limit: int = GITHUB_LIMIT, heading_level: int = 3,
           footer: bool = True, titled: bool = True) -> str:
    """``heading_level``, ``footer`` and ``titled``: for a report embedded in another one (serve's
    report.md, an issue body), whose headings it nests under and whose footer it shares. Untitled,
    its title is a bold line and its sections are at ``heading_level``: embedded under a heading
    of its own, every heading stays at h5 or above (GitHub renders h6 small and grey, as text)."""
    detail = _Detail(heading=heading_level, footer=footer, titled=titled)
    body = _render(report, detail)
    for label, change in _STEPS:
        if len(body) <= limit:
            return body
        detail = replace(detail, cuts=detail.cuts + (label,), **change)
        body = _render(report, detail)
    return cut_to(body, limit)


def signature_text(signature: CrashSignature) -> str:
    """A signature as every Markdown view shows it: the hash (to look it up with) and the title."""
    return f"{code(signature.hash)} {inline(signature.title)}"


def _render(report: TriageReport, detail: _Detail) -> str:
    title = f"crashlab: {inline(report.summary)}"
    out: list[str] = [f"{'#' * detail.heading} {title}" if detail.titled else f"**{title}**", ""]
    if report.signature is not None:
        out += [f"Signature: {signature_text(report.signature)}", ""]
    if report.advice is not None:
        out += [f"Advice: {inline(advice_line(report.advice))}", ""]
    if detail.cuts:
        out += [f"_Shortened to fit GitHub's limit: omitted {'; '.join(detail.cuts)}. "
                "The JSON report has everything._", ""]
    missing_said: dict[str, int] = {}  # each reason a parameter buffer is missing, said once
    for number, fault in enumerate(report.faults[: detail.fault_rows]):
        primary = number == 0
        out += _fault(fault, number + 1, primary, detail, missing_said)
        if primary:
            out += _skipped(report)
    hidden = len(report.faults) - detail.fault_rows + report.omitted_faults
    if hidden > 0:
        out += [f"_{counted(hidden, 'more fault group')} in the JSON report._", ""]
    if report.debugger is not None:
        out += _debugger(report.debugger, detail.sections)
    if report.kernel_log is not None:
        out += kernel_log(report.kernel_log, detail.sections)
    out += _kernels(report, detail)
    out += _dump(report)
    if report.warnings:
        out += ["**Warnings**", ""] + [f"- {inline(w)}" for w in report.warnings] + [""]
    if detail.footer:
        out.append(f"<sub>crashlab {html(report.tool.version)}, report schema {report.schema_version}</sub>")
    return join(out)


def xid_triage(triaged: XidTriage, limit: int = GITHUB_LIMIT) -> str:
    """An incident triaged from a kernel log alone, as an issue body."""
    out = [f"### crashlab: {inline(triaged.summary)}", ""]
    if triaged.signature is not None:
        out += [f"Signature: {signature_text(triaged.signature)}", ""]
    if triaged.advice is not None:
        out += [f"Advice: {inline(advice_line(triaged.advice))}", ""]
    out += kernel_log(triaged.kernel_log, 4)
    out.append(f"<sub>crashlab {html(triaged.tool.version)}</sub>")
    return cut_to(join(out), limit)


def kernel_log(log: KernelLog, heading: int) -> list[str]:
    """The kernel log's Xids, decoded, and how they stand against the dump."""
    return ([f"{'#' * heading} {inline(xidtext.headline(log))}", ""]
            + [f"- {inline(said)}" for said in xidtext.log_lines(log)] + [""])


def _fault(fault: Fault, number: int, primary: bool, detail: _Detail,
           missing_said: dict[str, int]) -> list[str]:
    rows = [
        ("Exception", inline(text.exception_line(fault))),
        ("Kernel", code(text.kernel_line(fault))),
        ("Function", code(text.function_line(fault))),
        ("Where", inline(text.place(fault))),
        ("Block / thread", f"{dim(fault.block_idx)} / {dim(fault.thread_idx)}"),
        ("Launch", f"grid {dim(fault.grid_dim)} x block {dim(fault.block_dim)}"
                   + (f", cluster {dim(fault.cluster_dim)}" if fault.cluster_dim else "")),
        ("PC", f"{code(fault.pc or '-')} ({inline(fault.pc_source)})"),
        ("Source", code(text.source_chain(fault.sass.source))),
        ("Spread", inline(text.spread(fault))),
    ]
    if fault.cluster_idx is not None:
        rows.append(("Cluster", dim(fault.cluster_idx)))
    if fault.params is not None:
        rows.append(("Params", ", ".join(code(item) for item in text.param_items(fault.params))))
    rows += [("Suspect argument", f"{code(argument)}: {inline(reason)}")
             for argument, reason in suspect_items(fault.params)]
    if fault.params_missing:
        first = missing_said.setdefault(fault.params_missing, number)
        rows.append(("Params", inline(fault.params_missing) if first == number
                     else f"not in the dump (as fault {first})"))
    rows += [(f"Frame {f.level}", inline(text.frame_line(f))) for f in fault.backtrace]
    rows += [("Resident warp", inline(line)) for line in text.candidate_lines(fault)]
    if fault.owner is not None:
        rows.append(("Owner", inline(text.owner_line(fault.owner))))
        rows += [("Owner evidence", inline(fact)) for fact in fault.owner.evidence]
    rows += [("Note", inline(note)) for note in fault.notes]
    out = [f"{'#' * detail.sections} Fault {number}: {inline(fault.exception.display)}", "",
           *FIELD_TABLE]
    out += [f"| {k} | {cell(v)} |" for k, v in rows]
    out.append("")
    show_sass = detail.secondary_sass or primary
    if show_sass:
        out += _sass(fault, detail.primary_sass_context if primary else 10_000)
    out += _why(fault)
    if detail.secondary_registers or (primary and detail.primary_registers):
        out += _registers(fault)
    return out


def _sass(fault: Fault, context: int) -> list[str]:
    sass = fault.sass
    if not sass.instructions:
        return [f"SASS unavailable: {inline(sass.unavailable_reason or '')}", ""]
    at = next((i for i, ins in enumerate(sass.instructions) if ins.faulting), 0)
    window = sass.instructions[max(0, at - context) : at + context + 1]
    lines = [f"{marker(ins):>3} {ins.address}  {text.instruction(ins.text):<48} "
             f"{short_source(ins.source)}" for ins in window]
    return ["<details><summary>SASS around the faulting PC "
            f"({html(sass.tool or '')}, <code>{html(text.section_name(sass.section))}</code>)</summary>", "",
            *fenced(lines), "", "</details>", ""]


def _why(fault: Fault) -> list[str]:
    """The explanation under the SASS window, a list item per line; a mismatch is headed as
    one and shows no cause."""
    explanation = fault.explanation
    if explanation is None:
        return []
    items = [f"- {inline(row.label)}: "
             + (code(text.instruction(row.text)) if row.code else inline(row.text))
             for row in why.lines(explanation)]
    return [f"**{inline(why.heading(explanation))}**", "", *items, ""]


def _skipped(report: TriageReport) -> list[str]:
    """Once, where the analysis would stand: what was not computed and why."""
    return [f"_Skipped: {inline(report.analysis_skipped)}._", ""] if report.analysis_skipped else []


def _registers(fault: Fault) -> list[str]:
    out = []
    for k, (heading, values) in enumerate(text.register_blocks(fault)):
        extra = text.predicate_line(fault.predicates) if k == 0 else ""
        summary = inline(heading.rstrip(":"))
        out += [f"<details><summary>{summary[:1].upper()}{summary[1:]}</summary>", "",
                *fenced(text.register_rows(values) + ([extra] if extra else [])), "",
                "</details>", ""]
    return out


def _debugger(section: DebuggerSection, heading: int) -> list[str]:
    """The debugger's view: one agreement item per fault, both values of every disagreement."""
    out = [f"{'#' * heading} {inline(text.debugger_headline(section))}", ""]
    if section.load is not None:
        out += [f"On load: {inline(text.load_line(section.load))}", ""]
    for view in section.faults:
        out += _agreement(view)
    if section.faults:
        out.append("")
    out += [f"- problem ({inline(p.kind)}): {inline(p.message)}" for p in section.problems]
    out += [f"- {inline(text.missing_source_note(source))}" for source in section.missing_sources]
    frames = section.faults[0].backtrace if section.faults else []
    if frames:
        lines = [f"#{f.level} {text.frame_function(f)}{f.launch or ''}"
                 + (f" at {f.file}:{f.line}" if f.file and f.line else "") for f in frames[:10]]
        where = html(text.backtrace_heading(section.faults[0]))
        out += ["", f"<details><summary>Debugger backtrace of fault 1: {where}</summary>", "",
                *fenced(lines),
                "", "</details>"]
    return out + [""]


def _agreement(view) -> list[str]:
    """One list item per fault: the fields that agree and those not compared in one line, then
    every disagreement with both values and why a field was not compared (a table of a column
    per field would overflow GitHub's column)."""
    by_verdict: dict[str, list[str]] = {}
    for a in view.agreement:
        by_verdict.setdefault(a.verdict, []).append(a.field)
    parts = [f"{verdict}: {', '.join(fields)}" for verdict, fields in by_verdict.items()
             if verdict != "disagree"]
    out = [f"- fault {view.fault + 1}: {inline('; '.join(parts) or 'nothing compared')}"]
    out += [f"  - **{inline(a.field)} disagrees**: native {code(a.native or '')}, "
            f"debugger {code(a.debugger or '')}" for a in view.agreement if a.verdict == "disagree"]
    out += [f"  - {inline(a.field)} not compared: {inline(a.note)}"
            for a in view.agreement if a.verdict == "unknown" and a.note]
    return out


def _kernels(report: TriageReport, detail: _Detail) -> list[str]:
    if not report.kernels:
        return []
    title = f"Resident kernels ({len(report.kernels)})"
    listed = report.kernels[: detail.kernel_rows]
    rows = ["| dev | grid | kernel | grid x block | SMs | warps |", "|---|---|---|---|---|---|"]
    for kernel in listed:
        rows.append(f"| {kernel.device} | {kernel.grid_id} | "
                    f"{cell(code(text.kernel_name(kernel.name, kernel.grid_id)))} | "
                    f"{dim(kernel.grid_dim)} x {dim(kernel.block_dim)} | "
                    f"{kernel.resident_sms} | {kernel.resident_warps} |")
    if len(report.kernels) > detail.kernel_rows:
        rows.append(f"\n_{len(report.kernels) - detail.kernel_rows} more in the JSON report._")
    opened = " open" if not report.faults else ""
    return [f"<details{opened}><summary>{title}</summary>", "", *rows, "",
            *_positions(listed, len(report.devices), detail.positions),
            *(_skipped(report) if not report.faults else []), "</details>", ""]


def _positions(kernels, devices: int, limit: int) -> list[str]:
    """Where the warps of each kernel stand, one item per group: function, offset, PC, source
    line and the SASS instruction (what a dump of a hang is read for)."""
    items = []
    for kernel in kernels:
        for position in kernel.warps_at[:limit]:
            instruction = f": {code(text.instruction(position.instruction))}" if position.instruction else ""
            items.append(f"- {inline(text.position_line(kernel, position, devices=devices))}{instruction}")
        if len(kernel.warps_at) > limit:
            items.append(f"- _{len(kernel.warps_at) - limit} more places of grid {kernel.grid_id} "
                         "in the JSON report_")
        items += _waits(kernel)
    return ["**Where warps stand**", "", *items, ""] if items else []


def _waits(kernel) -> list[str]:
    """What the warps wait for: an item per class, its evidence as sub-items."""
    items = []
    for wait in kernel.waits:
        items.append(f"- **{inline(wait.kind)}** (grid {kernel.grid_id}): {inline(wait.summary)}")
        items += [f"  - {inline(item)}" for item in wait.evidence]
    return items


def _dump(report: TriageReport) -> list[str]:
    d = report.dump
    devices = "; ".join(f"{x.index}: {x.name} ({x.sm_type}, {x.num_sms} SMs)" for x in report.devices)
    rows = [
        ("File", f"{code(report.source.path)}, {with_bytes(report.source.size_bytes)}"
                 f"{', gzip' if report.source.compressed else ''}"),
        ("Driver", inline(f"{d.driver_version or '?'} (CUDA {d.cuda_version or '?'})")),
        ("Flags", inline(", ".join(d.generation_flags) or "none recorded")),
        ("Sections", f"{d.section_count}; {counted(d.memory_sections, 'memory section')}, "
                     f"{with_bytes(d.memory_bytes)} (not read)"),
        ("Devices", inline(devices)),
    ]
    return ["<details><summary>Dump</summary>", "", *FIELD_TABLE,
            *[f"| {k} | {cell(v)} |" for k, v in rows], "", "</details>", ""]
