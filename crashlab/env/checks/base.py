"""What a doctor check is: a small named function of the machine that says ok, finding (with
the fix) or skipped (with why), in one line that names the facts it looked at.

A check reads the machine through :class:`Machine` only, so that every check runs on a tree a
test builds (a site-packages with crafted metadata, a fake /proc, a fake CUDA toolkit) as well
as on the real machine. Facts that cost a tool run (nvcc, the host compiler) are read once per
doctor run, when the first check asks for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

from ..host import Host
from ..hostcompiler import HostCompiler, host_compiler, nvcc_home
from ..packages import Distributions, TorchBuild, torch_build

Status = Literal["ok", "finding", "skipped"]
#: What a check is about: a package built against another torch, the CUDA toolchain,
#: FlashInfer's own files, or what a crash needs to be captured at all.
Concern = Literal["builds", "toolchain", "flashinfer", "capture"]


@dataclass(frozen=True)
class Outcome:
    status: Status
    message: str
    fix: str | None = None


def ok(message: str) -> Outcome:
    return Outcome("ok", message)


def finding(message: str, fix: str) -> Outcome:
    return Outcome("finding", message, fix)


def skipped(why: str) -> Outcome:
    return Outcome("skipped", why)


@dataclass(frozen=True)
class Toolkit:
    #: the folder nvcc belongs to (include/, bin/)
    root: Path
    nvcc: Path | None
    #: nvcc's release ("13.0"), None where nvcc is missing or did not answer
    release: str | None
    #: what named it: CUDA_HOME, CUDA_PATH, nvcc on PATH
    found_by: str


@dataclass
class Machine:
    """Everything the checks look at. ``gpu_memory`` is the memory of each GPU in bytes (None:
    not known; empty: no GPU), ``driver_cuda`` the newest CUDA the driver supports ("12.8"),
    and the CUDA home and nvcc are those of the environment capture (crashlab env): no GPU is
    opened here."""

    host: Host
    distributions: Distributions
    runs_dir: Path = Path("crashlab-runs")
    gpu_memory: tuple[int, ...] | None = None
    driver_cuda: str | None = None
    cuda_home: Path | None = None
    cuda_home_from: str | None = None
    nvcc: Path | None = None
    nvcc_release: str | None = None
    cmake_cache: Path | None = None
    #: the interpreter whose packages are checked, as the user named it
    python: str = "this Python"
    tool_timeout: float = 10.0

    def first_dir(self, *parts: str) -> Path | None:
        """The first ``site/part/...`` folder on the paths, as ``import`` would find a package."""
        for path in self.distributions.paths:
            candidate = Path(path, *parts)
            if candidate.is_dir():
                return candidate
        return None

    @cached_property
    def torch(self) -> TorchBuild | None:
        return torch_build(self.distributions)

    @cached_property
    def toolkit(self) -> Toolkit | None:
        """The CUDA home, or where nvcc really lives where that home holds no toolkit (nvcc on
        PATH a wrapper script, CUDA_HOME pointing at its parent)."""
        found_by = self.cuda_home_from or "nvcc on PATH"
        if self.nvcc is not None and (self.cuda_home is None or not holds_toolkit(self.cuda_home)):
            return Toolkit(nvcc_home(self.nvcc, self.host, self.tool_timeout), self.nvcc,
                           self.nvcc_release, f"{found_by}, nvcc's own folder")
        if self.cuda_home is None:
            return None
        return Toolkit(self.cuda_home, self.nvcc, self.nvcc_release, found_by)

    @cached_property
    def host_compiler(self) -> HostCompiler | None:
        return host_compiler(self.host, self.tool_timeout)


@dataclass(frozen=True)
class Check:
    id: str
    concern: Concern
    #: one line for the checks table: what it looks for
    what: str
    run: Callable[[Machine], Outcome]


def holds_toolkit(folder: Path) -> bool:
    """Whether ``folder`` is a CUDA toolkit: its headers are there (every toolkit has
    include/cuda_runtime.h)."""
    return (folder / "include" / "cuda_runtime.h").is_file()


def registry(concern: Concern) -> tuple[list[Check], Callable]:
    """A module's list of checks and the decorator that adds one to it."""
    checks: list[Check] = []

    def check(check_id: str, what: str):
        def add(function: Callable[[Machine], Outcome]) -> Callable[[Machine], Outcome]:
            checks.append(Check(check_id, concern, what, function))
            return function
        return add

    return checks, check


def cuda_version(text: str | None) -> tuple[int, int] | None:
    """``"12.8"`` (or ``"12.8.1"``) as (12, 8); None for anything else."""
    parts = (text or "").strip().split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])
