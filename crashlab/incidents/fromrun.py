"""The incident records of one ``crashlab serve`` run: its crashes, one per coredump (with the
dump's label and the rank whose process wrote it) or one per incarnation without a dump, and
the Xid lines it read from the kernel log.

A crash's time is its first failure: the earliest of the log's fault lines and the abnormal
ends of the server's processes. A FAULT dump is finished long after the fault (a
multi-gigabyte dump takes minutes to write), so it takes that time too; a COLLATERAL dump keeps
the time it was finished. The signature is left for the index to fill in.
"""

from __future__ import annotations

from datetime import datetime

from ..launchline import disaggregation_role
from ..report.run import Incident, ProcessRecord, RunReport
from ..supervise.launch import is_sglang
from ..supervise.manifest import Manifest
from .records import Crash, XidLine
from .xid import from_findings



def crashes(manifest: Manifest, report: RunReport, run_dir: str) -> list[Crash]:
    host = manifest.crashlab.host
    common = dict(host=host, run_dir=run_dir, deployment=manifest.options.get("deployment"),
                  role=disaggregation_role(manifest.command) if is_sglang(manifest.command) else None)
    records = []
    for incident in report.incidents:
        first = _first_failure(incident)
        if not incident.dumps:
            records.append(Crash(time=first[0], first_line=incident.summary, rank=first[1],
                                 incarnation=incident.incarnation, **common))
        for dump in incident.dumps:
            written = datetime.fromisoformat(dump.written_at)
            records.append(Crash(
                time=min(first[0], written) if dump.label == "FAULT" else written,
                first_line=dump.summary, rank=_rank_of(dump.writer(incident.processes)),
                label=dump.label, incarnation=incident.incarnation, **common))
    return records


def xid_lines(manifest: Manifest, report: RunReport) -> list[XidLine]:
    return [line for incident in report.incidents
            for line in from_findings(incident.findings, manifest.crashlab.host)]


def _first_failure(incident: Incident) -> tuple[datetime, str | None]:
    """When and on which rank the incarnation first failed."""
    seen = [(datetime.fromisoformat(f.time), f.rank) for f in incident.findings]
    seen += [(datetime.fromisoformat(p.ended_at), p.ranks) for p in incident.processes
             if p.ended_at and p.exit is not None and not p.exit.clean]
    return min(seen, key=lambda s: s[0], default=(datetime.fromisoformat(incident.ended_at), None))


def _rank_of(process: ProcessRecord | None) -> str | None:
    return process.ranks if process else None
