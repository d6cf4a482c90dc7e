"""What the index holds and prints: a crash as recorded, its files, its signature's tally, and the
JSON that ``crashlab list``, ``show`` and ``gc`` print (``crashlab schema crash-list`` etc.)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from ..hangs.model import HangReading
from ..published import ClosedModel as _Model
from ..report.advice import Advice
from ..report.kernellog import XidTriage
from ..report.model import Tool, TriageReport
from ..report.run import RunReport
from ..vocabulary import DumpLabel

RecordedBy = Literal["serve", "inspect", "report"]
#: crash: a process's fault or a run's failure; hang: a hang across ranks read from a capture;
#: kernel-log: a GPU fault triaged from the driver's Xid lines alone, with no GPU dump
CrashKind = Literal["crash", "hang", "kernel-log"]


@dataclass(frozen=True)
class Rows:
    """Where each selected crash (crashlab.index.facets)'s id and facet values are read from (a query names it with an
    alias): a table, or a subquery to run with its PARAMS."""

    sql: str
    params: tuple = ()


class CrashFile(_Model):
    """One file of a recorded crash: its coredump, its request dumps, a report."""

    path: str
    """absolute, on the host that recorded it"""
    kind: str
    """coredump, request-dump, report"""
    size_bytes: int
    """The file's size in bytes when it was recorded."""
    gone: bool = False
    """deleted (a file crashlab owns) or forgotten (one it does not) by crashlab gc"""
    owned: bool = False
    """crashlab made it (a run directory's file, a copy taken by inspect --record --copy): gc
    may delete it; a file recorded by reference gc only forgets"""


#: FleetFacts' fields that are columns of crashes (co_resident is a table of its own).
FACT_COLUMNS = ("pc", "function_offset", "kernel", "exception", "source_line", "xid", "esr",
                "gpu_index", "gpu_uuid", "pci_address", "cuda", "flashinfer", "sgl_kernel",
                "model", "tp_size", "pp_size", "ep_size", "uptime_s", "requests_in_dumps",
                "owner")


@dataclass
class FleetFacts:
    """What a crash adds to its signature's facets (crashlab.index.facets): the fault, the device,
    the versions and launch, the server's uptime and load; each None where the crash left no
    word of it."""

    pc: str | None = None
    function_offset: int | None = None
    kernel: str | None = None
    exception: str | None = None
    source_line: str | None = None  # file:line, innermost of the inline chain
    xid: str | None = None  # the Xid numbers the run's kernel log showed, e.g. "13, 43"
    esr: str | None = None  # Xid 13: ESR code (undocumented) and exception, "0x0e, Out Of Range Address"
    gpu_index: int | None = None
    gpu_uuid: str | None = None  # the GPU's serial in the fleet's sense: its UUID
    pci_address: str | None = None
    cuda: str | None = None
    flashinfer: str | None = None
    sgl_kernel: str | None = None
    model: str | None = None
    tp_size: int | None = None
    pp_size: int | None = None
    ep_size: int | None = None
    uptime_s: int | None = None  # from the incarnation's start to its first failure
    requests_in_dumps: int | None = None  # requests in the run's request dumps, all of them
    owner: str | None = None  # Fault.owner: the artifact and its version
    co_resident: list[str] = field(default_factory=list)


@dataclass
class NewCrash:
    """One crash to record: a process's fault (one dump of a rank) or a run's failure with no dump.

    ``key`` names it for good (host, run directory, incarnation, dump; a dump recorded on its own
    by its contents): recording it again, from ``crashlab report`` after ``serve`` did, finds
    it and adds nothing. ``dump_sha256`` is its coredump's contents: a dump recorded on its own
    and any copy of it, under any name, are one crash, also with the crash serve recorded of it.
    """

    key: str
    signature: Any  # crashlab.report.signature.CrashSignature
    crashed_at: float
    recorded_by: str
    source: str
    summary: str
    host: str | None = None
    gpus: str | None = None
    driver: str | None = None
    sglang: str | None = None
    torch: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    run_dir: str | None = None
    incarnation: int | None = None
    pid: int | None = None
    rank: str | None = None
    role: str | None = None
    label: str | None = None
    deployment: str | None = None
    files: list[CrashFile] = field(default_factory=list)
    #: when it first failed (a FAULT dump is finished long after its fault); None: crashed_at
    first_failure_at: float | None = None
    server_role: str | None = None  # prefill, decode or plain; None where not an SGLang server
    facts: FleetFacts = field(default_factory=FleetFacts)
    dump_sha256: str | None = None  # the coredump file's SHA-256 (hex); None without a dump
    #: the triage of its coredump, which the index keeps (crashlab.index.triage); None without one
    triage: TriageReport | None = None
    kind: CrashKind = "crash"
    #: a hang's reading, which the index keeps (crashlab.index.kept); None for a crash
    hang: HangReading | None = None
    #: a kernel-log crash's triage, which the index keeps (crashlab.index.kept); None otherwise
    xid_triage: XidTriage | None = None


class Crash(_Model):
    """One crash as the index recorded it: a process's fault (one dump of a rank) or a run's
    failure with no dump."""

    id: int
    """The crash's number in the index (crashlab show ID)."""
    signature: str
    """the signature's short hash"""
    title: str
    """the signature's title"""
    crashed_at: str
    """ISO 8601, UTC: when the dump was written (the timestamp the driver put in it; for a
    dump without one, the file's modification time), or when the server failed"""
    recorded_by: RecordedBy
    """The command that recorded it: serve, inspect --record or report."""
    host: str | None
    """The host the crash happened on (serve's machine, the host of the run a dump lies in, or
    inspect --record --host); null where unknown, never the machine that read the dump."""
    gpus: str | None
    """GPU names, comma-separated"""
    driver: str | None
    """The NVIDIA driver version, from the run's environment (for a coredump recorded on its
    own: its metadata); null where unknown."""
    sglang: str | None
    """The sglang version from the run's environment; null where unknown."""
    torch: str | None
    """The torch version from the run's environment; null where unknown."""
    versions: dict[str, str]
    """package versions from the run's environment"""
    run_dir: str | None
    """The serve run directory, absolute; null for a coredump recorded on its own."""
    source: str
    """the run directory or the coredump the crash was read from"""
    incarnation: int | None
    """The incarnation of the server within its run; null for a coredump recorded on its own."""
    pid: int | None
    """The process that crashed (for a dump: the pid in its name); null where unknown."""
    rank: str | None
    """That process's SGLang rank tags (TP0, DP1 TP3); null where unknown."""
    role: str | None
    """That process's role in the server (scheduler, detokenizer, ...); null where unknown."""
    label: DumpLabel | Literal["SURVIVED"] | None
    """FAULT, COLLATERAL or UNREADABLE for a GPU dump; SURVIVED for a fault the server lived
    through (an HTTP 500); null for a crash without a dump"""
    deployment: str | None
    """crashlab serve --deployment; null where not given."""
    summary: str
    """The crash's one-line summary, from its report."""
    total_bytes: int
    """The size of all its files when recorded, in bytes."""
    first_failure_at: str | None = None
    """ISO 8601, UTC: when it first failed (the earliest fault line or abnormal process end of
    its server, for a FAULT dump); crashed_at where unknown"""
    server_role: str | None = None
    """the server's --disaggregation-mode (prefill, decode; plain: not disaggregated); null
    where unknown or not SGLang"""
    dump_sha256: str | None = None
    """SHA-256 of its coredump file (hex): a dump and its copies are one crash; null for a
    crash without a dump, or one recorded before crashlab kept it"""
    kind: CrashKind = "crash"
    """crash: a process's fault (one dump of a rank) or a run's failure; hang: a hang across
    ranks, read from a capture (its signature's kind is collective-hang); kernel-log: a GPU
    fault triaged from the driver's Xid lines alone, with no GPU dump (its signature's kind is
    gpu-xid)"""
    files: list[CrashFile] = Field(default_factory=list)
    """Its files: coredump first, then request dumps (a hang's: its capture.json)."""


class Signature(_Model):
    """One signature as the index tallies it: the crashes that share it, first and last seen."""

    hash: str
    """The signature's hash (12 hex digits)."""
    version: int
    """The signature rules' version it was computed with."""
    kind: str
    """The kind of crash it names (gpu-fault, python-exception, ...)."""
    title: str
    """One line for a human."""
    search: str
    """A query for an issue tracker's search box."""
    first_seen: str
    """ISO 8601, UTC"""
    last_seen: str
    """ISO 8601, UTC"""
    count: int
    """How many recorded crashes have this signature."""
    body: dict
    """the signature as crashlab.signature computed it"""
    coarse: str | None = None
    """the hash of the signature without its site (the same bug across releases); null if
    recorded before it existed"""


class Tally(_Model):
    """How many of a signature's crashes share one value (a host, a driver, ...)."""

    value: str | None
    """The value; null for crashes where it is unknown."""
    count: int
    """How many of the signature's crashes have it."""
    first_seen: str | None = None
    """When its first crash of the signature happened (UTC, ISO 8601), as in 'first on driver
    580.95'."""
    last_seen: str | None = None
    """its last crash of the signature (UTC, ISO 8601)"""


class FacetValue(_Model):
    """One value a field takes across the crashes of a signature (or coarse key)."""

    value: str | None
    """The value as the index recorded it; null for the crashes where it is unknown."""
    count: int
    """How many of the crashes have it."""


class Facet(_Model):
    """One field across the crashes of a signature (or coarse key): constant, or varying."""

    name: str
    """The field (e.g. 'pc', 'kernel', 'rank', 'gpu_serial', 'driver', 'uptime_s')."""
    constant: bool
    """True where every crash whose value is known has the same one, and at least one is known."""
    known: int
    """How many of the crashes have a known value."""
    values: list[FacetValue] = Field(default_factory=list)
    """The distinct values, most crashes first (the unknown ones, if any, as a null value)."""
    others: int = 0
    """Crashes whose values are past the last one listed (a field with very many values)."""


class Reading(_Model):
    """A conclusion the facets allow, never more than the data does, with its evidence."""

    kind: str
    """What is read (e.g. 'not-one-device', 'one-device', 'one-driver', 'after-uptime',
    'co-resident'); more may come."""
    text: str
    """The reading in one sentence, e.g. 'same PC, many ranks and GPUs: not one bad device'."""
    evidence: list[str] = Field(default_factory=list)
    """The facts it rests on, one per line (which field, which values, how many crashes)."""


class Facets(_Model):
    """What stays and what varies across the crashes of a signature (or coarse key)."""

    crashes: int
    """How many crashes the facets are taken over."""
    fields: list[Facet] = Field(default_factory=list)
    """One facet per field, constant ones first."""
    readings: list[Reading] = Field(default_factory=list)
    """What the facets allow one to say, with evidence; empty where they allow nothing."""


class CrashList(_Model):
    """What ``crashlab list --json`` prints."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the JSON."""
    index: str
    """where the index is (a password shown as ***)"""
    crashes: list[Crash]
    """newest first"""


class TriageKept(_Model):
    """Where the triage of a crash's coredump shown here came from, and what the index keeps."""

    made_by: str
    """The version of the crashlab that made the triage; one made by another version is shown
    as it is (crashlab inspect DUMP --record makes it again)."""
    stored: bool
    """Whether the index holds this triage: kept when the crash was recorded, or when it was
    first shown. False for a crash recorded before the index kept triages, shown from an index
    opened read-only (crashlab ui) or one that refused the write."""
    inspected: bool
    """Whether the coredump was inspected for this view: only for a crash recorded before the
    index kept triages and not stored since."""


class Shown(_Model):
    """What ``crashlab show --json`` prints: one crash with its report, or one signature's tally."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the JSON."""
    index: str
    """Where the index is (a password shown as ***)."""
    kind: Literal["crash", "signature", "coarse"]
    """What was asked for: a crash id, a signature hash, or a coarse hash."""
    crash: Crash | None = None
    """The crash asked for; null where a signature or coarse key was asked for."""
    report: TriageReport | RunReport | None = None
    """A crash: its run's report.json (a crash serve caught) while it can be read, else the
    triage of its coredump as the index keeps it; null where neither is there."""
    triage: TriageKept | None = None
    """A crash with a coredump's triage: where the triage came from and which crashlab made it;
    null otherwise."""
    xid_triage: XidTriage | None = None
    """A kernel-log crash: its triage from the driver's Xid lines as the index keeps it (the
    line, the decoded Xids and their GPUs); null for other crashes, and for one recorded before
    the index kept it whose log cannot be read now."""
    hang: HangReading | None = None
    """A hang: its reading as the index keeps it (ranks, states, per-sample timelines); null
    for a crash."""
    signature: Signature | None = None
    """the crash's or the signature's; null for a coarse key"""
    by: dict[str, list[Tally]] = Field(default_factory=dict)
    """signatures: crashes per host, gpus, driver, sglang, torch"""
    incident: IncidentShown | None = None
    """a crash: the incident it belongs to"""
    coarse: str | None = None
    """a coarse key: the key"""
    signatures: list[Signature] = Field(default_factory=list)
    """a coarse key: the signatures under it, most crashes first"""
    facets: Facets | None = None
    """A signature or coarse key: what stays and what varies across its crashes; null for a
    crash."""
    advice: Advice | None = None
    """A crash: what to do next and why, weighed now (crashlab.advice): its report's Xid lines
    and known fix, its incident's Xid lines, its signature's earlier crashes and what else
    crashed on its GPU; null for a signature or coarse key."""


class Collected(_Model):
    """One file crashlab gc looked at, and what it did with it."""

    crash: int
    """The id of the crash the file belongs to."""
    signature: str
    """That crash's signature hash."""
    path: str
    """The file, absolute."""
    size_bytes: int
    """The file's size in bytes, as recorded."""
    action: Literal["kept", "deleted", "forgotten", "missing"]
    """kept: within the retention; deleted (or, with --dry-run, to delete): past it, a file
    crashlab owns; forgotten: past it, a file recorded by reference, dropped from the index
    and left on disk; missing: already gone from the disk, marked gone"""
    why: str
    """Why, in one line: its place among its signature's dumps, the size budget, or that it is
    gone."""


class Collection(_Model):
    """What ``crashlab gc --json`` prints."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the JSON."""
    index: str
    """Where the index is (a password shown as ***)."""
    dry_run: bool
    """True with --dry-run: nothing was deleted or forgotten, files marked deleted are those gc
    would delete."""
    keep_per_signature: int
    """--keep: the dumps kept per signature."""
    max_bytes: int | None
    """--max-size in bytes: the disk budget for every kept dump; null where not given."""
    kept_bytes: int
    """Bytes of the files kept."""
    freed_bytes: int
    """Bytes of the files deleted (or, with --dry-run, to delete)."""
    files: list[Collected]
    """Every file looked at, with what was done."""


class XidSeen(_Model):
    """One NVIDIA driver Xid line (NVRM: Xid) crashlab serve read from the kernel log."""

    time: str
    """ISO 8601, UTC: when crashlab serve read it"""
    host: str
    """The host whose kernel log held it."""
    xid: int
    """The Xid number, the driver's error code (e.g. 79: the GPU has fallen off the bus)."""
    device: str
    """what the line's parentheses name: the PCI address"""
    text: str
    """the line from NVRM: Xid on"""
    run_dir: str | None
    """the serve run that read it"""


class IncidentShown(_Model):
    """One incident: crashes of one server's ranks, or of the servers of one deployment, within
    the window of its first failure, with the Xid lines around it."""

    id: str
    """inc- and 12 hex digits, stable once its first failure is recorded"""
    first_failure: str
    """ISO 8601, UTC"""
    hosts: list[str]
    """The hosts whose crashes it holds, sorted."""
    crashes: list[Crash]
    """first failure first; each server's ranks FAULT first, COLLATERAL after"""
    xids: list[XidSeen]
    """in time order"""
    notes: list[str]
    """why each crash and Xid line is part of it"""


class IncidentList(_Model):
    """What ``crashlab list --incidents --json`` prints."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the JSON."""
    index: str
    """where the index is (a password shown as ***)"""
    window_s: float
    """--incident-window"""
    incidents: list[IncidentShown]
    """newest first (by first failure)"""


Shown.model_rebuild()
