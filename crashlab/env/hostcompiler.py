"""The host compiler nvcc hands C++ to, and the newest one its toolkit accepts.

The limit is read from the toolkit's own ``include/crt/host_config.h``, whose ``#error --
unsupported GNU version! gcc versions later than 15 are not supported!`` is exactly what a build
would stop on. Where nvcc is a wrapper script (``exec /usr/local/cuda-13.0/bin/nvcc "$@"``), the
folder above it holds no toolkit: nvcc's ``--dryrun`` prints where it really lives
(``#$ _HERE_=…/bin``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .host import Host
from .probe import run_tool

_HERE = re.compile(r"^#\$ _HERE_=(.+)$", re.MULTILINE)
_GCC_LIMIT = re.compile(r"gcc versions later than (\d+(?:\.\d+)?) are not supported")
_CLANG_LIMIT = re.compile(r"clang version must be less than (\d+)")
_CLANG_VERSION = re.compile(r"clang version (\d+(?:\.\d+)*)")


@dataclass(frozen=True)
class HostLimits:
    """The newest host compilers the toolkit accepts, as its host_config.h says."""

    path: Path
    gcc_later_than: Version | None
    clang_below: int | None


@dataclass(frozen=True)
class HostCompiler:
    command: str
    #: where the command came from: CUDAHOSTCXX, NVCC_CCBIN or PATH
    found_by: str
    kind: str  # "gcc" or "clang"
    version: Version | None


def nvcc_home(nvcc: Path, host: Host, timeout: float) -> Path:
    """The toolkit folder of ``nvcc``: where its dry run says it lives, else two folders up."""
    run = run_tool(["sh", "-c", 'exec "$0" --dryrun -c -x cu /dev/null -o /dev/null 2>&1',
                    str(nvcc)], timeout=timeout, environ=host.environ)
    match = _HERE.search(run.output)
    here = Path(match[1].strip()) if match else nvcc.resolve().parent
    return here.parent


def host_limits(root: Path) -> HostLimits | None:
    candidates = [root / "include" / "crt" / "host_config.h", root / "include" / "host_config.h",
                  *sorted(root.glob("targets/*/include/crt/host_config.h"))]
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        gcc, clang = _GCC_LIMIT.search(text), _CLANG_LIMIT.search(text)
        return HostLimits(path, Version(gcc[1]) if gcc else None, int(clang[1]) if clang else None)
    return None


def host_compiler(host: Host, timeout: float) -> HostCompiler | None:
    """The compiler nvcc hands host code to: CMake's CUDAHOSTCXX, nvcc's NVCC_CCBIN, else the
    gcc on PATH."""
    for variable in ("CUDAHOSTCXX", "NVCC_CCBIN"):
        if host.environ.get(variable):
            command, found_by = host.environ[variable], variable
            break
    else:
        command, found_by = "gcc", "PATH"
    about = run_tool([command, "--version"], timeout=timeout, environ=host.environ,
                     search_path=host.search_path)
    if not about.ok:
        return None
    clang = _CLANG_VERSION.search(about.output)
    if clang:
        return HostCompiler(command, found_by, "clang", _version(clang[1]))
    dumped = run_tool([command, "-dumpfullversion", "-dumpversion"], timeout=timeout,
                      environ=host.environ, search_path=host.search_path)
    return HostCompiler(command, found_by, "gcc", _version(dumped.output.strip()) if dumped.ok else None)


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None
