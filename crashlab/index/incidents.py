"""Incidents over the crash index: the recorded crashes grouped by crashlab.incidents (the ranks
of one server; the servers of one deployment whose first failures fall within the window of the
incident's first), with the recorded Xid lines of their hosts around them. What ``crashlab list
--incidents`` prints, and the incident ``crashlab show ID`` names.
"""

from __future__ import annotations

from .. import __version__
from ..incidents import Crash as GroupedCrash
from ..incidents import Incident, group
from ..incidents.grouping import deployment_key
from .records import Crash, IncidentList, IncidentShown, Tool, XidSeen
from .store import Filters, Index, iso


def listing(index: Index, filters: Filters, window: float) -> IncidentList:
    """The incidents of the crashes FILTERS select (grouped among themselves), newest first;
    FILTERS' limit counts incidents."""
    where, params = index.where(filters)
    if filters.limit:
        found = _newest(index, where, params, window, filters.limit)
    else:
        found = _grouped(index, index.grouping_records(where, params), window)
    return IncidentList(tool=Tool(version=__version__), index=index.address, window_s=window,
                        incidents=_shown(index, list(reversed(found[-filters.limit:]
                                                              if filters.limit else found))))


#: The first span of time ``_newest`` groups, in windows, and how many times longer each next
#: one is: a fleet that never pauses for a window settles only when every crash is grouped,
#: and the attempts before cost it about a seventh more.
FIRST_SPAN_WINDOWS, SPAN_GROWTH = 16, 8


def _newest(index: Index, where: list[str], params: list, window: float,
            limit: int) -> list[Incident]:
    """The newest LIMIT incidents (at least), earliest first, as grouping every selected crash
    would make them, from the crashes of a recent span only: where an incident starts depends
    on the crashes before it, so the span grows until LIMIT of its incidents are settled
    (_settled), or covers every crash."""
    selected = " AND ".join(where)
    oldest, newest = index.backend.execute(
        f"SELECT min(c.first_failure_at), max(c.first_failure_at) FROM crashes c WHERE {selected}",
        tuple(params)).fetchone()
    span = FIRST_SPAN_WINDOWS * window
    while oldest is not None and newest - span > oldest:
        since = newest - span
        records = index.grouping_records(  # whole servers: their ranks' times differ
            [f"({selected})", "COALESCE(c.run_dir, c.source) IN (SELECT COALESCE(c.run_dir, "
             f"c.source) FROM crashes c WHERE {selected} AND c.first_failure_at >= ?)"],
            [*params, *params, since])
        settled = _settled(_grouped(index, records, window), since, window)
        if len(settled) >= limit:
            return settled
        span *= SPAN_GROWTH
    return _grouped(index, index.grouping_records(where, params), window)


def _settled(incidents: list[Incident], since: float, window: float) -> list[Incident]:
    """The incidents (earliest first) of servers that first failed from SINCE on that grouping
    every crash would make the same, Xid lines included.

    In one deployment, a server that first failed more than a window after the one before it
    starts an incident whatever came earlier (windows are anchored at an incident's first
    failure); its incident and the later ones are exact. Before that gap, the servers that failed
    before SINCE, unread, could have anchored other windows. So every incident anchored after
    the last unsettled one of any deployment is exact, and those anchored two windows after it
    also get the same Xid lines (one attaches to the nearest first failure within a window).
    """
    servers: dict[tuple, dict[tuple, float]] = {}  # deployment -> server -> its first failure
    for incident in incidents:
        for crash in incident.members:
            servers.setdefault(deployment_key(crash), {}).setdefault(
                crash.server, crash.time.timestamp())
    unsettled_until = since
    for times in servers.values():
        read = sorted(t for t in times.values() if t >= since)
        gap = next((later for earlier, later in zip(read, read[1:], strict=False)
                    if later - earlier > window), None)
        unsettled_until = max(unsettled_until, max(times.values()) if gap is None
                              else max(t for t in times.values() if t < gap))
    return [incident for incident in incidents
            if incident.first_failure.time.timestamp() > unsettled_until + 2 * window]


def incident_of(index: Index, crash: Crash, window: float) -> IncidentShown | None:
    """The incident CRASH belongs to, among the crashes of its deployment (its --deployment
    label; without one, its host).

    Windows are anchored at an incident's first failure, so where an incident starts depends on
    the crashes before it: the crashes read are those back to the last gap longer than the
    window before CRASH (no incident spans such a gap) and up to a window after it, with every
    crash of the servers among them.
    """
    same = ["c.deployment = ?"] if crash.deployment else ["c.deployment IS NULL", "c.host = ?"]
    key = [crash.deployment or crash.host]
    at = index.backend.execute("SELECT first_failure_at FROM crashes WHERE id = ?",
                               (crash.id,)).fetchone()[0]
    start = at
    for (earlier,) in index.backend.execute(
            f"SELECT c.first_failure_at FROM crashes c WHERE {' AND '.join(same)} AND "
            "c.first_failure_at <= ? ORDER BY c.first_failure_at DESC", (*key, at)):
        if start - earlier > window:
            break
        start = earlier
    near = f"{' AND '.join(same)} AND c.first_failure_at >= ? AND c.first_failure_at <= ?"
    records = index.grouping_records(
        [*same, f"(c.first_failure_at >= ? AND c.first_failure_at <= ? OR c.run_dir IN "
                f"(SELECT c.run_dir FROM crashes c WHERE {near}))"],
        [*key, start, at + window, *key, start, at + window])
    return next((shown for incident in _grouped(index, records, window)
                 if any(member.crash_id == crash.id for member in incident.members)
                 for shown in _shown(index, [incident])), None)


def _grouped(index: Index, records: list[GroupedCrash], window: float) -> list[Incident]:
    """Incidents of RECORDS, earliest first, with the Xid lines recorded within a window of
    them."""
    if not records:
        return []
    times = [record.time.timestamp() for record in records]
    return group(records, index.xid_lines(min(times) - window, max(times) + window), window)


def _shown(index: Index, incidents: list[Incident]) -> list[IncidentShown]:
    """The incidents as printed, with their crashes as the index holds them."""
    crashes = index.crashes_by_id([member.crash_id for incident in incidents
                                   for member in incident.members])
    return [IncidentShown(
        id=incident.id, first_failure=iso(incident.first_failure.time.timestamp()),
        hosts=incident.hosts, notes=incident.notes,
        crashes=[crashes[member.crash_id] for member in incident.members],
        xids=[XidSeen(time=iso(x.time.timestamp()), host=x.host, xid=x.xid, device=x.device,
                      text=x.text, run_dir=x.run_dir) for x in incident.xids])
        for incident in incidents]
