"""IssueReport: what ``crashlab report`` made, as one versioned object (``report-bundle`` schema).

It is report.json inside the bundle and what ``--json`` prints: the title, what was given, where
the body and the bundle are, every member of the bundle, and everything left out of it with where
it is on the machine it was made on. The triage itself is not repeated here: the bundle holds the
run's report.json and each coredump's triage JSON as members of their own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..published import ClosedModel as _Model
from ..report.model import SCHEMA_VERSION, Tool

MemberKind = Literal["report", "run", "environment", "log", "triage", "coredump", "request-dump"]


class Member(_Model):
    name: str = Field(description="its path inside the bundle")
    kind: MemberKind
    size_bytes: int = Field(description="as extracted")
    compressed_bytes: int = Field(description="its share of the bundle (tar header and gzip included)")
    source: str = Field(description="the file it was made from on the machine of the report "
                                    "(cleaned like everything else)")


class LeftOut(_Model):
    path: str = Field(description="where it is on the machine the report was made on (for a "
                                  "member made from a file, such as a coredump's triage, that file)")
    member: str | None = Field(None, description="the name it would have had in the bundle")
    kind: MemberKind
    size_bytes: int
    reason: str


class RequestDumpSummary(_Model):
    path: str
    member: str | None = Field(description="its name in the bundle, null when left out")
    requests: int
    in_flight: int
    layout: str
    replay: str = Field(description="the command that replays it, as a maintainer runs it from "
                                    "the extracted bundle")
    minimized: str | None = Field(None, description="the bundle member of the minimal reproducer "
                                                    "crashlab replay --minimize wrote, if any")


class IssueReport(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    tool: Tool
    title: str = Field(description="the suggested issue title, one line")
    inputs: list[str] = Field(description="what crashlab report was given (cleaned)")
    found: bool = Field(description="whether the inputs show a crash (exit 0) or not (exit 1)")
    anonymized: bool
    body: str = Field(description="the issue body's file")
    body_chars: int = Field(description="at most 65,536, GitHub's limit")
    shortened: list[str] = Field(default_factory=list,
                                 description="what the body left out to fit, in the order it was cut")
    bundle: str = Field(description="the .tar.gz to attach")
    bundle_bytes: int | None = Field(None, description="the bundle's size; null inside the bundle "
                                     "itself, whose size is known only once this file is in it")
    max_bytes: int = Field(description="the size budget the bundle was made under")
    compression: str = Field(description="gzip: GitHub takes .gz attachments, not .zst")
    members: list[Member] = Field(description="every file of the bundle except report.md and "
                                  "report.json, in the bundle's order")
    left_out: list[LeftOut] = Field(default_factory=list)
    request_dumps: list[RequestDumpSummary] = Field(default_factory=list)
    environment_origin: str = Field(description="where the Environment section's facts of the "
                                    "crashed machine came from (the run's environment.json, a "
                                    "coredump's tables), or 'not known: ' and why")
    launch: str | None = Field(None, description="the command that starts the server, shell-quoted, "
                               "secrets masked: the launch line serve kept, else the one a request "
                               "dump recorded, made runnable (its interpreter with -m "
                               "sglang.launch_server); null when neither is known")
