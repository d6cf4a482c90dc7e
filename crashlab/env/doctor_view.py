"""crashlab doctor in the terminal: one row per check (status, id, message), the fix under each
finding, and a last line that counts them. Messages name paths, versions and symbols read from
the machine: they are plain text, never markup, and wrap as every view's lines do (a path
after its ``/``, never inside a name)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..console import line, plain, wrapped
from .doctor import DoctorReport

STYLES = {"ok": "green", "finding": "bold red", "skipped": "dim"}


def render(report: DoctorReport, console: Console) -> None:
    console.print(line(("crashlab doctor", "bold"), f" ({report.python})"))
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for check in report.checks:
        table.add_row(plain(check.status, STYLES[check.status]), plain(check.id),
                      wrapped(plain(check.message, "dim" if check.status == "skipped" else "")))
        if check.fix:
            table.add_row("", "", wrapped(line(("fix: ", "bold"), check.fix), indent=5))
    console.print(table)
    counts = {status: sum(c.status == status for c in report.checks) for status in STYLES}
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    console.print(line((summary, "bold red" if counts["finding"] else "bold green")))
