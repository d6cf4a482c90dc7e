"""Environment: what ``crashlab env`` prints as JSON and ``crashlab serve`` keeps as environment.json.

The facts SGLang's bug template asks for (``python3 -m sglang.check_env``) and vLLM's
``collect_env`` gathers, taken without importing torch or touching a GPU: the OS, Python, the
NVIDIA driver and its GPUs, the CUDA toolkit, the versions of the packages a GPU serving stack is
built from, the topology and the environment variables that steer them. Every tool it ran has
a probe record, so a reader can tell "no GPU" from "nvidia-smi timed out after 2 s".

Published like the other reports (``crashlab schema environment``): open objects, named values
that may grow, what could not be read is null.
"""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from ..escape import surrogates_escaped
from ..published import ClosedModel
from ..report.model import Tool

ProbeStatus = Literal["ok", "failed", "timeout", "missing"]
PackageStatus = Literal["installed", "absent", "unknown"]


def _decodable(value):
    """A field's value with the bytes that were not UTF-8 (an environment variable, a path read
    with surrogateescape) written as backslash escapes, so that it can be written as JSON."""
    if isinstance(value, str):
        return surrogates_escaped(value)
    if isinstance(value, list):
        return [_decodable(item) for item in value]
    if isinstance(value, dict):
        return {_decodable(key): _decodable(item) for key, item in value.items()}
    return value


class _Model(ClosedModel):
    """Every text of the environment decodable: a stranger's machine may name things in any bytes."""

    @field_validator("*", mode="before")
    @classmethod
    def _decodable_text(cls, value):
        return _decodable(value)


class Probe(_Model):
    """One tool crashlab ran to learn something, and how that went."""

    tool: str
    """what was asked, as a command line: nvidia-smi topo -m"""
    status: ProbeStatus
    """ok: it answered; failed: it exited non-zero or answered something else; timeout: no
    answer within crashlab env --timeout; missing: not found on PATH."""
    seconds: float
    """How long the tool ran, in seconds."""
    exit_code: int | None = None
    """The tool's exit code; null where it did not exit (a timeout) or was not found."""

    def describe(self) -> str:
        """``nvidia-smi topo -m timed out after 2 s``; ``nvcc --version: exit 1``."""
        if self.status == "timeout":
            return f"{self.tool} timed out after {self.seconds:.2g} s"
        if self.status == "missing":
            return f"{self.tool}: not found"
        if self.status == "failed" and self.exit_code == 0:
            return f"{self.tool}: answered, but not what was asked"
        if self.status == "failed":
            return f"{self.tool}: exit {self.exit_code}"
        return f"{self.tool}: ok in {self.seconds:.2f} s"


class OperatingSystem(_Model):
    """The operating system, from /etc/os-release and /proc/sys/kernel."""

    name: str | None
    """PRETTY_NAME of /etc/os-release"""
    id: str | None = None
    """ID of /etc/os-release, e.g. ubuntu; null where the file lacks it."""
    version_id: str | None = None
    """VERSION_ID of /etc/os-release, e.g. 22.04; null where the file lacks it."""
    kernel: str | None = None
    """/proc/sys/kernel/osrelease"""
    arch: str | None = None
    """The machine's architecture (/proc/sys/kernel/arch, else uname's machine), e.g. x86_64."""


class Python(_Model):
    """The Python interpreter whose packages were read: crashlab env --python, else crashlab's
    own."""

    executable: str
    """The interpreter's path (its sys.executable where it said)."""
    version: str | None
    """The interpreter's sys.version; null where it did not answer."""
    site_paths: list[str]
    """the interpreter's sys.path, where its packages were read from (empty when the interpreter
    did not say)"""
    asked: bool
    """true when the interpreter was run and asked; false when it is crashlab's own, read in
    process"""


class Driver(_Model):
    """The NVIDIA kernel driver, from /proc/driver/nvidia and nvidia-smi; every field null where
    there is none."""

    version: str | None
    """the kernel module's version (/proc/driver/nvidia/version, else nvidia-smi)"""
    kernel_module: str | None = None
    """the NVRM line of /proc/driver/nvidia/version"""
    cuda_version: str | None = None
    """the newest CUDA the driver supports (nvidia-smi's CUDA Version)"""


class Gpu(_Model):
    """One GPU, merged from /proc/driver/nvidia/gpus and nvidia-smi --query-gpu."""

    index: int | None
    """nvidia-smi's index, else the device minor number"""
    name: str | None
    """The GPU's name, e.g. 'NVIDIA H100 80GB HBM3'; null where no source named it."""
    bus_id: str | None
    """PCI domain:bus:device.function, 0000:18:00.0"""
    uuid: str | None = None
    """The GPU's UUID (GPU-...); null where no source gave it."""
    memory_total_mib: int | None = None
    """Total memory in MiB (nvidia-smi's memory.total); null where nvidia-smi did not answer."""
    compute_capability: str | None = None
    """The compute capability, e.g. '9.0' (nvidia-smi's compute_cap); null where nvidia-smi did
    not answer."""
    vbios: str | None = None
    """The Video BIOS version from /proc/driver/nvidia/gpus/*/information; null where absent."""
    sources: list[str]
    """where it was seen: /proc, nvidia-smi"""


class Nvcc(_Model):
    """The nvcc of the CUDA toolkit a torch extension build would use."""

    path: str
    """nvcc's path."""
    release: str | None
    """the toolkit release nvcc --version prints: 12.8"""
    version: str | None
    """nvcc's own version: 12.8.93"""


class Cuda(_Model):
    """The CUDA toolkit a torch extension build would use."""

    home: str | None
    """the CUDA_HOME a torch extension build would use"""
    home_from: str | None = None
    """CUDA_HOME, CUDA_PATH, nvcc on PATH or /usr/local/cuda"""
    nvcc: Nvcc | None = None
    """That toolkit's nvcc; null where none was found."""


class Torch(_Model):
    """torch's build facts from the torch/version.py its build wrote (read as text)."""

    version: str | None
    """torch's __version__, e.g. '2.7.1+cu128'; null where version.py does not say."""
    cuda: str | None
    """The CUDA version torch was built with, e.g. '12.8'; null for a CPU or ROCm build."""
    hip: str | None = None
    """The HIP version of a ROCm build; null otherwise."""
    git_version: str | None = None
    """The commit torch was built from; null where version.py does not say."""
    debug: bool | None = None
    """Whether torch is a debug build; null where version.py does not say."""


class Package(_Model):
    """One Python distribution a GPU serving stack is built from (torch, sglang, flashinfer,
    triton, ...)."""

    name: str
    """the distribution; for one known under several names and absent, the names looked for,
    joined by /"""
    status: PackageStatus
    """unknown: the interpreter's packages could not be read"""
    version: str | None = None
    """The installed version, from its dist-info metadata; null where absent or unknown."""
    location: str | None = None
    """the site folder it was found in"""


class Environment(_Model):
    """The machine a crash happened on, as crashlab env captured it without importing torch or
    touching a GPU."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the JSON."""
    captured_at: str
    """ISO 8601, UTC"""
    host_name: str | None
    """The host name (/proc/sys/kernel/hostname); null where it could not be read."""
    os: OperatingSystem
    """The operating system."""
    python: Python
    """The interpreter whose packages were read."""
    driver: Driver
    """The NVIDIA driver."""
    gpus: list[Gpu]
    """Every GPU seen, one per PCI address; empty where there is no driver."""
    cuda: Cuda
    """The CUDA toolkit."""
    torch: Torch | None
    """null when torch/version.py is not on the interpreter's path"""
    packages: list[Package]
    """The distributions crashlab looks for, in its order, installed or not."""
    topology: str | None
    """nvidia-smi topo -m, when it answered in time"""
    variables: dict[str, str]
    """the environment variables that steer CUDA, NCCL, torch, SGLang and their kin, secrets
    masked"""
    probes: list[Probe]
    """Every tool crashlab ran, by name, with how it went."""
