"""crashlab doctor: run every check on a machine and keep the results as one versioned object.

A check that raises is a crashlab bug, not the user's problem: it is kept as ``skipped`` with
the error in its message, and the other checks still run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ..errors import BadInput
from ..published import ClosedModel as _Model
from ..report.model import Tool
from ..version import __version__
from .capture import capture_of
from .checks import ALL, Check, Machine, Outcome
from .checks.base import Concern, Status
from .host import Host
from .model import Environment
from .packages import Distributions


class CheckResult(_Model):
    """One check's result."""

    id: str
    """the check's name, e.g. torch-abi; stable"""
    concern: Concern
    """What the check is about: builds (a package built against another torch), toolchain (the
    CUDA toolchain), flashinfer (FlashInfer's own files) or capture (what a crash needs to be
    captured)."""
    status: Status
    """ok; finding (something to fix: see fix); skipped (the message says why)"""
    message: str
    """one line naming the facts the check looked at"""
    fix: str | None = None
    """what to do, for a finding"""


class DoctorReport(_Model):
    """What crashlab doctor found: every check run on the machine, with its result."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the report."""
    python: str
    """the interpreter whose packages were checked"""
    checks: list[CheckResult]
    """Every check, in the order crashlab runs them."""

    @property
    def findings(self) -> list[CheckResult]:
        return [check for check in self.checks if check.status == "finding"]


def run_checks(machine: Machine, checks: tuple[Check, ...] = ALL) -> DoctorReport:
    return DoctorReport(tool=Tool(version=__version__), python=machine.python,
                        checks=[_result(check, machine) for check in checks])


def _result(check: Check, machine: Machine) -> CheckResult:
    try:
        outcome = check.run(machine)
    except Exception as exc:  # one check's bug must not hide the others' results
        outcome = Outcome("skipped", f"the check failed ({type(exc).__name__}: {exc}); this is a "
                                     "crashlab bug, please report it")
    return CheckResult(id=check.id, concern=check.concern, status=outcome.status,
                       message=outcome.message, fix=outcome.fix)


def machine_for(runs_dir: Path, python: str | None, cmake_cache: Path | None,
                host: Host | None = None, timeout: float | None = None) -> Machine:
    """The machine as ``crashlab doctor``'s options describe it, its facts from one environment
    capture (crashlab env; each tool under ``timeout``, CRASHLAB_TOOL_TIMEOUT's by default)."""
    host = host or Host()
    if cmake_cache is not None and not cmake_cache.is_file():
        raise BadInput(f"--cmake-cache {cmake_cache}: no such file")
    return machine_from(capture_of(python, host, timeout), host, runs_dir=runs_dir,
                        cmake_cache=cmake_cache)


def machine_from(environment: Environment, host: Host, **options) -> Machine:
    cuda, nvcc = environment.cuda, environment.cuda.nvcc
    return Machine(host=host, distributions=Distributions(environment.python.site_paths),
                   gpu_memory=_gpu_memory(environment), driver_cuda=environment.driver.cuda_version,
                   cuda_home=Path(cuda.home) if cuda.home else None, cuda_home_from=cuda.home_from,
                   nvcc=Path(nvcc.path) if nvcc else None, nvcc_release=nvcc.release if nvcc else None,
                   python=environment.python.executable, **options)


def _gpu_memory(environment: Environment) -> tuple[int, ...] | None:
    """Each GPU's memory in bytes; () with no driver and no GPU; None where a GPU's is unknown."""
    if not environment.gpus:
        return () if environment.driver.version is None else None
    sizes = [gpu.memory_total_mib for gpu in environment.gpus if gpu.memory_total_mib is not None]
    return None if len(sizes) < len(environment.gpus) else tuple(size << 20 for size in sizes)
