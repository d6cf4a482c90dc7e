"""What decides whether a crash is captured at all: the host core's limit and destination, the
right to attach to a live process, room for the GPU coredumps, and coredump variables the user
already exported (``crashlab serve`` leaves those as they are).

The limits and kernel settings are read from /proc as this process sees them: inside a
container that is the container's view, which is the one a server started here would get.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...notation import counted
from .. import hostcore
from .base import Machine, finding, ok, registry, skipped

CHECKS, check = registry("capture")

#: CAP_SYS_PTRACE's bit in the capability sets of /proc/<pid>/status (linux/capability.h).
CAP_SYS_PTRACE = 19
#: What the driver writes per GPU with serve's lightweight flags (registers, the loaded kernels'
#: relocated images; no memory): an allowance, not a measurement of a driver's dump.
LIGHTWEIGHT_BYTES_PER_GPU = 1 << 30
ENABLE, FILE = "CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "CUDA_COREDUMP_FILE"
#: The variables the CUDA driver reads for GPU coredumps (cuda-gdb's documentation, "GPU core
#: dump support"). Named here rather than taken from crashlab.supervise, whose package would
#: bring the whole supervisor (and the coredump reader) into every doctor run.
COREDUMP_VARIABLES = (ENABLE, FILE, "CUDA_COREDUMP_GENERATION_FLAGS", "CUDA_COREDUMP_PIPE",
                      "CUDA_ENABLE_USER_TRIGGERED_COREDUMP", "CUDA_COREDUMP_SHOW_PROGRESS",
                      "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION", "CUDA_ENABLE_LIGHTWEIGHT_COREDUMP")


@check("core-ulimit", "ulimit -c (RLIMIT_CORE) of this shell: 0 means no host core")
def core_ulimit(machine: Machine):
    text = machine.host.read_text(machine.host.proc / "self" / "limits")
    row = next((line for line in (text or "").splitlines() if line.startswith("Max core file size")),
               None)
    if row is None:
        return skipped(f"{machine.host.proc}/self/limits has no 'Max core file size' row")
    soft, hard = row[len("Max core file size"):].split()[:2]
    if soft != "0":
        return ok(f"ulimit -c is {soft} (hard limit {hard})")
    problem = hostcore.limit_problem(hard)
    if problem is None:
        return ok(f"ulimit -c is 0 (hard limit {hard}): crashlab serve raises it for the server; "
                  "a server started otherwise leaves no host core (ulimit -c unlimited first)")
    return finding(f"ulimit -c is 0: {problem} (the GPU coredump is not affected)",
                   "raise the hard limit as root (limits.conf), or start the container with "
                   "--ulimit core=-1")


@check("core-pattern", "where kernel.core_pattern sends host cores, and whether that folder exists")
def core_pattern(machine: Machine):
    where = hostcore.read_destination(machine.host.proc)
    if where is None:
        return skipped(f"{machine.host.proc}/sys/kernel/core_pattern cannot be read")
    problem = where.problem()
    if problem is None:
        return ok(where.where())
    return finding(problem, f"mkdir -p {where.folder} (and make it writable), or set "
                            "kernel.core_pattern elsewhere")


@check("ptrace", "whether a debugger or py-spy may attach to a running server "
                 "(kernel.yama.ptrace_scope, CAP_SYS_PTRACE)")
def ptrace(machine: Machine):
    scope_text = machine.host.read_text(machine.host.proc / "sys" / "kernel" / "yama" / "ptrace_scope")
    scope = int(scope_text.strip()) if scope_text and scope_text.strip().isdigit() else None
    capable = _has_cap_sys_ptrace(machine)
    cap = {True: "CAP_SYS_PTRACE held", False: "no CAP_SYS_PTRACE", None: "capabilities unknown"}[capable]
    if scope is None or scope == 0:
        yama = "no Yama ptrace_scope" if scope is None else "ptrace_scope 0"
        return ok(f"{yama} ({cap}): a process may attach to any of its user's processes")
    if scope == 3:
        return finding("ptrace_scope 3: no process may attach to another, root included, until reboot",
                       "boot without kernel.yama.ptrace_scope=3 (it cannot be lowered at run time)")
    if capable:
        return ok(f"ptrace_scope {scope} and {cap}: attaching is allowed")
    limit = "only to its own children" if scope == 1 else "only with CAP_SYS_PTRACE"
    return finding(f"ptrace_scope {scope} and {cap}: a process may attach {limit}, so py-spy "
                   "(SGLang's watchdog dump) and gdb -p on a hung server are refused",
                   "sysctl kernel.yama.ptrace_scope=0 (as root), or in a container run with "
                   "--cap-add SYS_PTRACE")


def _has_cap_sys_ptrace(machine: Machine) -> bool | None:
    status = machine.host.read_text(machine.host.proc / "self" / "status") or ""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
            except (IndexError, ValueError):
                return None
    return None


@check("runs-disk", "free space in the runs directory against GPU coredumps: GPU memory x GPUs "
                    "for full dumps, an allowance per GPU for lightweight ones")
def runs_disk(machine: Machine):
    if machine.gpu_memory is None:
        return skipped("the GPUs' memory is not known (no NVIDIA driver found)")
    if not machine.gpu_memory:
        return skipped("no GPU: no GPU coredump to hold")
    existing = _existing_ancestor(machine.runs_dir)
    stats = os.statvfs(existing)
    free = stats.f_bavail * stats.f_frsize
    gpus = len(machine.gpu_memory)
    full = sum(machine.gpu_memory)
    light = gpus * LIGHTWEIGHT_BYTES_PER_GPU
    facts = (f"{_gib(free)} free in {existing}; {counted(gpus, 'GPU')}: full dumps up to {_gib(full)}, "
             f"lightweight (serve's default) about {_gib(light)}")
    if free >= full:
        return ok(facts)
    if free >= light:
        return ok(f"{facts}: room for lightweight dumps, not for --coredump full")
    return finding(f"{facts}: not room even for lightweight dumps, and a dump cut short by a full "
                   "disk cannot be read", f"point --runs-dir at a disk with {_gib(light)} free or more")


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


def _gib(size: int) -> str:
    return f"{size / (1 << 30):,.1f} GiB"


@check("coredump-env", "CUDA coredump variables already exported (crashlab serve defers to them)")
def coredump_variables(machine: Machine):
    exported = {name: machine.host.environ[name] for name in COREDUMP_VARIABLES
                if name in machine.host.environ}
    if not exported:
        return ok("no CUDA coredump variable exported: crashlab serve sets its own")
    listed = ", ".join(f"{name}={value}" for name, value in exported.items())
    if exported.get(ENABLE) == "0":
        return finding(f"{listed}: crashlab serve keeps the user's values, so no GPU coredump is written",
                       f"unset {ENABLE} (or run serve --coredump off on purpose)")
    if exported.get(FILE, "").lstrip().startswith("|"):
        return finding(f"{listed}: dumps are piped to a command, so serve cannot collect them",
                       f"unset {FILE} to let serve put dumps in the run directory")
    return ok(f"{listed}: crashlab serve defers to these and records them in the manifest")
