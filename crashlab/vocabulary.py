"""The words every layer of crashlab shares, in one leaf that imports nothing from crashlab.

The reader names where a PC came from and how much of the GPU an exception blames; the run's
report names a server's role and a dump's label; the log scanner, the incident builder, the
signature rules and the Xid reader all ask a finding what kind it is; a reader that refuses a
file says what the file is instead, so that the command line can name the verb that reads it.
Each of them imports the word from here, so no layer reaches up (or sideways) for a word.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

#: Where a fault's PC was read: the SM row's errorPC, the warp row's, or (neither valid) the lane's PC.
PcSource = Literal["SM errorPC", "warp errorPC", "lane PC (errorPC not valid)"]
#: How much of the GPU an exception blames: the CUDBG name's prefix.
ExceptionScope = Literal["lane", "warp", "device", "cluster"]
#: What a server is in a PD-disaggregated SGLang deployment (its --disaggregation-mode), or
#: "plain" for one that is not disaggregated.
Role = Literal["prefill", "decode", "plain"]
#: A coredump's triage label; None for a crash without a GPU coredump (a signal, an exception).
DumpLabel = Literal["FAULT", "COLLATERAL", "UNREADABLE"]
#: What an Xid blames: the application (software), the GPU, its memory or its bus (hardware),
#: or nothing NVIDIA's catalog says (unknown).
XidOrigin = Literal["software", "hardware", "unknown"]
#: What to do next about a crash: take its GPU out of service, apply a known workaround, restart
#: the server as it was, or stop restarting it.
AdviceAction = Literal["drain", "workaround", "restart", "stop"]

# What a run report's finding is (Finding.kind): the log line that made it.
#: A CUDA runtime error or a device exception's text.
CUDA_ERROR = "cuda-error"
#: The driver writing a GPU coredump.
COREDUMP = "coredump"
#: torch.distributed's NCCL watchdog.
NCCL_TIMEOUT = "nccl-timeout"
#: An ``NVRM: Xid`` line of the kernel log.
XID = "xid"
#: An SGLang process ("Scheduler hit an exception") saying it caught one.
SCHEDULER_EXCEPTION = "scheduler-exception"
#: SGLang's own crash lines: SIGQUIT, a child that crashed, the watchdog, the request dump.
SGLANG_CRASH = "sglang-crash"
#: A native crash's line: Fatal Python error, terminate called, Segmentation fault.
FATAL = "fatal"
#: CUDA out of memory.
OOM = "oom"
#: A fault the server caught and answered with an error (an HTTP 500), living on.
SURVIVED_FAULT = "survived-fault"
#: A Python traceback, assembled frame by frame.
TRACEBACK = "traceback"
#: Every finding kind, in the order Finding.kind's description lists them.
FINDING_KINDS = (CUDA_ERROR, COREDUMP, NCCL_TIMEOUT, XID, SCHEDULER_EXCEPTION, SGLANG_CRASH, FATAL,
                 OOM, SURVIVED_FAULT, TRACEBACK)

#: The first opcode of a pickle of protocol 2 or later (SGLang writes 4 or 5).
PICKLE_PROTO = 0x80


class InputKind(str, Enum):
    """What a refused input is, when it is another verb's: the reader knows the file, the
    command line knows the verb (crashlab.wrongverb turns the kind into advice)."""

    PICKLE = "pickle"  # an SGLang crash dump, for replay
    RUN_DIRECTORY = "run-directory"  # a crashlab serve run directory, whose triage is report.md
    COREDUMP = "coredump"  # a CUDA coredump, plain or gzip, for inspect
