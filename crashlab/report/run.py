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
from ..published import empty_list
from ..vocabulary import TRACEBACK, DumpLabel, Role
from .advice import Advice
from .hoststacks import NativeStack, PythonStack
from .kernellog import KernelLog
from .model import SCHEMA_VERSION, Source, Tool, TriageReport
from .sglang_records import SGLangRecords
from .signature import CrashSignature


class ExitStatus(_Model):
    """How a process ended: its exit code or the signal that killed it, and how crashlab learnt
    it."""

    code: int | None = None
    """exit code, when the process exited"""
    signal: int | None = None
    """signal number, when a signal ended it"""
    signal_name: str | None = None
    """The signal's name, e.g. SIGSEGV; null where no signal ended the process or the number has
    no name."""
    observed: Literal["waited", "zombie", "log", "unknown"] = "waited"
    """waited: exact (crashlab reaped it); zombie: read from /proc while it was a zombie; log:
    from SGLang's own watchdog line 'Subprocess ... (pid=P) crashed with exit code X';
    unknown: its parent reaped it before crashlab could look"""

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
    """One process of the server's tree, as crashlab watched it (psutil) from its start to its
    end."""

    pid: int
    """The process id."""
    ppid: int
    """The parent's process id."""
    role: str
    """server (the launched command), scheduler, detokenizer, data_parallel_controller,
    tokenizer_worker, process, ..."""
    ranks: str | None = None
    """SGLang's rank tags from the process title (TP0, DP1 TP3)"""
    cmdline: str
    """The process's command line, arguments joined by spaces, secrets masked and cut to a
    readable length."""
    started_at: str
    """When the process started (UTC, ISO 8601, milliseconds)."""
    ended_at: str | None = None
    """When crashlab saw it end (UTC, ISO 8601); null while it runs or where its end was not
    seen."""
    exit: ExitStatus | None = None
    """How it ended; null while it runs or where its end was not seen."""


class TracebackFrame(_Model):
    """One frame of a Python traceback found in the server's log."""

    file: str
    """The file the frame names ('File "..."')."""
    line: int
    """The line number the frame names."""
    function: str
    """The function the frame names ('in ...')."""
    code: str | None = None
    """The source line Python printed under the frame, stripped; null where it printed none."""


#: How a traceback that ended without an exception line is quoted (an excerpt, a rank that died
#: mid-print): its text is this phrase and its innermost frame, not a line of the log.
NO_EXCEPTION_LINE = "traceback without an exception line"


class Finding(_Model):
    """A log line that matched a fault pattern, time-stamped, with the lines around it."""

    kind: str
    """cuda-error, coredump, nccl-timeout, xid, scheduler-exception, sglang-crash, fatal, oom,
    survived-fault (a fault the server answered with an error and lived through), traceback"""
    text: str
    """The matched line, secrets masked (for a traceback: its exception line, or the phrase
    'traceback without an exception line')."""
    stream: str
    """stdout, stderr or kmsg (the kernel log)"""
    line: int
    """1-based line number in that stream's log file (lines end at a newline; a carriage return,
    a progress bar's redraw, ends none)"""
    end_line: int | None = None
    """tracebacks: the line of their exception (or of their last frame, when none was printed)"""
    time: str
    """when crashlab read the line (UTC, ISO 8601)"""
    rank: str | None = None
    """rank prefix of the line ([rank0]:, TP0), if any"""
    before: list[str] = Field(default_factory=empty_list)
    """Up to 5 log lines before the matched one, secrets masked."""
    after: list[str] = Field(default_factory=empty_list)
    """Up to 5 log lines after the matched one, secrets masked."""
    frames: list[TracebackFrame] = Field(default_factory=empty_list)
    """tracebacks: in order"""


def exception_line(findings: list[Finding]) -> str | None:
    """The exception a Python crash raised: the exception line of the first traceback that
    printed one (``IndexError: index 5000 is out of bounds ...``); None where none did."""
    return next((f.text for f in findings if f.kind == TRACEBACK and f.text != NO_EXCEPTION_LINE),
                None)


class FileRecord(_Model):
    """One file crashlab collected into the run directory: a log, a coredump, a request dump,
    the environment."""

    path: str
    """relative to the run directory"""
    kind: Literal["log", "coredump", "request-dump", "server-info", "launch", "report", "host-core",
                  "environment", "process-maps", "flight-recorder", "kernel-api-log",
                  "crash-snapshot"]
    """What the file is: a log, a GPU coredump, an SGLang request dump, the server's
    /server_info answer, the incarnation's launch (argv, cwd, environment, secrets masked), a
    report, a host core, the captured environment, the /proc/PID/maps of the server's processes
    (at start and at crash: crashlab.supervise.procmaps), or the last Flight Recorder dump of a rank
    left in the incarnation's flight-recorder/ folder (a capture's, or PyTorch's own on a watchdog
    timeout), a kernel-API log SGLang wrote to a file (SGLANG_KERNEL_API_LOGDEST), or a crash
    snapshot JSON SGLang wrote beside its request dump."""
    size_bytes: int
    """The file's size in bytes, as collected."""
    sha256: str
    """of the file as collected (logs: once the server has ended)"""
    complete: bool = True
    """False where the file was still being written when crashlab collected it (a dump cut short
    by the server's death)."""
    origin: str | None = None
    """where it was written, when crashlab adopted it"""
    requests: int | None = None
    """request dumps: how many requests it holds (None: not read)"""


class LogTail(_Model):
    """The last lines of a log, for an incident no pattern explains."""

    stream: str
    """stderr, or stdout when stderr is empty"""
    first_line: int
    """1-based line number of the first line kept"""
    lines: list[str]
    """secrets masked, each line cut to a readable length"""


#: The pid in the names serve asks the driver for (core.%h.%p.%t.nvcudmp; the host may hold dots).
_DUMP_PID = re.compile(r"core\.[^/]*?\.(?P<pid>\d+)\.\d+\.nvcudmp")


def dump_pid(path: str) -> int | None:
    """The pid of the process whose GPU coredump ``path`` is, from the name serve gave it."""
    found = _DUMP_PID.search(path)
    return int(found["pid"]) if found else None


class DumpTriage(_Model):
    """One GPU coredump of an incident, triaged: FAULT, COLLATERAL or UNREADABLE, with its full
    report."""

    path: str
    """The dump, relative to the run directory."""
    label: DumpLabel
    """FAULT: an exception with a valid PC; COLLATERAL: no exception, or one without a PC (a
    rank waiting for the faulting one); UNREADABLE: crashlab could not read it."""
    reasons: list[str] = Field(default_factory=empty_list)
    """Why the dump has its label: where its warps were parked, how long after the first FAULT
    dump it was written, whether the server died while it was written."""
    written_at: str
    """when the dump file was last written (its mtime)"""
    size_bytes: int
    """The dump's size in bytes."""
    sha256: str
    """SHA-256 of the dump file, hex."""
    summary: str
    """The report's one-line summary, or 'unreadable: ' and the error."""
    error: str | None = None
    """why crashlab.inspect could not read it"""
    report: TriageReport | None = None
    """The dump's TriageReport, unchanged (crashlab schema triage); null where it is UNREADABLE."""

    def writer(self, processes: list[ProcessRecord]) -> ProcessRecord | None:
        """Which of the server's processes wrote this dump (its rank, role), by the pid in its name."""
        pid = dump_pid(self.path)
        return next((process for process in processes if process.pid == pid), None)


class Incident(_Model):
    """One incarnation of the server that crashed or left dumps, with what crashlab collected
    from it."""

    incarnation: int
    """The incarnation's number, from 1: serve restarts the server after a crash, each start one
    incarnation."""
    directory: str
    """The incarnation's directory, relative to the run directory."""
    kind: Literal["crash", "dumps", "survived"]
    """crash: the server ended abnormally; dumps: it was stopped or exited, and dumps were
    collected on the way (a hang captured with dump-now); survived: a fault the server caught,
    answered with an error (an HTTP 500) and lived through, one incident per fault, signed as
    the same fault would be had it killed the server"""
    started_at: str
    """When the incarnation started (UTC, ISO 8601)."""
    ended_at: str
    """When it ended (UTC, ISO 8601); its start where no end was recorded."""
    exit: ExitStatus | None
    """How the launched command ended; null where its end is unknown."""
    stopped_by_crashlab: bool
    """True where crashlab stopped the server, false where it ended on its own."""
    summary: str
    """One line a human reads first: the processes whose death started the crash, the GPU fault
    or else the log's most telling line, then how the server ended."""
    dumps: list[DumpTriage]
    """FAULT dumps first (earliest first), then COLLATERAL"""
    request_dumps: list[FileRecord] = Field(default_factory=empty_list)
    """SGLang's request dumps of this incarnation (--crash-dump-folder), collected into the run
    directory."""
    replay_commands: list[str] = Field(default_factory=empty_list)
    """A 'crashlab replay' command for each request dump that holds requests."""
    findings: list[Finding] = Field(default_factory=empty_list)
    """Log lines that matched a fault pattern, in the order they were read (at most 200)."""
    omitted_findings: int = 0
    """Findings past the first 200, counted but not kept."""
    kernel_log: KernelLog | None = None
    """the findings' Xid lines (serve's kernel-log watch), decoded and held against the first
    FAULT dump's faults; null where the kernel log showed no Xid"""
    log_tail: LogTail | None = None
    """when no fault pattern matched: where the server's log ended"""
    processes: list[ProcessRecord] = Field(default_factory=empty_list)
    """Every process of the server's tree crashlab saw in this incarnation."""
    notes: list[str] = Field(default_factory=empty_list)
    """What the reader should know about how the incident was read (e.g. no cuda-gdb for
    --debugger)."""
    signature: CrashSignature | None = None
    """this incident's signature: its first FAULT dump's, else its log's, else the collective
    its COLLATERAL dump waits in"""
    python_stacks: list[PythonStack] = Field(default_factory=empty_list)
    """what Python's faulthandler printed into the logs (PYTHONFAULTHANDLER, which serve sets)"""
    native_stacks: list[NativeStack] = Field(default_factory=empty_list)
    """per process killed by a host signal: gdb's bt of its host core, or why there is no core"""
    sglang: SGLangRecords | None = None
    """what SGLang itself wrote around the crash (kernel-API log, py-spy stacks, batch lines,
    crash snapshot); null where it wrote none of them"""
    advice: Advice | None = None
    """What to do next and why (crashlab.advice): the Xid lines of the incarnation, its fault's
    known fix or workaround, the index's history of its signature and GPU, serve's recent
    crashes. Null in reports older than it."""


class Deployment(_Model):
    """Where the server stood, for grouping its crashes with those of other servers."""

    host: str
    """The host name of the machine serve ran on."""
    label: str | None = None
    """crashlab serve --deployment, if given"""
    role: Role | None = None
    """SGLang's --disaggregation-mode (plain: not disaggregated); null when the command is not
    SGLang's"""
    incident_window_s: float
    """crashlab serve --incident-window"""


class RunReport(_Model):
    """What crashlab serve found in one run directory: every incident of the server it launched,
    with the triage of each coredump embedded."""

    schema_version: Literal[1] = SCHEMA_VERSION
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the report."""
    status: Literal["crash", "dumps", "survived"]
    """crash when any incarnation crashed; else dumps when one left dumps; else survived (only
    faults the server lived through)"""
    summary: str
    """One line a human reads first: the incident's summary, or how many incidents there were
    and the first one's."""
    source: Source
    """The run directory (kind 'run'); size_bytes is the total of the files collected."""
    command: list[str]
    """the launch command, secrets masked"""
    incidents: list[Incident]
    """Every incarnation that crashed or left dumps, in order."""
    warnings: list[str] = Field(default_factory=empty_list)
    """What crashlab met while supervising the server and reports instead of failing, from every
    incarnation."""
    deployment: Deployment | None = None
    """absent in reports of crashlab before --deployment"""
    signature: CrashSignature | None = None
    """the first crash's signature (its incident's)"""
