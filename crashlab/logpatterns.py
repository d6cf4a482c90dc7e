"""The log lines and signals that say a server crashed, in one leaf that imports nothing from
crashlab. This is the one list of crash lines: serve's log scanner (crashlab.supervise) finds them
in a running server's streams and its incarnation reads what SGLang's crash path and the driver's
coredump are doing from them; replay's and bisect's crash oracle (crashlab.replay.oracle) judges a
run by them; the signature rules (crashlab.signature) read the same texts back out of a finished
run's findings. A line one of them calls a crash line, all of them do, of the same kind.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class CrashLine:
    """One kind of line that says a server crashed, or is crashing."""

    #: crashlab.vocabulary's finding kind (tests/test_architecture.py holds them equal)
    kind: str
    #: the regular expression, searched in one line
    regex: str
    #: plain substrings one of which every match contains: bytes.find looks for them in a whole
    #: chunk far faster than the regular expression could (Python's re tries each alternative at
    #: every position)
    anchors: tuple[str, ...]
    #: SGLang's own crash path has begun (its SIGQUIT handler, its watchdog naming a dead child,
    #: its request dump): serve waits for it to finish before it stops the server
    crash_path: bool = False
    #: a driver's coredump line worth recording (the others are progress, only tracked)
    milestone: bool = False


#: Every crash line, most telling kind first (a line two kinds match is the first's). Sources:
#: SGLang's own crash lines (tokenizer_manager.py's dump_requests_before_crash and SIGQUIT
#: handler, utils/watchdog.py, the schedulers' "hit an exception"), the driver's coredump
#: progress lines (cuda-gdb documentation, "GPU core dump support"), CUDA runtime error strings
#: and the device-side assert's message, compute-sanitizer's reports, torch.distributed's NCCL
#: watchdog messages, the kernel's NVRM Xid lines, the native stack dump a library's segfault
#: handler prints in SGLang 0.5.23's processes ("!!!!!!! Segfault encountered !!!!!!!").
PATTERNS: tuple[CrashLine, ...] = (
    CrashLine("cuda-error",
              r"CUDA error: [^\r\n]*|an illegal memory access was encountered|"
              r"misaligned address|unspecified launch failure|"
              r"an illegal instruction was encountered|device-side assert triggered|"
              r"Warp (?:Illegal Instruction|Illegal Address|Out-of-range Address|"
              r"Misaligned Address|Assert)|Lane Illegal Address|CUDA_ERROR_[A-Z_]+|"
              r"cudaError(?:IllegalAddress|LaunchFailure|MisalignedAddress|"
              r"IllegalInstruction|Assert)|Failed to encode tensor map",
              ("CUDA", "llegal", "isaligned", "launch failure", "assert", "Warp ", "cudaError",
               "tensor map")),
    # a device-side assert's own line: "...: block: [0,0,0], thread: [0,0,0] Assertion `i < n` failed."
    CrashLine("cuda-error", r"Assertion `.*` failed", ("Assertion `",)),
    # compute-sanitizer's report of an access, a failed call or its own error
    CrashLine("cuda-error", r"^=+ (?:Invalid __\w+__ (?:read|write)|Program hit|Error: )",
              ("Invalid __", "Program hit", "= Error: ")),
    # tried before the progress line below, which starts where it does
    CrashLine("coredump", r"coredump: .*?(?:Detected an exception|Writing ELF|"
                          r"Starting GPU coredump generation)|Starting GPU coredump generation",
              ("coredump",), milestone=True),
    CrashLine("coredump", r"coredump: ", ("coredump",)),
    CrashLine("nccl-timeout",
              r"Watchdog caught collective operation timeout|"
              r"Process group watchdog thread terminated|NCCL watchdog|NCCL error|"
              r"nccl(?:UnhandledCudaError|SystemError|InternalError|RemoteError)|"
              r"NCCL communicator was aborted", ("atchdog", "nccl", "NCCL")),
    CrashLine("xid", r"NVRM: Xid \([^)]*\): \d+", ("NVRM: Xid",)),
    CrashLine("scheduler-exception",
              r"(?:Scheduler|DetokenizerManager|TokenizerManager|DataParallelController)\w* "
              r"hit an exception", ("hit an exception",)),
    CrashLine("sglang-crash",
              r"SIGQUIT received|Received sigquit from a child process|"
              r"Subprocess \S+ \(pid=\d+\) crashed with exit code|Dumping requests before crash|"
              r"Waiting [\d.]+ seconds for CUDA coredumps",
              ("SIGQUIT", "sigquit", "Subprocess ", "before crash", "CUDA"), crash_path=True),
    CrashLine("sglang-crash",
              r"\w+ watchdog timeout|"
              r"Dumped \d+ finished and \d+ unfinished requests before crash to|"
              r"scheduler died during initialization|Health check failed",
              ("atchdog", "before crash", "died during", "Health check failed")),
    CrashLine("fatal", r"Fatal Python error: \w+|terminate called (?:after throwing|without an active)|"
                       r"Segmentation fault|Aborted \(core dumped\)|Segfault encountered",
              ("Fatal Python error", "terminate called", "Segmentation fault", "core dumped",
               "Segfault encountered")),
    CrashLine("oom", r"CUDA out of memory|OutOfMemoryError", ("CUDA", "OutOfMemoryError")),
    # SGLang 0.5.23's HTTP 500s, each followed by the traceback: its OpenAI endpoints' catch-all
    # (entrypoints/openai/serving_base.py, "Internal server error"), and uvicorn's line for an
    # exception no endpoint caught
    CrashLine("survived-fault", r"Error in request: |Exception in ASGI application",
              ("Error in request: ", "Exception in ASGI application")),
)

#: Every crash line in one expression, a named group per entry of PATTERNS (``p0``, ``p1``, ...):
#: ``CRASH_LINES.search(text)``'s ``lastgroup`` names the entry (entry()).
CRASH_LINES = re.compile("|".join(f"(?P<p{number}>{line.regex})"
                                  for number, line in enumerate(PATTERNS)))
#: What makes a chunk of log worth a closer look: one of them is in every crash line.
ANCHORS = tuple(sorted({anchor for line in PATTERNS for anchor in line.anchors}))
#: Each kind's lines in one expression (a finding's text read back as its kind).
BY_KIND = {kind: re.compile("|".join(f"(?:{line.regex})" for line in PATTERNS if line.kind == kind))
           for kind in dict.fromkeys(line.kind for line in PATTERNS)}
#: Source code a log quotes (a traceback's code line, indented; torch.distributed's ``[rankN]:``
#: before it): a ``raise RuntimeError("CUDA error: ...")`` holding a fault's words is a program's
#: text, not the fault's message.
QUOTED_RAISE = re.compile(r"^(?:\[rank\d+\]: ?)?\s+raise\b")


def entry(match: re.Match[str]) -> CrashLine:
    """The entry of PATTERNS a match of CRASH_LINES is."""
    return PATTERNS[int((match.lastgroup or "p0")[1:])]


def crash_line(text: str) -> CrashLine | None:
    """The crash line TEXT (one line of a log) is, the leftmost match's; None where it is none,
    or where it is source code a traceback quotes."""
    if QUOTED_RAISE.match(text):
        return None
    found = CRASH_LINES.search(text)
    return entry(found) if found else None


#: The process each survived-fault line is printed by, as serve names SGLang's processes: SGLang's
#: HTTP server runs in the main process, beside its TokenizerManager.
SURVIVED_IN = "tokenizer"

#: SGLang's watchdog naming the child whose death started the crash (any exit, SIGKILL included).
CHILD_CRASHED = re.compile(r"Subprocess \S+ \(pid=(?P<pid>\d+)\) crashed with exit code (?P<code>-?\d+)")

_TRACEBACK_HEAD = r"Traceback \(most recent call last\):"
#: A line that ends where a traceback starts (also how supervise/incident.py finds SGLang's
#: "Scheduler hit an exception: Traceback ..." line to complete its headline).
TRACEBACK_STARTS = re.compile(_TRACEBACK_HEAD + r"\s*$")

#: Signals that mean the process crashed, as opposed to being told to stop.
CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE,
                           signal.SIGILL, signal.SIGSYS, signal.SIGTRAP})
