"""The text NCCL's RAS client (``ncclras``, or a plain connection to RAS's port) prints: the
communicators' summary table and the Errors and Warnings that follow it.

The shape is NCCL's own (its RAS documentation, and the format strings of src/ras/client_support.cc
since 2.24)::

    Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
        #  in group  per comm  per node  per comm  in group
        0         1         1         4         4         4   RUNNING  MISMATCH

    Warnings
    ========

    #0-0 (27a079b828ff1a75) MISMATCH
      Communicator ranks have different AllReduce operation counts
      3 ranks have launched up to operation 288686
      Rank 0 has launched up to operation 288685 -- GPU 0 managed by process 1234 on node 10.0.0.1

A block's ranks are communicator ranks (the global rank only in a world-sized communicator).
Lines of no known shape are kept as they are in the block that holds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .clip import clipped

_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+([\d-]+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$")
_BLOCK = re.compile(r"^#(\d+-\d+) \(([0-9a-f]+)\) ([A-Z,]+)\s*$")
_KINDS = ("INCOMPLETE", "DEAD", "TIMEOUT")
_DIFFERENT_COUNTS = re.compile(r"different (\w+) operation counts")
_LAUNCHED_MANY = re.compile(r"^(\d+) ranks have launched up to operation (\d+)")
_LAUNCHED_NONE = re.compile(r"^(\d+) ranks have not launched any operations")
_RANK_LAUNCHED = re.compile(r"^Rank (\d+) has launched up to operation (\d+)")
_RANK_NONE = re.compile(r"^Rank (\d+) has not launched any operations")
_RANK = re.compile(r"^Rank (\d+)\b")
_VERSION = re.compile(r"NCCL version (\S+)")


@dataclass(frozen=True)
class CommunicatorGroup:
    """A row of the summary table: communicators of one size, spread and state."""

    group: int
    communicators: int
    nodes: int
    ranks_per_communicator: int
    status: str
    errors: str


@dataclass(frozen=True)
class OperationCount:
    """``3 ranks have launched up to operation 288686`` (ranks None for a named rank's line)."""

    operation: str
    ranks: int | None
    rank: int | None
    launched_up_to: int


@dataclass
class Issue:
    """A block of Errors or Warnings: a communicator's (``#0-0``) or the job's (INCOMPLETE, DEAD,
    TIMEOUT)."""

    kind: str
    communicator: str | None = None
    lines: list[str] = field(default_factory=list)
    counts: list[OperationCount] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    """The communicator ranks its lines name."""


@dataclass
class RasStatus:
    nccl_version: str | None
    groups: list[CommunicatorGroup]
    issues: list[Issue]

    @property
    def healthy(self) -> bool:
        """Every communicator running with no error, and no issue reported."""
        return bool(self.groups) and not self.issues and all(
            g.status == "RUNNING" and g.errors == "OK" for g in self.groups)


def read(text: str) -> RasStatus:
    version = None
    groups: list[CommunicatorGroup] = []
    issues: list[Issue] = []
    current: Issue | None = None
    operation = ""
    for raw in text.splitlines():
        line = clipped(raw.rstrip())
        stripped = line.strip()
        if version is None and (found := _VERSION.search(line)):
            version = found[1]
        if found := _ROW.match(line):
            groups.append(CommunicatorGroup(int(found[1]), int(found[2]), int(found[3]),
                                            int(found[5]), found[7], found[8]))
        elif found := _BLOCK.match(stripped):
            current = Issue(found[3], communicator=f"#{found[1]} ({found[2]})")
            issues.append(current)
        elif stripped in _KINDS:
            current = Issue(stripped)
            issues.append(current)
        elif stripped in ("Errors", "Warnings") or not stripped or set(stripped) == {"="}:
            current = None if stripped in ("Errors", "Warnings") else current
        elif current is not None and line.startswith(" "):
            operation = _detail(current, stripped, operation)
    return RasStatus(version, groups, issues)


def _detail(issue: Issue, line: str, operation: str) -> str:
    """Adds one indented line to its block; returns the operation its counts are of."""
    issue.lines.append(line)
    if found := _DIFFERENT_COUNTS.search(line):
        return found[1]
    if found := _LAUNCHED_MANY.match(line):
        issue.counts.append(OperationCount(operation, int(found[1]), None, int(found[2])))
    elif found := _LAUNCHED_NONE.match(line):
        issue.counts.append(OperationCount(operation, int(found[1]), None, 0))
    elif found := _RANK_LAUNCHED.match(line):
        issue.counts.append(OperationCount(operation, None, int(found[1]), int(found[2])))
        issue.ranks.append(int(found[1]))
    elif found := _RANK_NONE.match(line):
        issue.counts.append(OperationCount(operation, None, int(found[1]), 0))
        issue.ranks.append(int(found[1]))
    elif found := _RANK.match(line):
        issue.ranks.append(int(found[1]))
    return operation

