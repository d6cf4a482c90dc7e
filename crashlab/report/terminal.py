"""The default view: a rich rendering of a TriageReport for a terminal.

From ``WIDE`` columns (and into a pipe, 160) tables keep a column per fact; below that, columns
are merged or a fault is a block of lines, so that an 80-column terminal reads the same facts.
Names and paths wrap as every view's lines do (:mod:`crashlab.wrap`), never inside an
identifier or a number, a block's lines under their first; a SASS instruction wraps only where
it is wider than the terminal, between its operands, its next line under it; its source goes on
the line below where both do not fit.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..console import Folded, line, plain
from ..notation import counted, dim, marker, short_source
from ..textsize import with_bytes
from . import text, why, xidtext
from .advice import advice_line
from .kernellog import KernelLog, XidTriage
from .model import DebuggerSection, Fault, Kernel, TriageReport
from .suspects import suspect_items

#: Fault groups shown each in its box (the first also with its SASS, why and registers); the
#: rest a line or two each, up to MAX_OTHER_FAULTS.
MAX_FAULT_BOXES = 3
MAX_OTHER_FAULTS = 20
MAX_KERNELS = 20
MAX_POSITIONS = 4
#: From this width on, tables keep a column per fact.
WIDE = 120
#: A SASS line: marker, address, instruction and source, two spaces apart.
_GAP = "  "


class _Source:
    """An inline chain that shows the files as the line table holds them where the line has
    room, and their basenames where it has not (:func:`text.source_chain`)."""

    def __init__(self, chain):
        self.chain = chain

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(cell_len(short_source(self.chain) or "-"),
                           cell_len(text.source_chain(self.chain))).clamp(max_width=options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _name(text.source_chain(self.chain, options.max_width))


def _name(value: str, style: str = "", indent: int = 0) -> Folded:
    """Outside text as every view wraps it (crashlab.wrap), lines after the first ``indent``."""
    return Folded(plain(value, style=style), indent)


def render(report: TriageReport, console: Console) -> None:
    console.print(plain(report.summary, style="bold"), soft_wrap=True)  # line 1, whole, for grep and head
    if report.signature is not None:
        console.print(_name(f"signature {report.signature.short}", style="dim", indent=2))
    if report.advice is not None:
        console.print(_name(f"advice: {advice_line(report.advice)}", indent=2))
    wide = console.width >= WIDE
    if report.faults:
        primary, count = report.faults[0], len(report.faults)
        missing_said: dict[str, int] = {}  # each reason a parameter buffer is missing, said once
        console.print(_fault_panel(primary, f"fault 1 of {count}", 1, missing_said))
        _sass(primary, console)
        _why(primary, console)
        _skipped(report, console)
        _registers(primary, console)
        for number, fault in enumerate(report.faults[1:MAX_FAULT_BOXES], start=2):
            console.print(_fault_panel(fault, f"fault {number} of {count}", number, missing_said))
            _faulting_line(fault, console)
        if count > MAX_FAULT_BOXES:
            _other_faults(report.faults[MAX_FAULT_BOXES:], report.omitted_faults, console, wide)
    if report.debugger is not None:
        _debugger(report.debugger, console)
    if report.kernel_log is not None:
        kernel_log(report.kernel_log, console)
    console.print(_kernels(report, wide))
    _positions(report, console)
    if not report.faults:
        _skipped(report, console)
    console.print(_name(_dump_line(report), style="dim", indent=2))
    for warning in report.warnings:
        console.print(plain(f"warning: {warning}", style="yellow"))


def xid_triage(triaged: XidTriage, console: Console) -> None:
    """An incident triaged from a kernel log alone."""
    console.print(plain(triaged.summary, style="bold"), soft_wrap=True)
    if triaged.signature is not None:
        console.print(_name(f"signature {triaged.signature.short}", style="dim", indent=2))
    if triaged.advice is not None:
        console.print(_name(f"advice: {advice_line(triaged.advice)}", indent=2))
    kernel_log(triaged.kernel_log, console)


def kernel_log(log: KernelLog, console: Console) -> None:
    """The kernel log's Xids, decoded, and how they stand against the dump."""
    console.print(plain(xidtext.headline(log), style="bold"))
    for said in xidtext.log_lines(log):
        console.print(_name(said, indent=2))


def _fault_panel(fault: Fault, title: str, number: int, missing_said: dict[str, int]) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    grid.add_row("exception", plain(text.exception_line(fault)))
    grid.add_row("kernel", _name(text.kernel_line(fault)))
    grid.add_row("function", _name(text.function_line(fault)))
    grid.add_row("where", _name(text.place(fault)))
    if fault.block_idx is not None:
        cluster = f"  cluster {dim(fault.cluster_idx)} of {dim(fault.cluster_dim)}" \
            if fault.cluster_idx is not None else ""
        grid.add_row("block", plain(f"{dim(fault.block_idx)}  thread {dim(fault.thread_idx)}{cluster}"))
        grid.add_row("launch", plain(f"grid {dim(fault.grid_dim)} x block {dim(fault.block_dim)}"))
    grid.add_row("PC", plain(f"{fault.pc or 'not recorded'} ({fault.pc_source})"))
    grid.add_row("source", _Source(fault.sass.source))
    grid.add_row("spread", plain(text.spread(fault)))
    if fault.params is not None:
        grid.add_row("params", Text("\n").join(map(plain, text.param_items(fault.params))))
    for argument, reason in suspect_items(fault.params):
        grid.add_row("suspect", _name(f"{argument}: {reason}", style="yellow"))
    if fault.params_missing:
        first = missing_said.setdefault(fault.params_missing, number)
        grid.add_row("params", _name(fault.params_missing, style="yellow") if first == number
                     else plain(f"not in the dump (as fault {first})"))
    if fault.cluster_target_block is not None:
        grid.add_row("target", plain(f"cluster target block {dim(fault.cluster_target_block)}"))
    for frame in fault.backtrace:
        grid.add_row(f"frame #{frame.level}", _name(text.frame_line(frame)))
    for candidate in text.candidate_lines(fault):
        grid.add_row("resident", _name(candidate))
    if fault.owner is not None:
        grid.add_row("owner", _name(text.owner_line(fault.owner)))
        for fact in fault.owner.evidence:
            grid.add_row("", _name(fact, style="dim"))
    for note in fault.notes:
        grid.add_row("note", plain(note))
    return Panel(grid, title=title, title_align="left", border_style="red")


def _sass(fault: Fault, console: Console) -> None:
    """One line per instruction where address, instruction and source fit the width; otherwise
    the source goes on its own line under the instruction, which wraps (between its operands,
    under itself) only where it is wider than the terminal."""
    sass = fault.sass
    if not sass.instructions:
        console.print(plain(f"SASS: unavailable: {sass.unavailable_reason}", style="yellow"))
        return
    console.print(_name(f"SASS ({sass.tool}, {text.section_name(sass.section)})"))
    address = max(len(ins.address) for ins in sass.instructions)
    width = max(cell_len(text.instruction(ins.text)) for ins in sass.instructions)
    indent = " " * (3 + len(_GAP) + address + len(_GAP))
    for ins in sass.instructions:
        style = "bold red" if ins.faulting else ""
        where, shown = short_source(ins.source), text.instruction(ins.text)
        one_line = len(indent) + width + len(_GAP) + cell_len(where) <= console.width
        row = line((f"{marker(ins):>3}", "bold red"), _GAP,
                   (ins.address.ljust(address), style), _GAP, (shown, style))
        if one_line and where:
            row.append(" " * (width - cell_len(shown)) + _GAP)
            row.append_text(plain(where, style="dim"))
        console.print(Folded(row, len(indent)))
        if where and not one_line:
            console.print(Folded(line(indent, (where, "dim")), len(indent)))


def _faulting_line(fault: Fault, console: Console) -> None:
    """A later fault group's faulting instruction and the verdict on it: its SASS window,
    registers and whole why are in the Markdown and JSON reports."""
    faulting = next((ins for ins in fault.sass.instructions if ins.faulting), None)
    if faulting is not None:
        console.print(Folded(line(("at ", "bold"), text.instruction(faulting.text)), 5))
    if fault.explanation is not None and fault.explanation.trust != "mismatch":
        verdict = fault.explanation.verdict
        console.print(_name(f"why: {verdict.kind}: {verdict.basis}", indent=5))


def _why(fault: Fault, console: Console) -> None:
    """The explanation under the SASS window: a label per line, its text wrapped beside it; a
    mismatch is headed as one, in words, and shows no cause."""
    explanation = fault.explanation
    if explanation is None:
        return
    mismatch = explanation.trust == "mismatch"
    console.print(plain(why.heading(explanation), style="bold yellow" if mismatch else "bold"))
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)  # the indent
    table.add_column(no_wrap=True, style="cyan")
    table.add_column()
    for row in why.lines(explanation):
        shown = text.instruction(row.text) if row.code else row.text
        table.add_row(" ", plain(row.label), _name(shown, style="yellow" if row.label == "trust" else ""))
    console.print(table)


def _skipped(report: TriageReport, console: Console) -> None:
    """Once, where the analysis would stand: what was not computed (the explanation, what the
    warps wait for) and why."""
    if report.analysis_skipped:
        console.print(_name(f"skipped: {report.analysis_skipped}", style="yellow", indent=2))


def _registers(fault: Fault, console: Console) -> None:
    for k, (heading, values) in enumerate(text.register_blocks(fault)):
        console.print(heading, style="bold")
        for row in text.register_rows(values):
            console.print(plain("  " + row))
        predicates = text.predicate_line(fault.predicates) if k == 0 else ""
        if predicates:
            console.print(plain("  " + predicates))


def _debugger(section: DebuggerSection, console: Console) -> None:
    style = {"ok": "green", "partial": "yellow"}.get(section.status, "red")
    console.print(plain(text.debugger_headline(section), style=f"bold {style}"))
    if section.load is not None:
        console.print(_name(f"  on load: {text.load_line(section.load)}", indent=4))
    for view in section.faults:
        console.print(plain(f"  fault {view.fault + 1}:"))
        console.print(_agreement(view.agreement))
        if view.backtrace:
            console.print(_name(f"    {text.backtrace_heading(view)}:", style="dim", indent=6))
        for frame in view.backtrace[:4]:
            where = f" at {frame.file}:{frame.line}" if frame.file and frame.line else ""
            console.print(_name(f"    #{frame.level} {text.frame_function(frame)}{frame.launch or ''}{where}",
                                style="dim", indent=6))
    for problem in section.problems:
        console.print(_name(f"  problem ({problem.kind}): {problem.message}", style="yellow",
                            indent=4))
    for source in section.missing_sources:
        console.print(_name("  " + text.missing_source_note(source), style="dim", indent=4))


def _agreement(agreements) -> Table:
    """One line per field, its verdict beside it: a note wraps under the verdict, and a field
    where crashlab and cuda-gdb differ stands out in red."""
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)  # the indent
    table.add_column(no_wrap=True)
    table.add_column()
    for agreement in agreements:
        style = "bold red" if agreement.verdict == "disagree" else ""
        table.add_row("   ", plain(agreement.field, style=style),
                      _name(text.agreement_verdict(agreement), style=style))
    return table


def _other_faults(faults: list[Fault], omitted: int, console: Console, wide: bool) -> None:
    """A table from ``WIDE`` columns on; below that, a block of lines per fault group."""
    title = f"more fault groups ({len(faults) + omitted})"
    shown = faults[:MAX_OTHER_FAULTS]
    hidden = len(faults) - MAX_OTHER_FAULTS + omitted
    if wide:
        table = Table(title=title, title_justify="left")
        for column in ("exception", "kernel", "PC", "where", "blocks", "marked"):
            table.add_column(column)
        for fault in shown:
            table.add_row(plain(fault.exception.display), _name(_other_kernel(fault)),
                          _name(text.code_address(fault.function_offset, fault.pc)),
                          plain(text.place(fault)), text.span(fault.blocks),
                          f"{counted(fault.faulting_lanes, 'lane')} in "
                          f"{counted(fault.faulting_warps, 'warp')}")
        if hidden > 0:
            table.caption = f"{hidden} more in the JSON report"
        console.print(table)
        return
    console.print(plain(title, style="bold"))
    for fault in shown:
        console.print(_name(f"  {fault.exception.display} in {_other_kernel(fault)}", indent=4))
        console.print(_name(f"    at {text.code_address(fault.function_offset, fault.pc)}; "
                            f"{text.place(fault)}; blocks {text.span(fault.blocks)}; "
                            f"{counted(fault.faulting_lanes, 'lane')} marked in "
                            f"{counted(fault.faulting_warps, 'warp')}", indent=6))
    if hidden > 0:
        console.print(plain(f"  {hidden} more in the JSON report", style="dim"))


def _other_kernel(fault: Fault) -> str:
    kernel = text.kernel_name(fault.kernel.name, fault.grid_id) if fault.kernel else "?"
    return kernel + (" (deduced from the PC)" if fault.kernel_inferred else "")


def _kernels(report: TriageReport, wide: bool) -> Table:
    """A column per fact from ``WIDE`` columns on; below, the launch and residency in one."""
    table = Table(title=f"resident kernels ({len(report.kernels)})", title_justify="left")
    columns = ("dev", "grid", "kernel", "grid x block", "SMs", "warps") if wide else \
        ("dev", "grid", "kernel", "launch, residency")
    for column in columns:
        table.add_column(column, no_wrap=column in ("dev", "grid", "SMs", "warps"))
    for kernel in report.kernels[:MAX_KERNELS]:
        launch = f"{dim(kernel.grid_dim)} x {dim(kernel.block_dim)}"
        cells: list[str | Folded] = [str(kernel.device), str(kernel.grid_id),
                                         _name(text.kernel_name(kernel.name, kernel.grid_id))]
        if wide:
            cells += [launch, str(kernel.resident_sms), str(kernel.resident_warps)]
        else:
            cells.append(f"{launch}\n{counted(kernel.resident_warps, 'warp')} on "
                         f"{counted(kernel.resident_sms, 'SM')}")
        table.add_row(*cells)
    if len(report.kernels) > MAX_KERNELS:
        table.caption = f"{len(report.kernels) - MAX_KERNELS} more in the JSON report"
    return table


#: Evidence lines shown under a wait class; the JSON report has all of them.
MAX_EVIDENCE = 6


def _positions(report: TriageReport, console: Console) -> None:
    """Where the warps of each listed kernel stand: function, offset, PC, source line, and the
    SASS instruction under it (what a dump of a hang is read for)."""
    listed = [k for k in report.kernels[:MAX_KERNELS] if k.warps_at]
    if not listed:
        return
    console.print(plain("where warps stand", style="bold"))
    for kernel in listed:
        for position in kernel.warps_at[:MAX_POSITIONS]:
            _position(kernel, position, len(report.devices), console)
        if len(kernel.warps_at) > MAX_POSITIONS:
            console.print(plain(f"    {len(kernel.warps_at) - MAX_POSITIONS} more places of grid "
                                f"{kernel.grid_id} in the JSON report", style="dim"))
        _waits(kernel, console)


def _waits(kernel: Kernel, console: Console) -> None:
    """What the warps wait for, a line per class, its evidence under it."""
    for wait in kernel.waits:
        label = f"{wait.kind}: "  # the summary continues under itself, the evidence under it
        console.print(Folded(line("    ", (label, "bold"), wait.summary), 4 + len(label)))
        for item in wait.evidence[:MAX_EVIDENCE]:
            console.print(Folded(line("      ", (item, "dim")), 8))
        if len(wait.evidence) > MAX_EVIDENCE:
            console.print(plain(f"      {len(wait.evidence) - MAX_EVIDENCE} more in the JSON "
                                "report", style="dim"))


def _position(kernel: Kernel, position, devices: int, console: Console) -> None:
    room = console.width - 2
    console.print(_name("  " + text.position_line(kernel, position, room, devices), indent=4))
    if position.instruction:
        console.print(Folded(line("      ", (text.instruction(position.instruction), "dim")), 6))


def _dump_line(report: TriageReport) -> str:
    d = report.dump
    flags = ", ".join(d.generation_flags) or "none"
    driver = f"driver {d.driver_version} (CUDA {d.cuda_version})" if d.driver_version else "driver unknown"
    return (f"{report.source.path}: {with_bytes(report.source.size_bytes)}"
            f"{' gzip' if report.source.compressed else ''}, {d.section_count} sections, "
            f"{driver}, flags {flags}, ELF ABI {d.abi_version}")
