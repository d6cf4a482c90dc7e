"""What the index holds and prints: a crash as recorded, its files, its signature's tally, and the
JSON that ``crashlab list``, ``show`` and ``gc`` print (``crashlab schema crash-list`` etc.)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

# env's Tool, not the report model's: reading the index needs no coredump reader
from ..published import ClosedModel as _Model
from ..env.model import Tool

Label = Literal["FAULT", "COLLATERAL", "UNREADABLE"]
RecordedBy = Literal["serve", "inspect", "report"]


class CrashFile(_Model):
    path: str = Field(description="absolute, on the host that recorded it")
    kind: str = Field(description="coredump, request-dump, report")
    size_bytes: int
    gone: bool = Field(False, description="deleted (a file crashlab owns) or forgotten (one it "
                                          "does not) by crashlab gc")
    owned: bool = Field(False, description="crashlab made it (a run directory's file, a copy "
                                           "taken by inspect --record --copy): gc may delete it; "
                                           "a file recorded by reference gc only forgets")


@dataclass
class NewCrash:
    """One crash to record: a process's fault (one dump of a rank) or a run's failure with no dump.

    ``key`` names it for good (host, run directory, incarnation, dump): recording it again, from
    ``crashlab report`` after ``serve`` did, finds it and adds nothing.
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


class Crash(_Model):
    id: int
    signature: str = Field(description="the signature's short hash")
    title: str = Field(description="the signature's title")
    crashed_at: str = Field(description="ISO 8601, UTC")
    recorded_by: RecordedBy
    host: str | None
    gpus: str | None = Field(description="GPU names, comma-separated")
    driver: str | None
    sglang: str | None
    torch: str | None
    versions: dict[str, str] = Field(description="package versions from the run's environment")
    run_dir: str | None
    source: str = Field(description="the run directory or the coredump the crash was read from")
    incarnation: int | None
    pid: int | None
    rank: str | None
    role: str | None
    label: Label | None = Field(description="FAULT, COLLATERAL or UNREADABLE for a GPU dump")
    deployment: str | None
    summary: str
    total_bytes: int
    first_failure_at: str | None = Field(None, description="ISO 8601, UTC: when it first failed "
                                         "(the earliest fault line or abnormal process end of "
                                         "its server, for a FAULT dump); crashed_at where unknown")
    server_role: str | None = Field(None, description="the server's --disaggregation-mode "
                                    "(prefill, decode; plain: not disaggregated); null where "
                                    "unknown or not SGLang")
    files: list[CrashFile] = Field(default_factory=list)


class Signature(_Model):
    hash: str
    version: int
    kind: str
    title: str
    search: str
    first_seen: str = Field(description="ISO 8601, UTC")
    last_seen: str = Field(description="ISO 8601, UTC")
    count: int
    body: dict = Field(description="the signature as crashlab.signature computed it")
    coarse: str | None = Field(None, description="the hash of the signature without its site "
                               "(the same bug across releases); null if recorded before it existed")


class Tally(_Model):
    value: str | None
    count: int
    first_seen: str | None = Field(None, description="its first crash of the signature (UTC, ISO 8601): "
                                                     "\"first on driver 580.95\"")
    last_seen: str | None = Field(None, description="its last crash of the signature (UTC, ISO 8601)")


class CrashList(_Model):
    """What ``crashlab list --json`` prints."""

    schema_version: Literal[1] = 1
    tool: Tool
    index: str = Field(description="where the index is (a password shown as ***)")
    crashes: list[Crash] = Field(description="newest first")


class Shown(_Model):
    """What ``crashlab show --json`` prints: one crash with its report, or one signature's tally."""

    schema_version: Literal[1] = 1
    tool: Tool
    index: str
    kind: Literal["crash", "signature", "coarse"]
    crash: Crash | None = None
    report: dict | None = Field(None, description="the crash's report.json (a run) or triage "
                                                  "(a coredump), when it can still be read")
    signature: Signature | None = Field(None, description="the crash's or the signature's; "
                                        "null for a coarse key")
    by: dict[str, list[Tally]] = Field(default_factory=dict, description="signatures: crashes "
                                       "per host, gpus, driver, sglang, torch")
    incident: "IncidentShown | None" = Field(None, description="a crash: the incident it belongs to")
    coarse: str | None = Field(None, description="a coarse key: the key")
    signatures: list[Signature] = Field(default_factory=list, description="a coarse key: the "
                                        "signatures under it, most crashes first")


class Collected(_Model):
    crash: int
    signature: str
    path: str
    size_bytes: int
    action: Literal["kept", "deleted", "forgotten", "missing"] = Field(
        description="kept: within the retention; deleted (or, with --dry-run, to delete): past "
                    "it, a file crashlab owns; forgotten: past it, a file recorded by reference, "
                    "dropped from the index and left on disk; missing: already gone from the "
                    "disk, marked gone")
    why: str


class Collection(_Model):
    """What ``crashlab gc --json`` prints."""

    schema_version: Literal[1] = 1
    tool: Tool
    index: str
    dry_run: bool
    keep_per_signature: int
    max_bytes: int | None
    kept_bytes: int
    freed_bytes: int
    files: list[Collected]


class XidSeen(_Model):
    time: str = Field(description="ISO 8601, UTC: when crashlab serve read it")
    host: str
    xid: int
    device: str = Field(description="what the line's parentheses name: the PCI address")
    text: str = Field(description="the line from NVRM: Xid on")
    run_dir: str | None = Field(description="the serve run that read it")


class IncidentShown(_Model):
    """One incident: crashes of one server's ranks, or of the servers of one deployment, within
    the window of its first failure, with the Xid lines around it."""

    id: str = Field(description="inc- and 12 hex digits, stable once its first failure is recorded")
    first_failure: str = Field(description="ISO 8601, UTC")
    hosts: list[str]
    crashes: list[Crash] = Field(description="first failure first; each server's ranks FAULT "
                                             "first, COLLATERAL after")
    xids: list[XidSeen] = Field(description="in time order")
    notes: list[str] = Field(description="why each crash and Xid line is part of it")


class IncidentList(_Model):
    """What ``crashlab list --incidents --json`` prints."""

    schema_version: Literal[1] = 1
    tool: Tool
    index: str = Field(description="where the index is (a password shown as ***)")
    window_s: float = Field(description="--incident-window")
    incidents: list[IncidentShown] = Field(description="newest first (by first failure)")


Shown.model_rebuild()
