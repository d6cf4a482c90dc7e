"""cuda-gdb attached to one rank's live process: its kernels and where their warps stand, without
ending it (a GPU user dump ends the process; this does not).

Intrusive and opt-in (``--attach``): cuda-gdb attaches with ptrace and the whole process, its
GPU work included, is stopped while it is read, then detached. Each snapshot is bounded by the
source timeout. Where the kernel refuses ptrace (``crashlab doctor`` says why) the row is
"refused"; a process with no CUDA context or no kernel running gives a "missing" row whose file
keeps cuda-gdb's own words.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...env.probe import run_tool
from ...hangs.layout import Source, SourceRecord, source_path
from .slot import Slot, first_line

NAME: Source = "cuda-gdb-attach"
#: Warps of the SM in focus whose lanes and registers are read (warp slots 0 to N-1): each is
#: about 330 register lines, and the process stands stopped while they are printed.
MAX_WARPS_READ = 4
#: Per warp slot: focus on it (cuda-gdb picks its first active lane), say the focus (an empty
#: slot leaves it where it was, so the parser keys each block by it), its lanes, that lane's
#: registers.
WARP_COMMANDS = ("cuda warp {warp}", "cuda device sm warp lane", "info cuda lanes",
                 "info registers")
COMMANDS = ("info cuda kernels", "info cuda warps",
            *(line.format(warp=warp) for warp in range(MAX_WARPS_READ) for line in WARP_COMMANDS))
#: The one library whose symbols an attach loads (a regular expression, as ``sharedlibrary`` takes).
DRIVER_LIBRARY = "libcuda"
NO_KERNELS = "No CUDA kernels."
NO_CUDA = "cuda-gdb attached: no CUDA context/kernels in the process"
_REFUSALS = ("operation not permitted", "permission denied")


def argv(cuda_gdb: str, pid: int) -> list[str]:
    """One batch attach: read, then detach (gdb's batch mode detaches from an attached process).

    Only the CUDA driver's symbols are loaded: cuda-gdb finds the GPU through libcuda's
    debugger-API variables (``cudbgIpcFlag``, ``cudbgAttachHandlerAvailable``, ...), and
    loading every library's symbols of a process that imported PyTorch took 8-9 s here, against
    0.05 s without them (docs/hangs.md)."""
    command = [cuda_gdb, "-nx", "-batch", "-iex", "set auto-solib-add off", "-p", str(pid),
               "-ex", f"sharedlibrary {DRIVER_LIBRARY}"]
    for line in COMMANDS:
        command += ["-ex", line]
    return command


def snapshot(cuda_gdb: str | None, missing: str, pid: int, rank: int, slot: Slot,
             environ: Mapping[str, str]) -> SourceRecord:
    if cuda_gdb is None:
        return slot.row(NAME, rank, "missing", missing)
    run = run_tool(argv(cuda_gdb, pid), timeout=slot.timeout, environ=environ, search_path="",
                   with_stderr=True)
    if run.status == "timeout":
        return slot.row(NAME, rank, "timeout", f"cuda-gdb read nothing within {slot.timeout:g} s")
    if run.status == "missing":
        return slot.row(NAME, rank, "missing", f"{cuda_gdb} could not be started")
    lowered = run.output.lower()
    if "ptrace" in lowered and any(word in lowered for word in _REFUSALS):
        said = next((line for line in run.output.splitlines() if "ptrace" in line.lower()), "")
        return slot.row(NAME, rank, "refused",
                        f"ptrace refused ({first_line(said)}); crashlab doctor says why")
    if NO_KERNELS in run.output:
        row = slot.keep(NAME, rank, source_path(rank, slot.sample, NAME), run.output.encode())
        if row.status == "ok":
            row.status, row.note = "missing", NO_CUDA
        return row
    if run.status == "failed" and "Wp " not in run.output:
        return slot.row(NAME, rank, "failed", f"cuda-gdb: {first_line(run.output)} "
                        f"(exit code {run.exit_code})")
    return slot.keep(NAME, rank, source_path(rank, slot.sample, NAME), run.output.encode())
