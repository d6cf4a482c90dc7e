"""IssueReport: what ``crashlab report`` made, as one versioned object (``report-bundle`` schema).

It is report.json inside the bundle and what ``--json`` prints: the title, what was given, where
the body and the bundle are, every member of the bundle, and everything left out of it with where
it is on the machine it was made on. The triage itself is not repeated here: the bundle holds the
run's report.json, each coredump's triage JSON and each bisect's result.json as members of their
own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..hangs.model import GroupReading, RankState, SourceStatus, Verdict
from ..published import ClosedModel as _Model
from ..report.advice import Advice
from ..report.kernellog import XidTriage
from ..report.model import SCHEMA_VERSION, Tool

MemberKind = Literal["report", "run", "environment", "log", "triage", "coredump", "request-dump",
                     "bisect", "hang", "hang-capture"]


class Member(_Model):
    """One file of the bundle."""

    name: str
    """its path inside the bundle"""
    kind: MemberKind
    """What the member is: the report, the run's report.json, the environment, a log, a
    coredump's triage JSON, a coredump, a request dump, a bisect's verdict (result.json) or
    step log (steps.jsonl), a hang's reading (hang/reading.json) or a file of its capture."""
    size_bytes: int
    """as extracted"""
    compressed_bytes: int
    """its share of the bundle (tar header and gzip included)"""
    source: str
    """the file it was made from on the machine of the report (cleaned like everything else)"""


class LeftOut(_Model):
    """One file kept out of the bundle, with where it is on the machine the report was made on."""

    path: str
    """where it is on the machine the report was made on (for a member made from a file, such as
    a coredump's triage, that file)"""
    member: str | None = None
    """the name it would have had in the bundle"""
    kind: MemberKind
    """What the file is, as a member's kind."""
    size_bytes: int
    """The file's size in bytes."""
    reason: str
    """Why it was left out, in one line (it does not fit in what is left of --max-size, it could
    not be read or cleaned, ...)."""


class RequestDumpSummary(_Model):
    """One SGLang request dump the report found, with how to replay it."""

    path: str
    """The request dump on the machine the report was made on (cleaned)."""
    member: str | None
    """its name in the bundle, null when left out"""
    requests: int
    """How many requests it holds."""
    in_flight: int
    """How many of them were still running when the server crashed."""
    layout: str
    """Which SGLang writer its keys match, e.g. 'sglang-0.5.12 crash dump'."""
    replay: str
    """the command that replays it, as a maintainer runs it from the extracted bundle"""
    minimized: str | None = None
    """the bundle member of the minimal reproducer crashlab replay --minimize wrote, if any"""


class HangRank(_Model):
    """One rank of a hang, as the report tells it."""

    rank: int
    """its global rank"""
    pid: int | None = None
    """its process, as the capture found it"""
    role: str | None = None
    """its part in the server, where known"""
    state: RankState
    """what the samples say it does (progressing, spinning, stuck, moving, unknown)"""
    where: str | None = None
    """the innermost Python frame of its main thread at the last sample"""


class HangSummary(_Model):
    """A hang capture the report read across its ranks: the verdicts, the ranks and their
    states, the collective the ranks disagree on, and each source's status. The whole reading
    is the bundle's member ``reading``."""

    reading: str | None
    """the reading's member in the bundle (hang/reading.json), null when left out"""
    capture: str
    """the capture's folder on the machine the report was made on (cleaned)"""
    headline: str
    """the reading in one line"""
    found: bool
    """whether a verdict places the hang"""
    signature: str | None = None
    """the hang's signature (its short hash and title), null where no verdict places it"""
    verdicts: list[Verdict] = Field(default_factory=list)
    """most telling first, each with its evidence"""
    ranks: list[HangRank] = Field(default_factory=list)
    """each rank and its state"""
    groups: list[GroupReading] = Field(default_factory=list)
    """each process group across its ranks: the first collective they disagree on"""
    sources: list[SourceStatus] = Field(default_factory=list)
    """each source's rows by status, as the capture recorded them"""


class IssueReport(_Model):
    """What crashlab report made: an issue body and a bundle to attach, with every member of the
    bundle and everything left out."""

    schema_version: Literal[1] = SCHEMA_VERSION
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the report."""
    title: str
    """the suggested issue title, one line"""
    inputs: list[str]
    """what crashlab report was given (cleaned)"""
    found: bool
    """whether the inputs show a crash (exit 0) or not (exit 1)"""
    anonymized: bool
    """True where --anonymize replaced host names, user names, home folders and IP addresses
    throughout."""
    body: str
    """the issue body's file"""
    body_chars: int
    """at most 65,536, GitHub's limit"""
    shortened: list[str] = Field(default_factory=list)
    """what the body left out to fit, in the order it was cut"""
    bundle: str
    """the .tar.gz to attach"""
    bundle_bytes: int | None = None
    """the bundle's size; null inside the bundle itself, whose size is known only once this file
    is in it"""
    max_bytes: int
    """the size budget the bundle was made under"""
    compression: str
    """gzip: GitHub takes .gz attachments, not .zst"""
    members: list[Member]
    """every file of the bundle except report.md and report.json, in the bundle's order"""
    left_out: list[LeftOut] = Field(default_factory=list)
    """Every file kept out of the bundle, with why and where it is."""
    request_dumps: list[RequestDumpSummary] = Field(default_factory=list)
    """Every SGLang request dump found, with the command that replays it."""
    environment_origin: str
    """where the Environment section's facts of the crashed machine came from (the run's
    environment.json, a coredump's tables), or 'not known: ' and why"""
    launch: str | None = None
    """the command that starts the server, shell-quoted, secrets masked: the launch line serve
    kept, else the one a request dump recorded, made runnable (its interpreter with -m
    sglang.launch_server); null when neither is known"""
    host: str | None = None
    """the host the coredumps crashed on as the user gave it (--host), cleaned like the rest:
    the user's word, not read from any file; null when not given"""
    deployment: str | None = None
    """the deployment label the user gave (--deployment); null when not given"""
    hangs: list[HangSummary] = Field(default_factory=list)
    """each hang capture read (a run directory's newest, or a capture's folder given)"""
    advice: Advice | None = None
    """What to do next and why: the last incident's advice as serve wrote it in its run, else the
    first FAULT dump's (crashlab show ID weighs the index's history again); null where neither
    has one (a run report older than the advice)."""
    xid_triage: XidTriage | None = None
    """the incident triaged from --kernel-log, where no GPU dump shows the fault (with one, the
    decoded log and its checks are that dump's triage's kernel_log); null without --kernel-log"""
