"""Incidents over the crash index: the recorded crashes grouped by crashlab.incidents (the ranks
of one server; the servers of one deployment whose first failures fall within the window of the
incident's first), with the recorded Xid lines of their hosts around them. What ``crashlab list
--incidents`` prints, and the incident ``crashlab show ID`` names.
"""

from __future__ import annotations

from .. import __version__
from ..incidents import Crash as GroupedCrash, Incident, group
from .records import Crash, IncidentList, IncidentShown, Tool, XidSeen
from .store import Filters, Index, iso


def listing(index: Index, filters: Filters, window: float) -> IncidentList:
    """The incidents of the crashes FILTERS select (grouped among themselves), newest first;
    FILTERS' limit counts incidents."""
    where, params = index.where(filters)
    found = _grouped(index, index.grouping_records(where, params), window)
    return IncidentList(tool=Tool(version=__version__), index=index.address, window_s=window,
                        incidents=_shown(index, list(reversed(found[-filters.limit:]
                                                              if filters.limit else found))))


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
