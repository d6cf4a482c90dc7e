"""The variables that make a hung server's collective evidence readable, and which versions get which.

PyTorch's Flight Recorder keeps the last collectives of every process group in a ring buffer
(``TORCH_FR_BUFFER_SIZE`` entries; 0, the default, keeps none) and writes it as a pickle to
``<TORCH_FR_DUMP_TEMP_FILE><rank>`` when its NCCL heartbeat monitor reads a byte from
``<TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe`` (the process lives on), or on a watchdog
timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT``). PyTorch 2.8 renamed the buffer and file variables;
the old names (``TORCH_NCCL_TRACE_BUFFER_SIZE``, ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``) still work
and make every process warn that they are deprecated. The pipe and dump-on-timeout variables
keep their ``TORCH_NCCL_`` names through 2.14.1 (read by its libtorch_cuda: the pipe belongs to
ProcessGroupNCCL; gloo has none). Where the server's torch version is unknown, both spellings
are set.

NCCL's RAS (2.24 and later, on by default) answers a status query on ``NCCL_RAS_ADDR``
(localhost:28028 by default; one listener per node, whichever process binds first). Each
incarnation gets a port of its own, so two servers on one node do not answer for each other.
NCCL 2.24.0 to 2.27.2 can crash when RAS is polled while a communicator initialises
(NVIDIA/nccl#1669, #1718; fixed in 2.27.3): there RAS is turned off and never queried.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path

from ..env import saved
from ..env.model import Environment

FR_BUFFER = "TORCH_FR_BUFFER_SIZE"
FR_BUFFER_BEFORE_2_8 = "TORCH_NCCL_TRACE_BUFFER_SIZE"
FR_FILE = "TORCH_FR_DUMP_TEMP_FILE"
FR_FILE_BEFORE_2_8 = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
FR_PIPE = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
FR_DUMP_ON_TIMEOUT = "TORCH_NCCL_DUMP_ON_TIMEOUT"
RAS_ENABLE = "NCCL_RAS_ENABLE"
RAS_ADDR = "NCCL_RAS_ADDR"

#: each name and its other spelling (PyTorch before 2.8, or after): the user's value under either wins
SPELLINGS = {FR_BUFFER: FR_BUFFER_BEFORE_2_8, FR_BUFFER_BEFORE_2_8: FR_BUFFER,
             FR_FILE: FR_FILE_BEFORE_2_8, FR_FILE_BEFORE_2_8: FR_FILE}
#: entries per process group; PyTorch's Flight Recorder tutorial recommends 2000
BUFFER_ENTRIES = "2000"
#: the dump file and the pipe are these prefixes followed by the rank (and ``.pipe``)
FR_FILE_PREFIX = "rank-"
FR_PIPE_PREFIX = "torch-fr-"
FR_PIPE_SUFFIX = ".pipe"
RENAMED_IN = (2, 8)
RAS_SINCE = (2, 24)
#: NCCL versions whose RAS can crash the process it runs in when a client polls it
RAS_CRASHES_WHEN_POLLED = ((2, 24, 0), (2, 27, 3))
RAS_CRASH_SOURCE = "NVIDIA/nccl#1669, #1718; fixed in 2.27.3"


@dataclass(frozen=True)
class Stack:
    """The torch and NCCL versions the server's interpreter has, as the run's environment.json
    says them (None: unknown)."""

    torch: str | None = None
    nccl: str | None = None

    @classmethod
    def of_run(cls, run_dir: Path) -> Stack:
        try:
            environment = saved.load(run_dir)
        except saved.UnusableEnvironment:
            return cls()
        return cls.of(environment) if environment is not None else cls()

    @classmethod
    def of(cls, environment: Environment) -> Stack:
        nccl = next((p.version for p in environment.packages
                     if p.name.startswith("nvidia-nccl-cu") and p.status == "installed"), None)
        return cls(environment.torch.version if environment.torch else None, nccl)


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """'2.14.1+cu130' -> (2, 14, 1); None where it does not start with numbers."""
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return tuple(int(part) for part in found.groups() if part is not None) if found else None


def ras_crashes_when_polled(nccl: str | None) -> bool:
    version = version_tuple(nccl)
    if version is None:
        return False
    low, high = RAS_CRASHES_WHEN_POLLED
    return low <= version + (0,) * (3 - len(version)) < high


def ras_refusal(nccl: str | None) -> str | None:
    """Why RAS must not be queried in a server with this NCCL; None where it may."""
    version = version_tuple(nccl)
    if version is None:
        return "the server's NCCL version is unknown: RAS was not set up"
    if version < RAS_SINCE:
        return f"NCCL {nccl} has no RAS (it came in 2.24)"
    if ras_crashes_when_polled(nccl):
        return f"NCCL {nccl} can crash when RAS is polled ({RAS_CRASH_SOURCE}): RAS left off"
    return None


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wanted(stack: Stack, flight_recorder: Path, pipes: Path, ras_port: int) -> dict[str, str]:
    """What crashlab would set, before looking at the user's environment."""
    values = {FR_PIPE: str(pipes / FR_PIPE_PREFIX), FR_DUMP_ON_TIMEOUT: "1"}
    torch = version_tuple(stack.torch)
    dump_file = str(flight_recorder / FR_FILE_PREFIX)
    if torch is None or torch >= RENAMED_IN:
        values.update({FR_BUFFER: BUFFER_ENTRIES, FR_FILE: dump_file})
    if torch is None or torch < RENAMED_IN:
        values.update({FR_BUFFER_BEFORE_2_8: BUFFER_ENTRIES, FR_FILE_BEFORE_2_8: dump_file})
    if ras_refusal(stack.nccl) is None:
        values.update({RAS_ENABLE: "1", RAS_ADDR: f"127.0.0.1:{ras_port}"})
    elif ras_crashes_when_polled(stack.nccl):
        values[RAS_ENABLE] = "0"
    return values
