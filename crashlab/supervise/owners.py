"""The owner of each fault serve triaged, with what only serve has: the package list of
environment.json and the maps it took of the server's processes (crashlab.supervise.procmaps).
A lone dump names the artifact; these give its version and so the fix status."""

from __future__ import annotations

from pathlib import Path

from ..env.saved import UnusableEnvironment, load
from ..launchline import RecordedLaunch
from ..owner import Clues, refined
from ..report.model import TriageReport
from . import procmaps


def installed(run_dir: Path) -> dict[str, str]:
    """Distribution -> version from the run's environment.json ({} where there is none)."""
    try:
        environment = load(run_dir)
    except UnusableEnvironment:  # a damaged file costs the owner its version, nothing more
        return {}
    if environment is None:
        return {}
    return {package.name: package.version for package in environment.packages
            if package.status == "installed" and package.version}


def triton_caches(incarnation_dir: Path) -> tuple[Path, ...]:
    """Where the server's Triton put its JIT cubins: $TRITON_CACHE_DIR as launched, else
    $HOME/.triton/cache (Triton's default), read from the incarnation's launch.json."""
    environ = RecordedLaunch.read(incarnation_dir / "launch.json").environment
    if environ.get("TRITON_CACHE_DIR"):
        return (Path(environ["TRITON_CACHE_DIR"]),)
    return (Path(environ["HOME"]) / ".triton" / "cache",) if environ.get("HOME") else ()


def refine(report: TriageReport, incarnation_dir: Path, packages: dict[str, str]) -> None:
    maps = procmaps.read(incarnation_dir)
    signature = report.signature.hash if report.signature else None
    for fault in report.faults:
        if fault.owner is not None and fault.kernel is not None:
            fault.owner = refined(fault.owner, Clues(kernel=fault.kernel.name, maps=maps,
                                                     packages=packages, signature=signature))
