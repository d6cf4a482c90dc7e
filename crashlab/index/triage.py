"""The triage the index keeps with each crash: the TriageReport of its coredump, as JSON
compressed with zlib, beside the version of the crashlab that made it. show, report and the web
view read it, and never inspect a recorded dump again.

A crash is recorded with the triage its verb made (serve's of each dump, inspect --record's,
report's); recording it again keeps the newer one, so ``crashlab inspect DUMP --record`` is the
way to triage a dump again (with this crashlab, or with --debugger). A triage made by another
version is shown as it is, that version named. A crash recorded before the index kept triages
(schema migration 7) has none: its first view reads its dump's triage from its run's report, or
inspects its coredump once, and stores it; an index opened read-only (crashlab ui) or one that
refuses the write (a read-only file or role) gets it for that view alone, and the view says so.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..version import __version__

if TYPE_CHECKING:
    from ..report.model import Owner, TriageReport
    from ..report.run import Incident, RunReport
    from .records import Crash, TriageKept
    from .store import Index

#: A stored triage that inflates past this many bytes is damaged (or hostile), not read.
MAX_TRIAGE_BYTES = 256 * 2**20
#: zlib's default level: the 27 KB triage of the 5.1 MB H200 dump torch_flash_oob keeps in 5.7 KB.
LEVEL = 6


def pack(report: TriageReport) -> bytes:
    """The triage as the index stores it."""
    return zlib.compress(report.model_dump_json().encode("utf-8"), LEVEL)


def inflated(blob: bytes) -> bytes | None:
    """A stored document's JSON; None for one that is damaged, cut short, or inflates past
    MAX_TRIAGE_BYTES."""
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(bytes(blob), MAX_TRIAGE_BYTES)
    except zlib.error:
        return None
    return None if inflater.unconsumed_tail or not inflater.eof else text


def unpack(blob: bytes) -> TriageReport | None:
    """A stored triage; None for one that is damaged, cut short, or inflates past
    MAX_TRIAGE_BYTES (then it is made again, as for a crash that has none)."""
    from pydantic import ValidationError

    from ..published import parse
    from ..report.model import TriageReport

    text = inflated(blob)
    try:
        return None if text is None else parse(TriageReport, text)
    except (ValidationError, ValueError):
        return None


@dataclass(frozen=True)
class Stored:
    report: TriageReport
    version: str


def stored(index: Index, crash_id: int) -> Stored | None:
    """The triage the index keeps of crash CRASH_ID; None where it keeps none (or a damaged one)."""
    row = index.backend.execute("SELECT triage, triage_version FROM crashes WHERE id = ?",
                                (crash_id,)).fetchone()
    if row is None or row[0] is None:
        return None
    report = unpack(row[0])
    return None if report is None else Stored(report, row[1] or report.tool.version)


def of_dump(index: Index, digest: str) -> tuple[int, Stored] | None:
    """The newest triage the index keeps of a coredump whose contents' SHA-256 is DIGEST, with
    its crash's id; None where it keeps none."""
    for crash_id, blob, version in index.backend.execute(
            "SELECT id, triage, triage_version FROM crashes WHERE dump_sha256 = ? "
            "AND triage IS NOT NULL ORDER BY recorded_at DESC, id DESC LIMIT 1", (digest,)):
        report = unpack(blob)
        if report is not None:
            return crash_id, Stored(report, version or report.tool.version)
    return None


def holds(index: Index, crash_id: int) -> bool:
    """Whether the index keeps a triage of crash CRASH_ID (read without the triage itself)."""
    return index.backend.execute("SELECT 1 FROM crashes WHERE id = ? AND triage IS NOT NULL",
                                 (crash_id,)).fetchone() is not None


def store(index: Index, crash_id: int, report: TriageReport) -> bool:
    """Keep REPORT as crash CRASH_ID's triage; False where the index is read-only or refuses
    the write (a read-only file, a role without UPDATE): the view goes on without it."""
    if index.read_only:
        return False
    try:
        with index.backend.transaction():
            replace(index, crash_id, report)
    except index.backend.errors:
        return False
    return True


def replace(index: Index, crash_id: int, report: TriageReport) -> None:
    """Within the caller's transaction: crash CRASH_ID's triage is REPORT from now on."""
    index.backend.execute("UPDATE crashes SET triage = ?, triage_version = ? WHERE id = ?",
                          (pack(report), report.tool.version, crash_id))


@dataclass(frozen=True)
class CrashReport:
    """A crash's report as a view reads it: its run's report (a crash serve caught) or its
    coredump's triage, and where that triage came from (None for a crash without one)."""

    report: TriageReport | RunReport | None
    kept: TriageKept | None


def crash_report(index: Index, crash: Crash, inspect: bool = True) -> CrashReport:
    """CRASH's report: its run's report.json while it can be read, else the triage the index
    keeps; for a coredump recorded before the index kept triages, the dump inspected (unless
    INSPECT is false) and stored. A crash whose triage came from its run's report and is not
    kept yet is stored too. Nothing here inspects a dump the index holds a triage of."""
    from .records import TriageKept

    run = run_report(crash.run_dir) if crash.run_dir is not None else None
    if run is not None:
        dump = dump_triage(crash, run)
        if dump is None:  # no dump (a Python exception, a signal), or an unreadable one
            return CrashReport(run, None)
        kept = holds(index, crash.id) or store(index, crash.id, dump)
        return CrashReport(run, TriageKept(made_by=dump.tool.version, stored=kept,
                                           inspected=False))
    found = stored(index, crash.id)
    if found is not None:
        return CrashReport(found.report, TriageKept(made_by=found.version, stored=True,
                                                    inspected=False))
    made = _inspected(crash.source) if inspect and crash.run_dir is None else None
    if made is None:
        return CrashReport(None, None)
    return CrashReport(made, TriageKept(made_by=made.tool.version, inspected=True,
                                        stored=store(index, crash.id, made)))


def _inspected(source: str) -> TriageReport | None:
    """The coredump at SOURCE inspected as inspect does by default; None where it is gone,
    unreadable or damaged (the index's facts stand)."""
    from ..api import inspect

    try:
        return inspect(source, sass=True)
    except Exception:  # noqa: BLE001 - a dump moved, deleted or damaged leaves the index's facts
        return None


def run_report(run_dir: str) -> RunReport | None:
    """The run's report.json; None where it is gone, unreadable, or no RunReport (hand-edited,
    cut short)."""
    from pydantic import ValidationError

    from ..published import parse
    from ..report.run import RunReport

    try:
        return parse(RunReport, (Path(run_dir) / "report.json").read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def dump_triage(crash: Crash, run: RunReport) -> TriageReport | None:
    """The triage of CRASH's coredump within its run's report (the dump whose path, under the
    run directory, is one of the crash's files)."""
    dumps = {f.path for f in crash.files if f.kind == "coredump"}
    return next((dump.report for incident in run.incidents for dump in incident.dumps
                 if str(Path(crash.run_dir or "") / dump.path) in dumps), None)


def triage_in(crash: Crash, report: TriageReport | RunReport | None) -> TriageReport | None:
    """The triage of CRASH's coredump in REPORT (CrashReport.report, Shown.report): REPORT
    itself, or the dump's triage within its run's report."""
    from ..report.run import RunReport

    return dump_triage(crash, report) if isinstance(report, RunReport) else report


#: the newest crashes with a coredump whose triages name a signature's owner
OWNER_FROM = 3


def owner_of_signature(index: Index, key: str) -> Owner | None:
    """The owner of the first fault in the triage of one of the newest OWNER_FROM crashes of
    signature KEY whose coredump the index still lists (a crash without one has no triage to
    name an owner). Triages are read, never made: a coredump recorded before the index kept
    triages and never shown since names none."""
    ids = [row[0] for row in index.backend.execute(
        "SELECT DISTINCT c.id, c.crashed_at FROM crashes c JOIN crash_files f ON f.crash_id = c.id "
        "WHERE c.signature_hash = ? AND f.kind = 'coredump' AND f.gone_at IS NULL "
        "ORDER BY c.crashed_at DESC, c.id DESC LIMIT ?", (key, OWNER_FROM))]
    for crash in filter(None, map(index.crash, ids)):
        triage = triage_in(crash, crash_report(index, crash, inspect=False).report)
        if triage is not None and triage.faults and triage.faults[0].owner is not None:
            return triage.faults[0].owner
    return None


def run_incident(crash: Crash, run: RunReport) -> Incident | None:
    """The incident of CRASH's incarnation in its run's report: where serve caught a crash that
    left no GPU dump (a Python exception in the scheduler, a signal), its triage is there (the
    exception and traceback, the log findings, the stacks, the request dumps)."""
    return next((incident for incident in run.incidents
                 if incident.incarnation == crash.incarnation), None)


def said(kept: TriageKept, crash_id: int) -> str:
    """Where the triage came from, in one line, as every view says it."""
    other = f" (this is {__version__}: crashlab inspect DUMP --record makes it again)" \
        if kept.made_by != __version__ else ""
    made = f"made by crashlab {kept.made_by}{other}"
    if kept.stored:
        return f"{'inspected now and ' if kept.inspected else ''}kept in the index, {made}"
    how = "inspected now" if kept.inspected else "read from the run's report"
    return (f"{how}, {made}; not kept: the index is read-only here (crashlab show {crash_id} "
            "with write access keeps it)")
