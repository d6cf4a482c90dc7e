"""The default view: a rich rendering of a TriageReport for a terminal."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from ..console import plain
from . import text
from .model import Fault, TriageReport

MAX_OTHER_FAULTS = 20
MAX_KERNELS = 20


def render(report: TriageReport, console: Console) -> None:
    console.print(plain(report.summary, style="bold"), soft_wrap=True)  # line 1, whole, for grep and head
    if report.faults:
        primary = report.faults[0]
        console.print(_fault_panel(primary, title=f"fault 1 of {len(report.faults)}"))
        _sass(primary, console)
        _registers(primary, console)
        if len(report.faults) > 1:
            console.print(_other_faults(report.faults[1:], report.omitted_faults))
    if report.debugger is not None:
        _debugger(report, console)
    console.print(_kernels(report))
    console.print(plain(_dump_line(report), style="dim"))
    for warning in report.warnings:
        console.print(plain(f"warning: {warning}", style="yellow"))


def _fault_panel(fault: Fault, title: str) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    grid.add_row("exception", plain(text.exception_line(fault)))
    grid.add_row("kernel", plain(text.kernel_line(fault)))
    grid.add_row("function", plain(text.function_line(fault)))
    grid.add_row("where", plain(text.place(fault)))
    if fault.block_idx is not None:
        cluster = f"  cluster {text.dim(fault.cluster_idx)} of {text.dim(fault.cluster_dim)}" \
            if fault.cluster_idx is not None else ""
        grid.add_row("block", plain(f"{text.dim(fault.block_idx)}  thread {text.dim(fault.thread_idx)}{cluster}"))
        grid.add_row("launch", plain(f"grid {text.dim(fault.grid_dim)} x block {text.dim(fault.block_dim)}"))
    grid.add_row("PC", plain(f"{fault.pc or 'not recorded'} ({fault.pc_source})"))
    grid.add_row("source", plain(text.short_source(fault.sass.source) or "-"))
    grid.add_row("spread", plain(text.spread(fault)))
    if fault.params is not None:
        grid.add_row("params", Text("\n").join(map(plain, text.param_items(fault.params))))
    if fault.cluster_target_block is not None:
        grid.add_row("target", plain(f"cluster target block {text.dim(fault.cluster_target_block)}"))
    for frame in fault.backtrace:
        offset = f" +{frame.function_offset:#x}" if frame.function_offset is not None else ""
        grid.add_row(f"frame #{frame.level}", plain(f"{frame.pc} {text.frame_function(frame)}{offset}"))
    for line in text.candidate_lines(fault):
        grid.add_row("resident", plain(line))
    for note in fault.notes:
        grid.add_row("note", plain(note))
    return Panel(grid, title=title, title_align="left", border_style="red")


def _sass(fault: Fault, console: Console) -> None:
    sass = fault.sass
    if not sass.instructions:
        console.print(plain(f"SASS: unavailable: {sass.unavailable_reason}", style="yellow"))
        return
    table = Table(title=plain(f"SASS ({sass.tool}, {sass.section})"), title_justify="left",
                  show_header=False, box=None, padding=(0, 1))
    table.add_column(no_wrap=True, style="bold red")
    table.add_column(no_wrap=True)
    table.add_column()
    table.add_column(style="dim")
    for ins in sass.instructions:
        style = "bold red" if ins.faulting else ""
        table.add_row(text.marker(ins), plain(ins.address, style=style), plain(ins.text, style=style),
                      plain(text.short_source(ins.source)))
    console.print(table)


def _registers(fault: Fault, console: Console) -> None:
    rows = text.register_rows(fault.registers)
    if rows:
        console.print(f"registers of lane {fault.lane}:", style="bold")
        for row in rows:
            console.print(plain("  " + row))
    predicates = text.predicate_line(fault.predicates)
    if predicates:
        console.print(plain("  " + predicates))


def _debugger(report: TriageReport, console: Console) -> None:
    section = report.debugger
    style = {"ok": "green", "partial": "yellow"}.get(section.status, "red")
    console.print(plain(text.debugger_headline(section), style=f"bold {style}"))
    if section.load is not None:
        console.print(plain(f"  on load: {text.load_line(section.load)}"))
    for view in section.faults:
        disagree = any(a.verdict == "disagree" for a in view.agreement)
        console.print(plain(f"  fault {view.fault + 1}: {text.agreement_line(view.agreement)}",
                           style="bold red" if disagree else ""))
        for frame in view.backtrace[:4]:
            where = f" at {frame.file}:{frame.line}" if frame.file and frame.line else ""
            console.print(plain(f"    #{frame.level} {text.frame_function(frame)}{frame.launch or ''}{where}",
                               style="dim"))
    for problem in section.problems:
        console.print(plain(f"  problem ({problem.kind}): {problem.message}", style="yellow"))


def _other_faults(faults: list[Fault], omitted: int) -> Table:
    table = Table(title=f"other fault groups ({len(faults) + omitted})", title_justify="left")
    for column in ("exception", "kernel", "PC", "where", "blocks", "lanes/warps"):
        table.add_column(column)
    for fault in faults[:MAX_OTHER_FAULTS]:
        kernel = text.kernel_name(fault.kernel.name, fault.grid_id) if fault.kernel else "?"
        kernel += " (deduced from the PC)" if fault.kernel_inferred else ""
        table.add_row(plain(fault.exception.display), plain(kernel),
                      plain(fault.pc or "-"), plain(text.place(fault)), text.span(fault.blocks),
                      f"{fault.faulting_lanes}/{fault.faulting_warps}")
    hidden = len(faults) - MAX_OTHER_FAULTS + omitted
    if hidden > 0:
        table.caption = f"{hidden} more in the JSON report"
    return table


def _kernels(report: TriageReport) -> Table:
    table = Table(title=f"resident kernels ({len(report.kernels)})", title_justify="left")
    for column in ("dev", "grid", "kernel", "grid x block", "SMs", "warps", "warps stand at"):
        table.add_column(column, overflow="fold", no_wrap=column != "kernel")
    for kernel in report.kernels[:MAX_KERNELS]:
        positions = ", ".join(
            f"{p.warps}@{'+' + hex(p.function_offset) if p.function_offset is not None else p.pc}"
            for p in kernel.warps_at[:4]
        )
        table.add_row(str(kernel.device), str(kernel.grid_id),
                      plain(text.kernel_name(kernel.name, kernel.grid_id)),
                      f"{text.dim(kernel.grid_dim)} x {text.dim(kernel.block_dim)}",
                      str(kernel.resident_sms), str(kernel.resident_warps), plain(positions or "-"))
    if len(report.kernels) > MAX_KERNELS:
        table.caption = f"{len(report.kernels) - MAX_KERNELS} more in the JSON report"
    return table


def _dump_line(report: TriageReport) -> str:
    d = report.dump
    flags = ",".join(d.generation_flags) or "none"
    driver = f"driver {d.driver_version} (CUDA {d.cuda_version})" if d.driver_version else "driver unknown"
    return (f"{report.source.path}: {report.source.size_bytes} bytes"
            f"{' gzip' if report.source.compressed else ''}, {d.section_count} sections, "
            f"{driver}, flags {flags}, ELF ABI {d.abi_version}")


