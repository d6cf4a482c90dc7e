"""The log lines and signals that say a server crashed, in one leaf that imports nothing from
crashlab: the log scanner (crashlab.supervise) finds them in a running server's streams, and the
signature rules (crashlab.signature) read the same texts back out of a finished run's findings.
"""

from __future__ import annotations

import re
import signal

#: (kind, regular expression, anchors). Every match of the expression contains one of its
#: anchors: plain substrings that bytes.find looks for in a whole chunk far faster than the
#: regular expression could (Python's re tries each alternative at every position). Sources:
#: SGLang's own crash lines (tokenizer_manager.py's dump_requests_before_crash and SIGQUIT handler,
#: utils/watchdog.py, the schedulers' "hit an exception"), the driver's coredump progress lines
#: (cuda-gdb documentation, "GPU core dump support"), CUDA runtime error strings,
#: torch.distributed's NCCL watchdog messages, the kernel's NVRM Xid lines, the native stack dump
#: a library's segfault handler prints in SGLang 0.5.23's processes ("!!!!!!! Segfault encountered !!!!!!!").
#: The kinds are crashlab.vocabulary's finding kinds (tests/test_architecture.py holds them equal).
PATTERNS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("cuda-error", r"CUDA error: [^\r\n]*|an illegal memory access was encountered|"
                   r"misaligned address|unspecified launch failure|"
                   r"an illegal instruction was encountered|device-side assert triggered|"
                   r"Warp (?:Illegal Instruction|Illegal Address|Out-of-range Address|"
                   r"Misaligned Address|Assert)|Lane Illegal Address|CUDA_ERROR_[A-Z_]+|"
                   r"cudaError(?:IllegalAddress|LaunchFailure|MisalignedAddress|"
                   r"IllegalInstruction|Assert)|Failed to encode tensor map",
     ("CUDA", "llegal", "isaligned", "launch failure", "assert", "Warp ", "cudaError", "tensor map")),
    ("coredump", r"coredump: |Starting GPU coredump generation", ("coredump",)),
    ("nccl-timeout", r"Watchdog caught collective operation timeout|"
                     r"Process group watchdog thread terminated|NCCL watchdog|"
                     r"nccl(?:UnhandledCudaError|SystemError|InternalError|RemoteError)|"
                     r"NCCL communicator was aborted", ("atchdog", "nccl", "NCCL")),
    ("xid", r"NVRM: Xid \([^)]*\): \d+", ("NVRM: Xid",)),
    ("scheduler-exception", r"(?:Scheduler|DetokenizerManager|TokenizerManager|"
                            r"DataParallelController)\w* hit an exception", ("hit an exception",)),
    ("sglang-crash", r"SIGQUIT received|Received sigquit from a child process|"
                     r"Subprocess \S+ \(pid=\d+\) crashed with exit code|"
                     r"Scheduler watchdog timeout|Dumping requests before crash|"
                     r"Dumped \d+ finished and \d+ unfinished requests before crash to|"
                     r"scheduler died during initialization|Health check failed|"
                     r"Waiting [\d.]+ seconds for CUDA coredumps",
     ("SIGQUIT", "sigquit", "Subprocess ", "atchdog", "before crash", "died during",
      "Health check failed", "CUDA")),
    ("fatal", r"Fatal Python error: \w+|terminate called (?:after throwing|without an active)|"
              r"Segmentation fault|Aborted \(core dumped\)|Segfault encountered",
     ("Fatal Python error", "terminate called", "Segmentation fault", "core dumped",
      "Segfault encountered")),
    ("oom", r"CUDA out of memory|OutOfMemoryError", ("CUDA", "OutOfMemoryError")),
)

#: SGLang's watchdog naming the child whose death started the crash (any exit, SIGKILL included).
CHILD_CRASHED = re.compile(r"Subprocess \S+ \(pid=(?P<pid>\d+)\) crashed with exit code (?P<code>-?\d+)")

_TRACEBACK_HEAD = r"Traceback \(most recent call last\):"
#: A line that ends where a traceback starts (also how supervise/incident.py finds SGLang's
#: "Scheduler hit an exception: Traceback ..." line to complete its headline).
TRACEBACK_STARTS = re.compile(_TRACEBACK_HEAD + r"\s*$")

#: Signals that mean the process crashed, as opposed to being told to stop.
CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE,
                           signal.SIGILL, signal.SIGSYS, signal.SIGTRAP})
