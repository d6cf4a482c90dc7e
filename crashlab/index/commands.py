"""What ``crashlab list``, ``show`` and ``gc`` do, as functions returning the objects their
``--json`` prints; the CLI only parses options and renders. ``crashlab list`` itself streams its
rows instead (streamed.py, views.crash_list): ``listing`` is the same CrashList as objects."""

from __future__ import annotations

from dataclasses import replace

from .. import __version__
from ..advice.decide import ClassedXid, Evidence
from ..errors import BadInput, CrashlabError
from ..incidents import DEFAULT_WINDOW
from ..report.advice import Advice
from ..report.kernellog import XidTriage
from ..report.model import TriageReport
from ..report.run import RunReport
from . import kept, retention
from .facets import facets_of
from .history import of_crash
from .incidents import incident_of
from .records import Collection, Crash, CrashList, IncidentShown, Shown, Tool
from .store import Filters, Index
from .triage import crash_report


def listing(index: Index, filters: Filters) -> CrashList:
    return CrashList(tool=Tool(version=__version__), index=index.address,
                     crashes=index.crashes(filters))


def show(index: Index, what: str, window: float = DEFAULT_WINDOW) -> Shown:
    """WHAT is a crash id (digits; its incident grouped with WINDOW), or a signature hash or
    coarse key (or a prefix of one)."""
    tool = Tool(version=__version__)
    if what.isdigit():
        crash = index.crash(int(what))
        if crash is None:
            raise BadInput(f"no crash {what} in the index {index.address}")
        if crash.kind == "hang":
            from ..hangs.model import HangReading

            return Shown(tool=tool, index=index.address, kind="crash", crash=crash,
                         hang=kept.stored(index, crash.id, "hang", HangReading),
                         signature=index.signature(crash.signature),
                         incident=incident_of(index, crash, window))
        incident = incident_of(index, crash, window)
        if crash.kind == "kernel-log":  # no dump to read: its triage is the log's, as kept
            xid = kept.stored(index, crash.id, "xid_triage", XidTriage)
            return Shown(tool=tool, index=index.address, kind="crash", crash=crash,
                         xid_triage=xid, signature=index.signature(crash.signature),
                         incident=incident, advice=advice_now(index, crash, xid, incident))
        found = crash_report(index, crash)
        return Shown(tool=tool, index=index.address, kind="crash", crash=crash,
                     report=found.report, triage=found.kept,
                     signature=index.signature(crash.signature), incident=incident,
                     advice=advice_now(index, crash, found.report, incident))
    column, key = index.signature_key(what)
    facets = facets_of(index, key, coarse=column == "coarse")
    if column == "coarse":
        return Shown(tool=tool, index=index.address, kind="coarse", coarse=key,
                     signatures=index.signatures_under(key), facets=facets)
    return Shown(tool=tool, index=index.address, kind="signature",
                 signature=index.signature(key), by=index.breakdown(key), facets=facets)


def _logged_xids(crash: Crash, xid: XidTriage | None) -> tuple[ClassedXid, ...]:
    """The Xids of a kernel-log crash: its kept triage's, else (recorded before the index kept
    it) its log's, read again where it is still there (none where it went or cannot be read:
    the advice then stands on the index's history alone)."""
    from ..advice.evidence import of_kernel_log
    from ..incidents.kernellogfile import read_kernel_log

    if xid is not None:
        return of_kernel_log(xid.kernel_log)
    try:
        return of_kernel_log(read_kernel_log(crash.source))
    except CrashlabError:
        return ()


def advice_now(index: Index, crash: Crash,
               report: TriageReport | RunReport | XidTriage | None,
               incident: IncidentShown | None) -> Advice:
    """The advice for CRASH with all the index knows now: its report's evidence, the Xid lines
    of its incident where its report has none, its signature's and its GPU's history."""
    from ..advice.decide import advise
    from ..advice.dump import of_triage
    from ..advice.evidence import classed, of_run_report

    if isinstance(report, RunReport):
        evidence = of_run_report(report, crash.incarnation)
    elif crash.kind == "kernel-log":
        evidence = Evidence(xids=_logged_xids(crash, report if isinstance(report, XidTriage)
                                              else None))
    else:
        evidence = of_triage(report) if isinstance(report, TriageReport) else Evidence()
    xids = evidence.xids
    if not xids and incident is not None:
        xids = tuple(classed(x.xid, x.device) for x in incident.xids)
    history = of_crash(index, crash.id)
    return advise(replace(evidence, xids=xids, earlier=history.earlier, gpu=history.gpu))


def collect(index: Index, policy: retention.Retention, dry_run: bool) -> Collection:
    decided = retention.plan(index.dumps(), policy)
    if not dry_run:
        retention.apply(decided, index.mark_gone)
    return Collection(tool=Tool(version=__version__), index=index.address, dry_run=dry_run,
                      keep_per_signature=policy.keep_per_signature, max_bytes=policy.max_bytes,
                      kept_bytes=sum(i.size_bytes for i in decided if i.action == "kept"),
                      freed_bytes=sum(i.size_bytes for i in decided if i.action == "deleted"),
                      files=decided)
