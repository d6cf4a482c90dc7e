"""Terminal views of the index: ``crashlab list`` (one line per crash, like coredumpctl list),
``crashlab show`` (a crash's facts and report, or a signature's tally) and ``crashlab gc``.
Every value came from a report or a log, so every one is printed as plain text, never markup."""

from __future__ import annotations

from rich.console import Console

from ..console import line
from .records import Collection, Crash, Shown

LIST_HEADER = ("ID", "TIME (UTC)", "HOST", "SIGNATURE", "LABEL", "TITLE")


def _when(iso: str) -> str:
    return iso.replace("T", " ")[:19]


def crash_list(crashes: list[Crash], console: Console) -> None:
    rows = [(str(c.id), _when(c.crashed_at), c.host or "-", c.signature, c.label or "-", c.title)
            for c in crashes]
    widths = [max(len(row[i]) for row in [LIST_HEADER, *rows]) for i in range(len(LIST_HEADER) - 1)]

    def padded(row: tuple[str, ...]) -> str:
        return "  ".join([cell.ljust(width) for cell, width in zip(row, widths)] + [row[-1]])

    console.print(line((padded(LIST_HEADER), "bold")), soft_wrap=True)
    for row in rows:
        console.print(line(padded(row)), soft_wrap=True)


def _facts(crash: Crash) -> list[tuple[str, str | None]]:
    versions = ", ".join(f"{name} {version}" for name, version in sorted(crash.versions.items())
                         if name in ("sglang", "torch", "flashinfer-python", "sgl-kernel",
                                     "sglang-kernel", "triton", "nvidia-nccl-cu12"))
    rank = " ".join(part for part in (crash.role, crash.rank) if part)
    return [("crash", str(crash.id)), ("time", _when(crash.crashed_at)), ("host", crash.host),
            ("gpus", crash.gpus), ("driver", crash.driver), ("versions", versions or None),
            ("process", f"{rank} (pid {crash.pid})" if crash.pid else rank or None),
            ("label", crash.label), ("deployment", crash.deployment),
            ("recorded by", crash.recorded_by), ("source", crash.source),
            ("summary", crash.summary)]


def _field(console: Console, name: str, value: str) -> None:
    console.print(line((f"{name:<12}", "bold"), value), soft_wrap=True)


def shown(view: Shown, console: Console) -> None:
    signature = view.signature
    if view.kind == "crash":
        for name, value in _facts(view.crash):
            if value:
                _field(console, name, value)
        _field(console, "signature", f"{signature.hash} {signature.title}")
        for item in view.crash.files:
            _field(console, "file", f"{item.path} ({item.size_bytes} bytes)"
                                    f"{' gone (crashlab gc)' if item.gone else ''}")
        _report(view, console)
        return
    _field(console, "signature", f"{signature.hash} (version {signature.version}, {signature.kind})")
    _field(console, "title", signature.title)
    _field(console, "crashes", f"{signature.count}, first {_when(signature.first_seen)}, "
                               f"last {_when(signature.last_seen)}")
    _field(console, "search", signature.search)
    for note in signature.body.get("notes") or []:
        _field(console, "note", str(note))
    for column, tallies in view.by.items():
        counted = ", ".join(f"{t.value or 'unknown'}: {t.count} (first {_when(t.first_seen)})"
                            for t in tallies)
        _field(console, f"by {column}", counted)


def _report(view: Shown, console: Console) -> None:
    if view.report is None:
        console.print(line(("report: no longer readable at the crash's source", "dim")))
        return
    from ..published import parse
    from ..report import run_views, terminal  # the report's own views, only for show
    from ..report.model import TriageReport
    from ..report.run import RunReport

    console.print()
    if view.report.get("source", {}).get("kind") == "run":
        for text in run_views.summary_lines(parse(RunReport, view.report)):
            console.print(line(text), soft_wrap=True)
        return
    terminal.render(parse(TriageReport, view.report), console)


def collection(result: Collection, console: Console) -> None:
    verb = "would delete" if result.dry_run else "deleted"
    for item in result.files:
        if item.action != "kept":
            word = verb if item.action == "deleted" else "missing"
            console.print(line(f"{word} {item.path} ({item.size_bytes} bytes, crash {item.crash}, "
                               f"{item.why})"), soft_wrap=True)
    kept = sum(1 for item in result.files if item.action == "kept")
    console.print(line(f"{verb} {result.freed_bytes} bytes; kept {kept} dump(s), "
                       f"{result.kept_bytes} bytes"), soft_wrap=True)
