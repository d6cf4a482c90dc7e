"""RunReport: what ``crashlab serve`` found in one run directory, as one versioned object.

A run can end with no coredump at all (a CPU-side SIGSEGV, a Python exception), with one, or
with one per tensor-parallel rank, so it is not a TriageReport: it is a run-level object whose
``source.kind`` is ``"run"`` (every JSON crashlab prints names its source's kind) and which *embeds* the TriageReport of every
coredump unchanged. The records it shares with the live manifest (processes, log findings,
files) are defined here so that both speak the same words.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from ..published import ClosedModel as _Model
from ..vocabulary import DumpLabel, Role
from .hoststacks import NativeStack, PythonStack
from .model import SCHEMA_VERSION, Source, Tool, TriageReport
from .signature import CrashSignature


class ExitStatus(_Model):
    code: int | None = Field(None, description="exit code, when the process exited")
    signal: int | None = Field(None, description="signal number, when a signal ended it")
    signal_name: str | None = None
    observed: Literal["waited", "zombie", "log", "unknown"] = Field(
        "waited", description="waited: exact (crashlab reaped it); zombie: read from /proc while "
        "it was a zombie; log: from SGLang's own watchdog line 'Subprocess ... (pid=P) crashed "
        "with exit code X'; unknown: its parent reaped it before crashlab could look")

    @property
    def clean(self) -> bool:
        return self.code == 0

    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by {self.signal_name or 'signal ' + str(self.signal)}"
        if self.code is not None:
            return f"exited with code {self.code}"
        return "ended (status unknown: reaped by its parent)"


class ProcessRecord(_Model):
    pid: int
    ppid: int
    role: str = Field(description="server (the launched command), scheduler, detokenizer, "
                                  "data_parallel_controller, tokenizer_worker, process, ...")
    ranks: str | None = Field(None, description="SGLang's rank tags from the process title (TP0, DP1 TP3)")
    cmdline: str
    started_at: str
    ended_at: str | None = None
    exit: ExitStatus | None = None


class TracebackFrame(_Model):
    file: str
    line: int
    function: str
    code: str | None = None


#: How a traceback that ended without an exception line is quoted (an excerpt, a rank that died
#: mid-print): its text is this phrase and its innermost frame, not a line of the log.
NO_EXCEPTION_LINE = "traceback without an exception line"


class Finding(_Model):
    """A log line that matched a fault pattern, time-stamped, with the lines around it."""

    kind: str = Field(description="cuda-error, coredump, nccl-timeout, xid, scheduler-exception, "
                                  "sglang-crash, fatal, oom, traceback")
    text: str
    stream: str = Field(description="stdout, stderr or kmsg (the kernel log)")
    line: int = Field(description="1-based line number in that stream's log file (lines end at "
                                  "a newline; a carriage return, a progress bar's redraw, ends none)")
    end_line: int | None = Field(None, description="tracebacks: the line of their exception (or "
                                                   "of their last frame, when none was printed)")
    time: str = Field(description="when crashlab read the line (UTC, ISO 8601)")
    rank: str | None = Field(None, description="rank prefix of the line ([rank0]:, TP0), if any")
    before: list[str] = Field(default_factory=list)
    after: list[str] = Field(default_factory=list)
    frames: list[TracebackFrame] = Field(default_factory=list, description="tracebacks: in order")


class FileRecord(_Model):
    path: str = Field(description="relative to the run directory")
    kind: Literal["log", "coredump", "request-dump", "server-info", "launch", "report", "host-core",
                  "environment"]
    size_bytes: int
    sha256: str = Field(description="of the file as collected (logs: once the server has ended)")
    complete: bool = True
    origin: str | None = Field(None, description="where it was written, when crashlab adopted it")
    requests: int | None = Field(None, description="request dumps: how many requests it holds "
                                                   "(None: not read)")


class LogTail(_Model):
    """The last lines of a log, for an incident no pattern explains."""

    stream: str = Field(description="stderr, or stdout when stderr is empty")
    first_line: int = Field(description="1-based line number of the first line kept")
    lines: list[str] = Field(description="secrets masked, each line cut to a readable length")


#: The pid in the names serve asks the driver for (core.%h.%p.%t.nvcudmp; the host may hold dots).
_DUMP_PID = re.compile(r"core\.[^/]*?\.(?P<pid>\d+)\.\d+\.nvcudmp")


def dump_pid(path: str) -> int | None:
    """The pid of the process whose GPU coredump ``path`` is, from the name serve gave it."""
    found = _DUMP_PID.search(path)
    return int(found["pid"]) if found else None


class DumpTriage(_Model):
    path: str
    label: DumpLabel
    reasons: list[str] = Field(default_factory=list)
    written_at: str = Field(description="when the dump file was last written (its mtime)")
    size_bytes: int
    sha256: str
    summary: str
    error: str | None = Field(None, description="why crashlab.inspect could not read it")
    report: TriageReport | None = None

    def writer(self, processes: list[ProcessRecord]) -> ProcessRecord | None:
        """Which of the server's processes wrote this dump (its rank, role), by the pid in its name."""
        pid = dump_pid(self.path)
        return next((process for process in processes if process.pid == pid), None)


class Incident(_Model):
    incarnation: int
    directory: str
    kind: Literal["crash", "dumps"] = Field(
        description="crash: the server ended abnormally; dumps: it was stopped or exited, and "
                    "dumps were collected on the way (a hang captured with dump-now)")
    started_at: str
    ended_at: str
    exit: ExitStatus | None
    stopped_by_crashlab: bool
    summary: str
    dumps: list[DumpTriage] = Field(description="FAULT dumps first (earliest first), then COLLATERAL")
    request_dumps: list[FileRecord] = Field(default_factory=list)
    replay_commands: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    omitted_findings: int = 0
    log_tail: LogTail | None = Field(None, description="when no fault pattern matched: where "
                                     "the server's log ended")
    processes: list[ProcessRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    signature: CrashSignature | None = Field(
        None, description="this incident's signature: its first FAULT dump's, else its log's, "
                          "else the collective its COLLATERAL dump waits in")
    python_stacks: list[PythonStack] = Field(
        default_factory=list, description="what Python's faulthandler printed into the logs "
                                          "(PYTHONFAULTHANDLER, which serve sets)")
    native_stacks: list[NativeStack] = Field(
        default_factory=list, description="per process killed by a host signal: gdb's bt of "
                                          "its host core, or why there is no core")


class Deployment(_Model):
    """Where the server stood, for grouping its crashes with those of other servers."""

    host: str
    label: str | None = Field(None, description="crashlab serve --deployment, if given")
    role: Role | None = Field(
        None, description="SGLang's --disaggregation-mode (plain: not disaggregated); null "
        "when the command is not SGLang's")
    incident_window_s: float = Field(description="crashlab serve --incident-window")


class RunReport(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    tool: Tool
    status: Literal["crash", "dumps"] = Field(description="crash when any incarnation crashed")
    summary: str
    source: Source
    command: list[str] = Field(description="the launch command, secrets masked")
    incidents: list[Incident]
    warnings: list[str] = Field(default_factory=list)
    deployment: Deployment | None = Field(None, description="absent in reports of crashlab "
                                          "before --deployment")
    signature: CrashSignature | None = Field(
        None, description="the first crash's signature (its incident's)")
