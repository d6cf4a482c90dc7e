"""STAND-IN for an SGLang child process (scheduler rank or detokenizer); not SGLang.

Started by the stand-in server with argv[0] set to SGLang's process title
(``sglang::scheduler_TP0``), so /proc/<pid>/cmdline reads as setproctitle leaves it. Like
SGLang's children it dies with its parent (PR_SET_PDEATHSIG), unless the test asks otherwise.
It takes orders on stdin, one per line: ``gpu-fault`` (a kernel faults: the driver writes a dump
and aborts), ``raise`` (a Python exception: SGLang's "Scheduler hit an exception" and a SIGQUIT
to the parent), ``segv``, ``exit``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback

import driver

PR_SET_PDEATHSIG = 1


def scheduler_exception(title: str) -> None:
    try:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    except RuntimeError:
        trace = traceback.format_exc()
    tags = title.rsplit("_", 1)[-1]
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')} {tags}] Scheduler hit an exception: {trace}",
          file=sys.stderr, flush=True)
    os.kill(os.getppid(), signal.SIGQUIT)


def main() -> None:
    title = sys.argv[1]  # argv[0] is the process title, which Python replaces by the script
    if os.environ.get("STANDIN_CHILD_OUTLIVES") != "1":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if "scheduler" in title:
        driver.listen_for_user_trigger(os.environ["STANDIN_USER_DUMP"],
                                       float(os.environ.get("STANDIN_DUMP_SECONDS", "1")))
    for order in sys.stdin:
        order = order.strip()
        if order == "gpu-fault":
            driver.device_exception(os.environ["STANDIN_DUMP"],
                                    float(os.environ.get("STANDIN_DUMP_SECONDS", "1")),
                                    "CUDBG_EXCEPTION_WARP_OUT_OF_RANGE_ADDRESS", 5)
        elif order == "raise":
            scheduler_exception(title)
        elif order == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif order == "exit":
            sys.exit(0)
    while True:  # stdin closed: the parent is gone or shutting down; wait to be killed
        time.sleep(60)


if __name__ == "__main__":
    main()
