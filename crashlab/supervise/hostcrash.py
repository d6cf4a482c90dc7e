"""After an incarnation: the host side of its crash, for its incident.

A process killed by a host signal (SIGSEGV in an extension, SIGABRT from a C++ assert) leaves no
GPU coredump; what serve arranged for beforehand (faulthandler in the environment, the core
limit raised) leaves a Python stack in stderr.log and a host core, which is moved into the run
and read with gdb. Where there is none, the incident says why.
"""

from __future__ import annotations

from pathlib import Path

from ..env import hostcore
from ..gdb.hostcore import native_stack
from ..logpatterns import CRASH_SIGNALS
from ..report.hoststacks import NativeStack, PythonStack, faulthandler_stacks
from ..report.run import ProcessRecord
from .hostcore import collect_core

#: the end of a log that is read for faulthandler's blocks (they come last, as the process dies)
LOG_TAIL_BYTES = 4 << 20


def python_stacks(logs: list[Path]) -> list[PythonStack]:
    stacks = []
    for log in logs:
        if log.exists():
            with open(log, "rb") as f:
                f.seek(max(0, log.stat().st_size - LOG_TAIL_BYTES))
                stacks += faulthandler_stacks(f.read().decode(errors="replace"))
    return stacks


def native_stacks(processes: list[ProcessRecord], limit_problem: str | None, cwd: Path,
                  since: float, cores: Path, run_dir: Path) -> list[NativeStack]:
    """Per process that a core-dumping signal ended: its core's bt, or why there is none."""
    crashed = [p for p in processes if p.exit is not None and p.exit.signal in CRASH_SIGNALS]
    if not crashed:
        return []
    where, uses_pid = hostcore.read_destination(), hostcore.uses_pid()
    stacks = []
    for process in crashed:
        if limit_problem is not None:
            stacks.append(NativeStack(unavailable_reason=f"pid {process.pid}: {limit_problem}"))
            continue
        found = collect_core(where, process.pid, cwd, since, cores, uses_pid=uses_pid)
        core = found.path
        if core is None:
            stacks.append(NativeStack(unavailable_reason=f"pid {process.pid}: {found.note}"))
            continue
        # the executable the core names: a retitled SGLang rank's cmdline names none
        stacks.append(native_stack(core, None, shown_as=str(core.relative_to(run_dir))))
    return stacks
