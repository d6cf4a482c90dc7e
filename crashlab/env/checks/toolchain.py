"""The CUDA toolchain a source build and FlashInfer's JIT use, against torch and the driver.

torch's extension builder refuses an nvcc of another major version than torch's CUDA ("The
detected CUDA version (12.1) mismatches the version that was used to compile PyTorch (11.8)");
code built by a toolkit newer than the driver's CUDA does not load ("CUDA driver version is
insufficient for CUDA runtime version"); CMake may be holding on to another toolkit's nvcc; and
every toolkit refuses host compilers newer than its host_config.h allows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from ..hostcompiler import host_limits
from .base import Machine, Outcome, cuda_version, finding, holds_toolkit, ok, registry, skipped

CHECKS, check = registry("toolchain")

_CMAKE_CUDA_COMPILER = re.compile(r"^CMAKE_CUDA_COMPILER:[A-Z]+=(.+)$", re.MULTILINE)
UNSUPPORTED_COMPILER_FLAG = "-allow-unsupported-compiler"


@dataclass(frozen=True)
class _Cuda:
    """A CUDA version a check compares: as its source wrote it ("12.8"), as (major, minor), and
    whose it is (the toolkit's folder for nvcc, torch's version for torch)."""

    text: str
    number: tuple[int, int]
    owner: str = ""

    def __str__(self) -> str:
        return self.text


def _nvcc_release(machine: Machine) -> _Cuda | Outcome:
    toolkit = machine.toolkit
    if toolkit is None:
        return skipped("no nvcc: CUDA_HOME, CUDA_PATH unset and no nvcc on PATH")
    if toolkit.release is None:
        return skipped(f"nvcc of {toolkit.root} ({toolkit.found_by}) is missing or did not "
                       "say its release")
    return _parsed(toolkit.release, f"nvcc's release {toolkit.release!r}", str(toolkit.root))


def _parsed(version: str, what: str, owner: str = "") -> _Cuda | Outcome:
    number = cuda_version(version)
    if number is None:
        return skipped(f"{what} is not a CUDA version")
    return _Cuda(version, number, owner)


def _torch_cuda(machine: Machine) -> _Cuda | Outcome:
    if machine.torch is None:
        return skipped(f"torch is not installed for {machine.python}")
    if machine.torch.cuda is None:
        return skipped(f"torch {machine.torch.version} is not a CUDA build")
    return _parsed(machine.torch.cuda, f"torch's CUDA {machine.torch.cuda!r}",
                   str(machine.torch.version))


def _driver_cuda(machine: Machine) -> _Cuda | Outcome:
    if machine.driver_cuda is None:
        return skipped("the driver's CUDA version is not known (no NVIDIA driver found)")
    return _parsed(machine.driver_cuda, f"the driver's CUDA {machine.driver_cuda!r}")


_Source = Callable[[Machine], "_Cuda | Outcome"]


def _both(machine: Machine, first: _Source, second: _Source) -> tuple[_Cuda, _Cuda] | Outcome:
    """Two CUDA versions a check compares, or why one of them is not known."""
    one = first(machine)
    if isinstance(one, Outcome):
        return one
    other = second(machine)
    if isinstance(other, Outcome):
        return other
    return one, other


@check("cuda-home", "the CUDA_HOME torch's extension builder would take (CUDA_HOME, CUDA_PATH, "
                    "the folder above nvcc on PATH) holding a toolkit's headers")
def cuda_home(machine: Machine):
    if machine.cuda_home is None:
        return skipped("no CUDA home: CUDA_HOME, CUDA_PATH unset, no nvcc on PATH, no /usr/local/cuda")
    named = f"CUDA_HOME {machine.cuda_home} (from {machine.cuda_home_from})"
    if holds_toolkit(machine.cuda_home):
        return ok(f"{named} holds a toolkit")
    real = machine.toolkit.root if machine.toolkit and holds_toolkit(machine.toolkit.root) else None
    where = f"; nvcc ({machine.nvcc}) belongs to {real}" if real else ""
    return finding(f"{named} has no include/cuda_runtime.h{where}: torch extension builds "
                   "(sgl-kernel, DeepEP, FlashInfer's JIT) find no CUDA headers there",
                   f"export CUDA_HOME={real or '<the toolkit folder>'}")


@check("nvcc-torch-cuda", "nvcc's CUDA major version against the CUDA torch was built with "
                          "(extension builds refuse a mismatch)")
def nvcc_torch_cuda(machine: Machine):
    both = _both(machine, _nvcc_release, _torch_cuda)
    if isinstance(both, Outcome):
        return both
    nvcc, torch = both
    if nvcc.number[0] == torch.number[0]:
        minor = "" if nvcc.text == torch.text else " (minor versions differ: torch only warns)"
        return ok(f"nvcc {nvcc} ({nvcc.owner}) and torch's CUDA {torch}{minor}")
    return finding(f"nvcc {nvcc} ({nvcc.owner}) but torch {torch.owner} was "
                   f"built with CUDA {torch}: extension builds stop with 'The detected CUDA "
                   f"version ({nvcc}) mismatches the version that was used to compile PyTorch "
                   f"({torch})'",
                   f"point CUDA_HOME at a CUDA {torch.number[0]}.x toolkit, or install the "
                   f"torch built for CUDA {nvcc}")


@check("torch-cuda-driver", "the CUDA torch was built with against the newest CUDA the "
                            "driver supports")
def torch_cuda_driver(machine: Machine):
    both = _both(machine, _torch_cuda, _driver_cuda)
    if isinstance(both, Outcome):
        return both
    torch, driver = both
    return _against_driver(f"torch {torch.owner} (CUDA {torch})", torch, driver,
                           f"install the torch built for CUDA {driver} or older, or a driver "
                           f"that supports CUDA {torch}")


@check("nvcc-driver", "nvcc's CUDA (what FlashInfer's JIT and source builds compile with) "
                      "against the newest CUDA the driver supports")
def nvcc_driver(machine: Machine):
    both = _both(machine, _nvcc_release, _driver_cuda)
    if isinstance(both, Outcome):
        return both
    nvcc, driver = both
    return _against_driver(f"nvcc {nvcc} ({nvcc.owner})", nvcc, driver,
                           f"point CUDA_HOME at a CUDA {driver} toolkit or older, or install a "
                           f"driver that supports CUDA {nvcc}")


def _against_driver(what: str, built: _Cuda, driver: _Cuda, fix: str) -> Outcome:
    """A newer major version needs a newer driver; a newer minor runs under CUDA's minor
    version compatibility (same major, driver >= the major's first release)."""
    if built.number[0] <= driver.number[0]:
        note = " (newer minor: runs under CUDA minor version compatibility)" \
            if built.number > driver.number else ""
        return ok(f"{what}; the driver supports CUDA {driver}{note}")
    return finding(f"{what} but the driver supports CUDA {driver} at most: CUDA fails with "
                   "'CUDA driver version is insufficient for CUDA runtime version'", fix)


@check("cmake-cuda-compiler", "CMAKE_CUDA_COMPILER or CUDACXX (environment, or --cmake-cache) "
                              "naming another toolkit than CUDA_HOME / nvcc")
def cmake_cuda_compiler(machine: Machine):
    named = _cmake_compilers(machine)
    if not named:
        return skipped("CMAKE_CUDA_COMPILER and CUDACXX are unset" +
                       ("" if machine.cmake_cache else " and no CMakeCache.txt was given "
                                                        "(--cmake-cache)"))
    if machine.toolkit is None:
        return skipped("no toolkit to compare with: CUDA_HOME, CUDA_PATH unset and no nvcc on PATH")
    root = machine.toolkit.root.resolve()
    other = [(where, path) for where, path in named if Path(path).resolve().parent.parent != root]
    listed = "; ".join(f"{where} = {path}" for where, path in named)
    if not other:
        return ok(f"{listed}: the toolkit of {machine.toolkit.found_by} ({machine.toolkit.root})")
    where, path = other[0]
    return finding(f"{where} = {path}, but {machine.toolkit.found_by} names the toolkit "
                   f"{machine.toolkit.root}: CMake builds (sgl-kernel, DeepEP) compile with one "
                   "toolkit and link against the other",
                   f"make them agree: export CMAKE_CUDA_COMPILER={machine.toolkit.root}/bin/nvcc "
                   "(and CUDACXX), or delete the build folder's CMakeCache.txt and configure again")


def _cmake_compilers(machine: Machine) -> list[tuple[str, str]]:
    named = [(variable, machine.host.environ[variable])
             for variable in ("CMAKE_CUDA_COMPILER", "CUDACXX") if machine.host.environ.get(variable)]
    if machine.cmake_cache is not None:
        text = machine.host.read_text(machine.cmake_cache) or ""
        match = _CMAKE_CUDA_COMPILER.search(text)
        if match and match[1].strip():
            named.append((str(machine.cmake_cache), match[1].strip()))
    return named


@check("host-compiler", "the host compiler nvcc uses (CUDAHOSTCXX, NVCC_CCBIN or gcc) against "
                        "the newest the toolkit's include/crt/host_config.h accepts")
def host_compiler(machine: Machine):
    if machine.toolkit is None:
        return skipped("no nvcc: CUDA_HOME, CUDA_PATH unset and no nvcc on PATH")
    limits = host_limits(machine.toolkit.root)
    if limits is None:
        return skipped(f"{machine.toolkit.root} has no include/crt/host_config.h")
    compiler = machine.host_compiler
    if compiler is None or compiler.version is None:
        return skipped("no host compiler answered (CUDAHOSTCXX, NVCC_CCBIN, gcc on PATH)")
    name = f"{compiler.kind} {compiler.version} ({compiler.command}, from {compiler.found_by})"
    limit: Version | int | None
    if compiler.kind == "gcc":
        limit = gcc = limits.gcc_later_than
        too_new = gcc is not None and compiler.version.release[:len(gcc.release)] > gcc.release
        said = f"gcc versions later than {limit} are not supported"
    else:
        limit = clang = limits.clang_below
        too_new = clang is not None and compiler.version.major >= clang
        said = f"clang version must be less than {limit}"
    if limit is None:
        return ok(f"{name}; {limits.path} sets no {compiler.kind} limit")
    if not too_new:
        return ok(f"{name}; {limits.path} accepts it ({said})")
    flags = " ".join(machine.host.environ.get(v, "") for v in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"))
    if UNSUPPORTED_COMPILER_FLAG in flags.split():
        return ok(f"{name} is newer than {limits.path} accepts ({said}), overridden by "
                  f"{UNSUPPORTED_COMPILER_FLAG} in NVCC_*_FLAGS (at your own risk, says NVIDIA)")
    example = f", e.g. CUDAHOSTCXX=/usr/bin/g++-{limit}" if compiler.kind == "gcc" else ""
    return finding(f"{name}: {limits.path} stops every nvcc build with '#error -- unsupported "
                   f"{'GNU' if compiler.kind == 'gcc' else 'clang'} version! {said}'",
                   "install an older compiler and name it in CUDAHOSTCXX (CMake) and NVCC_CCBIN "
                   f"(nvcc){example}")
