"""Terminal views of the index: ``crashlab list`` (one line per crash, like coredumpctl list),
``list --incidents`` (a block per incident), ``crashlab show`` (a crash's facts, incident and
report, a signature's tally, or the signatures of a coarse key) and ``crashlab gc``.
Every value came from a report or a log, so every one is printed as plain text, never markup.

Each line fits the console: a longer one goes on below its first, indented under the value it
continues, broken where every view breaks its lines (crashlab.wrap: after a space, ``/``, ``,``,
``::``, inside a Python module path), never inside a word, a number or an identifier.
``crashlab list`` into a pipe keeps a crash per line, for grep."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..console import line
from ..escape import escape
from ..notation import counted
from ..stdout import write
from ..textsize import with_bytes
from ..wrap import fitted
from .facets import shown_value
from .triage import said

if TYPE_CHECKING:
    from rich.console import Console

    from .records import Collection, Crash, Facet, IncidentShown, Shown, XidSeen

#: ``crashlab list``'s columns: each heading and the listed field (store.LISTED) under it.
LIST_COLUMNS = (("ID", "id"), ("TIME (UTC)", "crashed_at"), ("HOST", "host"),
                ("SIGNATURE", "signature"), ("LABEL", "label"), ("TITLE", "title"))
#: the fields each row is read with: the columns', and the crash's kind (a hang has no dump
#: label: its LABEL is ``hang``)
LIST_FIELDS = (*(field for _, field in LIST_COLUMNS), "kind")


def _label(label: str | None, kind: str | None) -> str | None:
    """A crash's LABEL as list and show print it: its dump's label, or its kind where it has no
    dump (``hang``; ``kernel-log``: triaged from the driver's Xid lines alone)."""
    return label or (kind if kind in ("hang", "kernel-log") else None)


def _say(console: Console, text: str, indent: int, style: str = "") -> None:
    for row in fitted(text, console.width, indent):
        console.print(line((row, style)), soft_wrap=True)


def heading(address: str, console: Console) -> None:
    """The first line of every view: which index it read (the default depends on no folder,
    but CRASHLAB_DB, --db and an old index beside the runs directory all change it)."""
    _say(console, f"index: {address}", 7, "dim")


def _when(iso: str | None) -> str:
    """A UTC time to the second; a tally's times are null only in a hand-made document."""
    return "unknown" if iso is None else iso.replace("T", " ")[:19]


def crash_list(crashes: list[tuple], console: Console) -> None:
    """One line per crash (rows of LIST_FIELDS), each column as wide as its widest cell. The
    heading goes through the console (bold on a terminal); the rows, escaped plain text that is
    never markup, are written as they are: Rich laying out 100,000 lines one by one took seconds,
    so the rows are made a column at a time."""
    ids, times, hosts, signatures, labels, titles, kinds = (zip(*crashes, strict=True) if crashes
                                                            else [()] * 7)
    labels = tuple(map(_label, labels, kinds))
    columns = [list(map(str, ids)), list(map(_when, times)), _shown(hosts, "unknown"),
               _shown(signatures), _shown(labels, "-"), _shown(titles)]
    heading = [name for name, _ in LIST_COLUMNS]
    widths = [max([len(name), *map(len, column)])
              for name, column in zip(heading, columns, strict=True)]
    template = "  ".join(f"%-{width}s" for width in widths[:-1]) + "  %s"
    rows = [(template % row).rstrip() for row in zip(*columns, strict=True)]
    title_at = sum(widths[:-1]) + 2 * (len(widths) - 1)
    headings = [(template % tuple(heading)).rstrip()]
    if console.is_terminal:  # a title too long goes on below, under the titles; a pipe gets
        # a crash per line, for grep
        headings = fitted(headings[0], console.width, title_at)
        rows = [part for row in rows for part in fitted(row, console.width, title_at)]
    for part in headings:
        console.print(line((part, "bold")), soft_wrap=True)
    if rows:
        write(console.file, "\n".join(rows) + "\n")


def _shown(values: tuple[str | None, ...], empty: str = "") -> list[str]:
    """A column of outside text as printed: escaped, EMPTY for none; checked as one text first,
    since nearly every column is printable as it is."""
    texts = [value or empty for value in values]
    return texts if "".join(texts).isprintable() else list(map(escape, texts))


def _member(crash: Crash) -> str:
    """One crash of an incident on one line: when it first failed, where, which server and
    rank, its label and signature."""
    who = " ".join(part for part in (crash.server_role, crash.rank) if part) or "-"
    return (f"crash {crash.id}  {_when(crash.first_failure_at or crash.crashed_at)}  "
            f"{crash.host or 'unknown'}  {who}  {_label(crash.label, crash.kind) or '-'}  {crash.signature}  "
            f"{crash.title}")


def _xid(xid: XidSeen) -> str:
    return f"xid {xid.xid}  {_when(xid.time)}  {xid.host}  {xid.text}"


def incident_list(incidents: list[IncidentShown], console: Console) -> None:
    for number, incident in enumerate(incidents):
        if number:
            console.print()
        _say(console, f"incident {incident.id}  first failure {_when(incident.first_failure)}  "
                      f"{counted(len(incident.crashes), 'crash', 'crashes')}, {counted(len(incident.xids), 'Xid line')} "
                      f"on {', '.join(incident.hosts)}", 2, "bold")
        for crash in incident.crashes:
            _say(console, f"  {_member(crash)}", 4)
        for xid in incident.xids:
            _say(console, f"  {_xid(xid)}", 4)
        for note in incident.notes:
            _say(console, f"  note {note}", 7)


def _incident(view: Shown, shown_crash: Crash, console: Console) -> None:
    incident = view.incident
    if incident is None:
        return
    _field(console, "incident", f"{incident.id} (first failure {_when(incident.first_failure)}, "
                                f"{counted(len(incident.crashes), 'crash', 'crashes')} on {', '.join(incident.hosts)})")
    for crash in incident.crashes:
        if crash.id != shown_crash.id:
            _field(console, "with", _member(crash))
    for xid in incident.xids:
        _field(console, "with", _xid(xid))


def _signatures(view: Shown, console: Console) -> None:
    _field(console, "coarse key", f"{view.coarse}: the same signature without its site, "
                                  f"{counted(len(view.signatures), 'signature')} under it")
    for signature in view.signatures:
        _field(console, "signature", f"{signature.hash} {counted(signature.count, 'crash', 'crashes')}, last "
                                     f"{_when(signature.last_seen)}: {signature.title}")


def _facts(crash: Crash) -> list[tuple[str, str | None]]:
    versions = ", ".join(f"{name} {version}" for name, version in sorted(crash.versions.items())
                         if name in ("sglang", "torch", "flashinfer-python", "sgl-kernel",
                                     "sglang-kernel", "triton", "nvidia-nccl-cu12"))
    rank = " ".join(part for part in (crash.role, crash.rank) if part)
    return [("crash", str(crash.id)), ("time", _when(crash.crashed_at)),
            ("host", crash.host or "unknown"),
            ("gpus", crash.gpus), ("driver", crash.driver), ("versions", versions or None),
            ("process", f"{rank} (pid {crash.pid})" if crash.pid else rank or None),
            ("label", _label(crash.label, crash.kind)), ("deployment", crash.deployment),
            ("recorded by", crash.recorded_by), ("source", crash.source),
            ("summary", crash.summary)]


def _field(console: Console, name: str, value: str) -> None:
    """NAME, and VALUE beside it, continued under itself."""
    first, *more = fitted(f"{name:<12}{value}", console.width, 12)
    console.print(line((first[:12], "bold"), first[12:]), soft_wrap=True)
    for row in more:
        console.print(line(row), soft_wrap=True)


def shown(view: Shown, console: Console) -> None:
    crash, signature = view.crash, view.signature
    if view.kind == "coarse" or signature is None:  # a coarse key's view has no one signature
        _signatures(view, console)
        _facets(view, console)
        return
    if view.kind == "crash" and crash is not None:
        for name, value in _facts(crash):
            if value:
                _field(console, name, value)
        _field(console, "signature", f"{signature.hash} {signature.title}")
        if view.advice is not None:
            from ..report.advice import advice_line  # its model is pydantic's: show only, not list

            _field(console, "advice", advice_line(view.advice))
        _incident(view, crash, console)
        for item in crash.files:
            _field(console, "file", f"{item.path}, {with_bytes(item.size_bytes)}{_fate(item)}")
        if view.triage is not None:
            _field(console, "triage", said(view.triage, crash.id))
        if crash.kind == "hang":
            _hang(view, console)
            return
        if crash.kind == "kernel-log":
            _xid_triage(view, console)
            return
        _report(view, console)
        return
    _field(console, "signature", f"{signature.hash} (version {signature.version}, {signature.kind})")
    _field(console, "title", signature.title)
    _field(console, "crashes", f"{signature.count}, first {_when(signature.first_seen)}, "
                               f"last {_when(signature.last_seen)}")
    _field(console, "search", signature.search)
    if signature.coarse:
        _field(console, "coarse key", signature.coarse)
    for note in signature.body.get("notes") or []:
        _field(console, "note", str(note))
    for column, tallies in view.by.items():
        counted = ", ".join(f"{t.value or 'unknown'}: {t.count} (first {_when(t.first_seen)})"
                            for t in tallies)
        _field(console, f"by {column}", counted)
    _facets(view, console)


def facet_values(facet: Facet) -> str:
    """A facet's values and counts on one line: 'a: 3, b: 1, unknown: 2, 4 more crashes'."""
    listed = [f"{shown_value(facet.name, v.value)}: {v.count}" for v in facet.values]
    if facet.others:
        listed.append(f"{counted(facet.others, 'more crash', 'more crashes')} past these")
    return ", ".join(listed)


def _facets(view: Shown, console: Console) -> None:
    """What stays (the constant fields, with their value) and what varies (each value and its
    count) across the crashes, then the readings with their evidence."""
    facets = view.facets
    if facets is None:
        return
    console.print()
    _say(console, f"what stays across its {counted(facets.crashes, 'crash', 'crashes')}", 2, "bold")
    for facet in facets.fields:
        if facet.constant:
            value = next(v.value for v in facet.values if v.value is not None)
            _say(console, f"  {facet.name}: {shown_value(facet.name, value)} ({facet.known} of "
                          f"{facets.crashes} known)", 4)
    _say(console, "what varies", 2, "bold")
    for facet in facets.fields:
        if not facet.constant and facet.known:
            _say(console, f"  {facet.name}: {facet_values(facet)}", 4)
    unknown = [facet.name for facet in facets.fields if not facet.known]
    if unknown:
        _say(console, f"  unknown in every crash: {', '.join(unknown)}", 4)
    for reading in facets.readings:
        _say(console, f"reading: {reading.text}", 2, "bold")
        for fact in reading.evidence:
            _say(console, f"  - {fact}", 4)


def _fate(item) -> str:
    """What crashlab gc did or may do with a crash's file."""
    if item.gone:
        return ", deleted by crashlab gc" if item.owned else \
            ", forgotten by crashlab gc (recorded by reference, left on disk)"
    return "" if item.owned else ", recorded by reference (gc never deletes it)"


def _hang(view: Shown, console: Console) -> None:
    """A hang's reading as the index keeps it: inspect's view of it, then each rank's timeline."""
    if view.hang is None:
        console.print(line(("reading: the index keeps none that can be read", "dim")))
        return
    from ..hangs import terminal  # the reading's own view, only for show

    console.print()
    terminal.render(view.hang, console)
    terminal.timelines(view.hang, console)


def _xid_triage(view: Shown, console: Console) -> None:
    """A kernel-log crash's triage as the index keeps it: its line, then its decoded Xids."""
    if view.xid_triage is None:
        console.print(line(("report: none, triaged from the driver's Xid lines alone (no GPU "
                            "dump), and the index keeps no triage of it (recorded before it "
                            "kept one); crashlab inspect --kernel-log FILE shows it", "dim")))
        return
    from ..report.terminal import kernel_log  # the log's own view, only for show

    _field(console, "triage", view.xid_triage.summary)
    console.print()
    kernel_log(view.xid_triage.kernel_log, console)


def _report(view: Shown, console: Console) -> None:
    if view.report is None:
        console.print(line(("report: no longer readable at the crash's source", "dim")))
        return
    from ..report import run_views, terminal  # the report's own views, only for show
    from ..report.run import RunReport

    console.print()
    if isinstance(view.report, RunReport):
        for text in run_views.summary_lines(view.report):
            _say(console, text, 2)
        return
    terminal.render(view.report, console)


def collection(result: Collection, console: Console) -> None:
    """A line per file gc deletes, forgets or found missing, then the totals: how many files
    each action took, so that a forgotten file (left on disk) is never counted as freed."""
    words = {"deleted": "would delete" if result.dry_run else "deleted",
             "forgotten": "would forget" if result.dry_run else "forgot", "missing": "missing",
             "kept": "would keep" if result.dry_run else "kept"}
    for item in result.files:
        if item.action != "kept":
            _say(console, f"{words[item.action]} {item.path}: {with_bytes(item.size_bytes)}, "
                          f"crash {item.crash}, {item.why}", 2)
    count = {action: sum(1 for item in result.files if item.action == action) for action in words}
    _say(console, f"{words['deleted']} {counted(count['deleted'], 'file')}, "
                  f"{with_bytes(result.freed_bytes)}; {words['forgotten']} {count['forgotten']} "
                  f"(left on disk); {words['kept']} {counted(count['kept'], 'dump')}, "
                  f"{with_bytes(result.kept_bytes)}", 2)
