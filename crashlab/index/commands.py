"""What ``crashlab list``, ``show`` and ``gc`` do, as functions returning the objects their
``--json`` prints; the CLI only parses options and renders. ``crashlab list`` itself streams its
rows instead (streamed.py, views.crash_list): ``listing`` is the same CrashList as objects."""

from __future__ import annotations

import json
from pathlib import Path

from .. import __version__
from ..errors import BadInput
from ..incidents import DEFAULT_WINDOW
from ..published import parse
from ..report.run import RunReport
from . import retention
from .facets import facets_of
from .incidents import incident_of
from .records import Collection, CrashList, Shown, Tool
from .store import Filters, Index


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
        return Shown(tool=tool, index=index.address, kind="crash", crash=crash,
                     report=report_of(crash.source, crash.run_dir),
                     signature=index.signature(crash.signature),
                     incident=incident_of(index, crash, window))
    column, key = index.signature_key(what)
    facets = facets_of(index, key, coarse=column == "coarse")
    if column == "coarse":
        return Shown(tool=tool, index=index.address, kind="coarse", coarse=key,
                     signatures=index.signatures_under(key), facets=facets)
    return Shown(tool=tool, index=index.address, kind="signature",
                 signature=index.signature(key), by=index.breakdown(key), facets=facets)


def report_of(source: str, run_dir: str | None) -> dict | None:
    """The crash's report as it can be read now: its run's report.json, or its coredump read
    again. None when it is gone, unreadable or damaged: a run report that is not a RunReport
    (hand-edited, cut short) is no report, as the views read it as one."""
    try:
        if run_dir is not None:
            text = (Path(run_dir) / "report.json").read_text(encoding="utf-8")
            parse(RunReport, text)
            return json.loads(text)
        from ..api import inspect

        return json.loads(inspect(source, sass=True).model_dump_json())
    except Exception:  # noqa: BLE001 - a report moved or deleted leaves the index's facts
        return None


def collect(index: Index, policy: retention.Retention, dry_run: bool) -> Collection:
    decided = retention.plan(index.dumps(), policy)
    if not dry_run:
        retention.apply(decided, index.mark_gone)
    return Collection(tool=Tool(version=__version__), index=index.address, dry_run=dry_run,
                      keep_per_signature=policy.keep_per_signature, max_bytes=policy.max_bytes,
                      kept_bytes=sum(i.size_bytes for i in decided if i.action == "kept"),
                      freed_bytes=sum(i.size_bytes for i in decided if i.action == "deleted"),
                      files=decided)
