"""Crashes of different processes that belong together, grouped into incidents.

Two steps, as a person reading the logs would take them:
- the ranks of one server (one incarnation of one ``crashlab serve`` run) are one unit, ordered
  FAULT first, COLLATERAL after (a rank that hit the exception before the ranks it left waiting
  in a collective), then by time;
- servers of one deployment join the incident of the first server to fail when their own first
  failure comes within the window after its first failure. One deployment is one
  ``--deployment`` label (across hosts: a prefill server and a decode server of a
  PD-disaggregated SGLang on different nodes); servers without a label are one deployment per
  host. A labelled server and an unlabelled one are never grouped: the label says which
  deployment a server belongs to, and its absence says nothing. A dump recorded by hand
  (``inspect --record``, ``report`` on a loose file) without a label is an incident of its own:
  nothing says which server wrote it, or when it failed (its file's time is when it was
  written or copied).
The window is anchored at the incident's first failure, not chained from crash to crash: an
incident spans at most one window, so a server failing every minute does not make one endless
incident.

Driver Xid lines join the incident whose first failure is nearest, on the same host, at most
one window before it or after it (the driver often prints its Xid before the process sees
the CUDA error).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import groupby

from .records import Crash, XidLine
from .window import DEFAULT_WINDOW

_LABEL_ORDER = {"FAULT": 0, "COLLATERAL": 1, "UNREADABLE": 2, None: 3}


@dataclass
class Incident:
    id: str  # stable: derived from the first crash alone, so that later members keep it
    first_failure: Crash
    members: list[Crash]  # the first failure's server first, its ranks FAULT first
    xids: list[XidLine] = field(default_factory=list)  # in time order
    notes: list[str] = field(default_factory=list)  # why each part is here

    @property
    def hosts(self) -> list[str]:
        return sorted({crash.host for crash in self.members})


def incident_id(first: Crash) -> str:
    key = "\0".join((first.host, first.run_dir, str(first.incarnation), first.time.isoformat(),
                     first.rank or "", first.first_line))
    return "inc-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def group(crashes: list[Crash], xids: Sequence[XidLine] = (),
          window: float = DEFAULT_WINDOW) -> list[Incident]:
    """Incidents, earliest first."""
    span = timedelta(seconds=window)
    servers = sorted((_ranks(list(ranks)) for _, ranks in
                      groupby(sorted(crashes, key=lambda c: c.server), key=lambda c: c.server)),
                     key=lambda ranks: (ranks[0].time, ranks[0].server))
    incidents: list[Incident] = []
    open_by_deployment: dict[tuple, Incident] = {}
    for ranks in servers:
        first = ranks[0]
        key = deployment_key(first)
        incident = open_by_deployment.get(key)
        if incident is not None and first.time - incident.first_failure.time <= span:
            _join(incident, ranks, window)
            continue
        incident = Incident(id=incident_id(first), first_failure=first, members=list(ranks))
        incident.notes.append(_server_note(ranks))
        incidents.append(incident)
        open_by_deployment[key] = incident
    _attach_xids(incidents, xids, span)
    return incidents


def _ranks(crashes: list[Crash]) -> list[Crash]:
    """One server's crashes: where a dump says which rank faulted, FAULT first, COLLATERAL
    after, each by time (a collateral dump can be finished before the faulting rank's, larger
    one); where none does, by time."""
    if any(c.label == "FAULT" for c in crashes):
        return sorted(crashes, key=lambda c: (_LABEL_ORDER[c.label], c.time))
    return sorted(crashes, key=lambda c: c.time)


def deployment_key(crash: Crash) -> tuple:
    """Which deployment a crash's server belongs to: its label, or its host without one; a dump
    recorded by hand without a label, none but its own."""
    if crash.deployment:
        return "label", crash.deployment
    return ("alone", crash.server) if crash.by_hand else ("host", crash.host)


def _describe(crash: Crash) -> str:
    if crash.by_hand:
        return f"recorded by hand: {crash.by_hand} {crash.run_dir} on {crash.host}"
    role = f"{crash.role} server" if crash.role and crash.role != "plain" else "server"
    return f"{role} {crash.run_dir} (incarnation {crash.incarnation}) on {crash.host}"


def _server_note(ranks: list[Crash]) -> str:
    """What the incident's crashes of one server are; their summaries are on their own lines."""
    first = ranks[0]
    note = f"{_describe(first)}: first failure at {first.time.isoformat()}"
    labelled = [c for c in ranks if c.label]
    if len(ranks) > 1 and labelled:
        parts = [f"{c.label} {c.rank or '?'}" for c in ranks if c.label]
        note += f"; its ranks FAULT first, COLLATERAL after: {', '.join(parts)}"
    elif len(ranks) > 1:
        note += f"; {len(ranks)} crashes of its ranks, earliest first"
    return note


def _join(incident: Incident, ranks: list[Crash], window: float) -> None:
    first, lead = ranks[0], incident.first_failure
    delay = (first.time - lead.time).total_seconds()
    why = (f"same --deployment label {first.deployment!r}" if first.deployment
           else f"no --deployment label, same host {first.host}")
    incident.members.extend(ranks)
    incident.notes.append(f"{_server_note(ranks)}; joined: {why}, first failure {delay:.1f} s "
                          f"after the incident's first (window {window:g} s)")
    if lead.role == "prefill" and first.role == "decode":
        incident.notes.append(f"the prefill server {lead.run_dir} failed first: the decode "
                              f"server {first.run_dir}'s crash {delay:.1f} s later is likely "
                              "its consequence (a decode server waits on its prefill servers "
                              "for every request's KV cache)")


def _attach_xids(incidents: list[Incident], xids: Sequence[XidLine], span: timedelta) -> None:
    by_host: dict[str, list[Incident]] = {}
    for incident in incidents:  # already by first failure
        for host in incident.hosts:
            by_host.setdefault(host, []).append(incident)
    starts = {host: [i.first_failure.time for i in found] for host, found in by_host.items()}
    for xid in sorted(xids, key=lambda x: x.time):
        found, times = by_host.get(xid.host, []), starts.get(xid.host, [])
        at = bisect_left(times, xid.time)
        near = [i for i in found[max(0, at - 1):at + 1]
                if abs(xid.time - i.first_failure.time) <= span]
        if not near:
            continue
        incident = min(near, key=lambda i: abs(xid.time - i.first_failure.time))
        incident.xids.append(xid)
        offset = (xid.time - incident.first_failure.time).total_seconds()
        when = f"{-offset:.1f} s before" if offset < 0 else f"{offset:.1f} s after"
        incident.notes.append(f"Xid {xid.xid} on {xid.host} ({xid.device}) {when} the first "
                              f"failure joined: same host, within the window: {xid.text}")
