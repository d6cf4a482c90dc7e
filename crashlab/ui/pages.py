"""What each page of the web view shows, read from the index: plain data for the templates.

Counts over time are the index's (crashlab.index.trends); the charts are drawn here."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..errors import BadInput
from ..incidents import DEFAULT_WINDOW
from ..index import trends
from ..index.commands import report_of, show
from ..index.facets import facets_of
from ..index.incidents import incident_of
from ..index.records import Crash, Facets, IncidentShown, Shown, Signature
from ..index.since import parse
from ..index.store import Filters, Index, iso
from ..report.model import Owner, TriageReport
from ..report.run import Incident
from . import charts

#: buckets of a trend (home page) and of a signature's crashes over time
TREND_BUCKETS, HISTORY_BUCKETS = 12, 24
#: signatures on the home page, crashes listed on a signature page
TOP_SIGNATURES, LISTED_CRASHES = 50, 200


@dataclass
class TopSignature:
    hash: str
    title: str
    count: int
    first_seen: str
    last_seen: str
    trend: Any  # Markup: the sparkline


def window_start(since: str) -> float | None:
    """?since=: an age or a date (crashlab list --since's), or 'all'; None: every crash."""
    return None if since == "all" else parse(since)


def top_signatures(index: Index, since: float | None) -> list[TopSignature]:
    """The signatures with the most crashes since SINCE, each with a trend over the window."""
    now = time.time()
    oldest = trends.oldest(index) if since is None else since
    start = now if oldest is None else oldest
    return [TopSignature(hash=t.hash, title=t.title, count=t.count, first_seen=t.first_seen,
                         last_seen=t.last_seen, trend=charts.sparkline(t.buckets))
            for t in trends.top_signatures(index, start, now, TREND_BUCKETS, TOP_SIGNATURES)]


@dataclass
class SignaturePage:
    signature: Signature
    facets: Facets
    history: Any  # Markup
    uptime: Any  # Markup, or None where no crash's uptime is known
    siblings: list[Signature]
    crashes: list[Crash]
    owner: Owner | None


def signature_page(index: Index, prefix: str) -> SignaturePage:
    key = index.signature_hash(prefix)
    signature = index.signature(key)
    crashes = index.crashes(Filters(signature=key, limit=LISTED_CRASHES))
    siblings = [s for s in index.signatures_under(signature.coarse) if s.hash != key] \
        if signature.coarse else []
    return SignaturePage(signature=signature, facets=facets_of(index, key),
                         history=_history(index, key), uptime=_uptime(index, key),
                         siblings=siblings, crashes=crashes,
                         owner=next((o for o in map(_owner, _with_dumps(index, key)) if o), None))


def _history(index: Index, key: str) -> Any:
    counted = trends.history(index, key, HISTORY_BUCKETS)
    labels = [iso(start)[:16].replace("T", " ") for start in counted.starts]
    return charts.bars(labels, counted.counts, "crashes over time")


def _uptime(index: Index, key: str) -> Any:
    """A histogram of the uptime at crash, in hours, of every crash of signature KEY whose uptime
    is known."""
    return uptime_chart([(h.hour, h.crashes) for h in trends.uptime_hours(index, key)])


def uptime_chart(hours: list[tuple[int, int]]) -> Any:
    """12 bars of the crashes by uptime, from (hour, crashes) pairs; None where there are none."""
    if not hours:
        return None
    top = max(h for h, _ in hours)
    width = max(top / 12, 1 / 60)
    counts = [0] * 12
    for h, count in hours:
        counts[min(int(h / width), 11)] += count
    labels = [f"{i * width:.1f} h" for i in range(12)]
    return charts.bars(labels, counts, "uptime at crash (hours)")


#: the newest crashes with a coredump whose reports the signature page reads for the owner
OWNER_FROM = 3


def _with_dumps(index: Index, key: str) -> list[Crash]:
    """The newest OWNER_FROM crashes of signature KEY whose coredump the index still lists: a
    crash without one has no triage to name an owner."""
    ids = [row[0] for row in index.backend.execute(
        "SELECT DISTINCT c.id, c.crashed_at FROM crashes c JOIN crash_files f ON f.crash_id = c.id "
        "WHERE c.signature_hash = ? AND f.kind = 'coredump' AND f.gone_at IS NULL "
        "ORDER BY c.crashed_at DESC, c.id DESC LIMIT ?", (key, OWNER_FROM))]
    return [crash for crash in map(index.crash, ids) if crash is not None]


def _owner(crash: Crash) -> Owner | None:
    """The owner of the crash's first fault, from its report where one names it."""
    triage = triage_of(crash, report_of(crash.source, crash.run_dir))
    return triage.faults[0].owner if triage and triage.faults else None


def triage_of(crash: Crash, report: dict | None) -> TriageReport | None:
    """The triage of CRASH's coredump: the report itself (a coredump recorded on its own), or
    the dump's triage within its run's report."""
    if report is None:
        return None
    if "incidents" in report:
        dumps = {f.path for f in crash.files if f.kind == "coredump"}
        report = next((dump.get("report") for incident in report["incidents"]
                       for dump in incident.get("dumps", []) if dump.get("path") in dumps), None)
        if report is None:
            return None
    try:
        return TriageReport.model_validate(report)
    except ValidationError:
        return None


def run_incident(crash: Crash, report: dict | None) -> Incident | None:
    """The incident of CRASH's incarnation in its run's report: where serve caught a crash that
    left no GPU dump (a Python exception in the scheduler, a signal), its triage is there (the
    exception and traceback, the log findings, the stacks, the request dumps)."""
    for incident in (report or {}).get("incidents", []):
        if incident.get("incarnation") != crash.incarnation:
            continue
        try:
            return Incident.model_validate(incident)
        except ValidationError:
            return None
    return None


@dataclass
class CrashPage:
    shown: Shown
    triage: TriageReport | None
    replay: list[str] = field(default_factory=list)
    #: the run's incident of the crash, shown as its triage where no GPU dump's triage is
    incident: Incident | None = None
    #: cuda-gdb on the crash's coredumps
    debug: list[str] = field(default_factory=list)


def crash_page(index: Index, crash_id: int) -> CrashPage:
    found = show(index, str(crash_id), DEFAULT_WINDOW)
    assert found.crash is not None
    triage = triage_of(found.crash, found.report)
    incident = None if triage is not None else run_incident(found.crash, found.report)
    debug = [f"crashlab debug {f.path}" for f in found.crash.files
             if f.kind == "coredump" and not f.gone]
    return CrashPage(shown=found, triage=triage, replay=_replay(found), incident=incident,
                     debug=debug)


def _replay(found: Shown) -> list[str]:
    """The run's replay lines for the crash's incarnation."""
    assert found.crash is not None
    return [line for incident in (found.report or {}).get("incidents", [])
            if incident.get("incarnation") == found.crash.incarnation
            for line in incident.get("replay_commands", [])]


def crash_file(index: Index, crash_id: int, number: int) -> str:
    """The path of the NUMBERth file the index lists for the crash: only those are served, so a
    URL names no path."""
    crash = index.crash(crash_id)
    if crash is None or not 0 <= number < len(crash.files) or crash.files[number].gone:
        raise BadInput(f"no file {number} of crash {crash_id}")
    return crash.files[number].path


def incident_page(index: Index, crash_id: int) -> IncidentShown | None:
    crash = index.crash(crash_id)
    if crash is None:
        raise BadInput(f"no crash {crash_id} in the index {index.address}")
    return incident_of(index, crash, DEFAULT_WINDOW)


@dataclass
class Event:
    """One line of an incident's timeline: a crash (its first failure) or an Xid line."""

    time: str
    what: str
    host: str
    who: str
    detail: str
    crash_id: int | None = None


def timeline(incident: IncidentShown) -> list[Event]:
    """The incident's crashes and Xid lines in time order: who failed first, then the collateral
    dumps and the driver's lines as they came (a crash before an Xid line at the same second)."""
    events = [Event(time=c.first_failure_at or c.crashed_at, what=c.label or "crash",
                    host=c.host or "unknown", crash_id=c.id, detail=c.summary,
                    who=" ".join(p for p in (c.server_role, c.role, c.rank) if p) or "-")
              for c in incident.crashes]
    events += [Event(time=x.time, what=f"Xid {x.xid}", host=x.host, who=x.device, detail=x.text)
               for x in incident.xids]
    return sorted(events, key=lambda e: (e.time, e.crash_id is None))
