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

from pydantic import Field, field_validator

from ..escape import surrogates_escaped
from ..published import ClosedModel

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


class Tool(_Model):
    """What wrote the JSON, shaped as every crashlab report says it (report.model.Tool), declared
    here so that crashlab env does not import the coredump reader that model stands on."""

    name: str = "crashlab"
    version: str


class Probe(_Model):
    """One tool crashlab ran to learn something, and how that went."""

    tool: str = Field(description="what was asked, as a command line: nvidia-smi topo -m")
    status: ProbeStatus
    seconds: float
    exit_code: int | None = None

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
    name: str | None = Field(description="PRETTY_NAME of /etc/os-release")
    id: str | None = None
    version_id: str | None = None
    kernel: str | None = Field(None, description="/proc/sys/kernel/osrelease")
    arch: str | None = None


class Python(_Model):
    executable: str
    version: str | None
    site_paths: list[str] = Field(
        description="the interpreter's sys.path, where its packages were read from (empty when "
                    "the interpreter did not say)")
    asked: bool = Field(description="true when the interpreter was run and asked; false when it "
                                    "is crashlab's own, read in process")


class Driver(_Model):
    version: str | None = Field(description="the kernel module's version (/proc/driver/nvidia/"
                                            "version, else nvidia-smi)")
    kernel_module: str | None = Field(None, description="the NVRM line of /proc/driver/nvidia/version")
    cuda_version: str | None = Field(None, description="the newest CUDA the driver supports "
                                                       "(nvidia-smi's CUDA Version)")


class Gpu(_Model):
    index: int | None = Field(description="nvidia-smi's index, else the device minor number")
    name: str | None
    bus_id: str | None = Field(description="PCI domain:bus:device.function, 0000:18:00.0")
    uuid: str | None = None
    memory_total_mib: int | None = None
    compute_capability: str | None = None
    vbios: str | None = None
    sources: list[str] = Field(description="where it was seen: /proc, nvidia-smi")


class Nvcc(_Model):
    path: str
    release: str | None = Field(description="the toolkit release nvcc --version prints: 12.8")
    version: str | None = Field(description="nvcc's own version: 12.8.93")


class Cuda(_Model):
    home: str | None = Field(description="the CUDA_HOME a torch extension build would use")
    home_from: str | None = Field(None, description="CUDA_HOME, CUDA_PATH, nvcc on PATH or "
                                                    "/usr/local/cuda")
    nvcc: Nvcc | None = None


class Torch(_Model):
    """torch's build facts from the torch/version.py its build wrote (read as text)."""

    version: str | None
    cuda: str | None
    hip: str | None = None
    git_version: str | None = None
    debug: bool | None = None


class Package(_Model):
    name: str = Field(description="the distribution; for one known under several names and "
                                  "absent, the names looked for, joined by /")
    status: PackageStatus = Field(description="unknown: the interpreter's packages could not be read")
    version: str | None = None
    location: str | None = Field(None, description="the site folder it was found in")


class Environment(_Model):
    schema_version: Literal[1] = 1
    tool: Tool
    captured_at: str = Field(description="ISO 8601, UTC")
    host_name: str | None
    os: OperatingSystem
    python: Python
    driver: Driver
    gpus: list[Gpu]
    cuda: Cuda
    torch: Torch | None = Field(description="null when torch/version.py is not on the interpreter's path")
    packages: list[Package]
    topology: str | None = Field(description="nvidia-smi topo -m, when it answered in time")
    variables: dict[str, str] = Field(description="the environment variables that steer CUDA, "
                                                  "NCCL, torch, SGLang and their kin, secrets masked")
    probes: list[Probe]
