"""What each page of the web view shows, read from the index: typed records for the templates,
with the charts drawn. The index owns every query (crashlab.index.trends, crashlab.index.triage)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadInput
from ..hangs.model import HangReading
from ..incidents import DEFAULT_WINDOW
from ..index import trends
from ..index.commands import show
from ..index.facets import facets_of
from ..index.incidents import incident_of
from ..index.records import Crash, Facets, IncidentShown, Shown, Signature
from ..index.since import parse
from ..index.store import Filters, Index, iso
from ..index.triage import owner_of_signature, run_incident, said, triage_in
from ..report import xidtext
from ..report.model import Owner, TriageReport
from ..report.run import Incident, RunReport
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
                         siblings=siblings, crashes=crashes, owner=owner_of_signature(index, key))


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


@dataclass
class CrashPage:
    shown: Shown
    triage: TriageReport | None
    replay: list[str] = field(default_factory=list)
    #: the run's incident of the crash (its exception and traceback, log findings, stacks,
    #: request dumps): the triage of a crash that left no GPU dump, and beside a dump's triage
    #: what the run saw around it (a rank's dump taken while another raised)
    incident: Incident | None = None
    #: cuda-gdb on the crash's coredumps
    debug: list[str] = field(default_factory=list)
    #: where the triage came from and whether the index keeps it, as every view says it
    triage_said: str | None = None
    #: a hang's reading: its verdicts, ranks and their states, and each rank's timeline
    hang: HangReading | None = None
    #: a kernel-log crash's triage as the index keeps it: its line and its decoded Xids, in
    #: words (crashlab.report.xidtext)
    xid_summary: str | None = None
    xid_lines: list[str] = field(default_factory=list)


def crash_page(index: Index, crash_id: int) -> CrashPage:
    found = show(index, str(crash_id), DEFAULT_WINDOW)
    assert found.crash is not None
    crash = found.crash
    if crash.kind == "hang":
        return CrashPage(shown=found, triage=None, hang=found.hang)
    if crash.kind == "kernel-log":
        xid = found.xid_triage
        return CrashPage(shown=found, triage=None, xid_summary=xid.summary if xid else None,
                         xid_lines=[xidtext.headline(xid.kernel_log),
                                    *xidtext.log_lines(xid.kernel_log)] if xid else [])
    triage = triage_in(crash, found.report)
    run = found.report if isinstance(found.report, RunReport) else None
    incident = run_incident(crash, run) if run is not None else None
    debug = [f"crashlab debug {f.path}" for f in crash.files if f.kind == "coredump" and not f.gone]
    return CrashPage(shown=found, triage=triage,
                     replay=incident.replay_commands if incident is not None else [],
                     incident=incident, debug=debug,
                     triage_said=said(found.triage, crash.id) if found.triage else None)


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
