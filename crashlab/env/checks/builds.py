"""Packages built against another torch than the one installed.

sgl-kernel, FlashInfer's AOT modules, DeepEP, vLLM and torchvision are C++ extensions of one
torch build: with another torch they fail at import (``undefined symbol: _ZN3c10…``, sglang#5100,
#5247) or, worse, load and misbehave. A source-built torch (``2.8.0a0+git…``) satisfies no
wheel's ``torch==2.8.0`` pin, and ``pip install torchvision`` over it quietly installs a second
torch beside it.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ..elfsyms import Unreadable, missing_from, undefined_torch_symbols
from ..packages import Installed, normalized
from .base import Machine, finding, ok, registry, skipped

CHECKS, check = registry("builds")

#: The packages whose metadata pins the torch they were built against.
DEPENDENTS = ("sglang", "sgl-kernel", "sglang-kernel", "flashinfer-python", "torchvision",
              "torchaudio", "vllm", "xformers")
#: Extension modules built against torch's C++ ABI: a package folder, or a top-level module
#: (DeepEP's ``deep_ep_cpp``), and the distribution that ships it.
EXTENSIONS = (("sgl_kernel", "sgl-kernel / sglang-kernel"), ("deep_ep_cpp", "deep-ep"),
              ("deep_gemm", "deep-gemm"), ("vllm", "vllm"), ("torchvision", "torchvision"),
              ("flash_attn_2_cuda", "flash-attn"))
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
#: At most this many .so files are read in one package (vLLM ships about a dozen).
MAX_EXTENSION_FILES = 64


def _torch(machine: Machine) -> tuple[Installed | None, Version | None]:
    installed = machine.distributions.get("torch")
    if installed is None:
        return None, None
    try:
        return installed, Version(installed.version)
    except InvalidVersion:
        return installed, None


@check("torch-pins", "the torch the installed sglang, sgl-kernel, flashinfer, torchvision, vllm "
                     "pin (Requires-Dist) against the torch installed")
def torch_pins(machine: Machine):
    installed, version = _torch(machine)
    if installed is None:
        return skipped(f"torch is not installed for {machine.python}")
    if version is None:
        return skipped(f"torch's version {installed.version!r} is not a version packaging reads")
    pinned, broken = [], []
    for name in DEPENDENTS:
        dependent = machine.distributions.get(name)
        if dependent is None:
            continue
        for requirement, extra in _torch_requirements(dependent):
            where = f"{dependent.name} {dependent.version}{f'[{extra}]' if extra else ''}"
            pinned.append(where)
            if not requirement.specifier.contains(version, prereleases=True):
                broken.append(f"{where} requires torch{requirement.specifier}")
    if not pinned:
        return ok(f"torch {version}: none of {', '.join(DEPENDENTS)} that is installed pins torch")
    if not broken:
        return ok(f"torch {version} satisfies {', '.join(pinned)}")
    source = " (a source build: no released pin matches it)" if version.local or version.pre else ""
    return finding(f"torch {version}{source}: {'; '.join(broken)}",
                   "install the torch they pin (pip install 'torch==<pin>'), or rebuild them from "
                   "source against this torch (pip install --no-build-isolation <their source>)")


def _torch_requirements(dependent: Installed | None):
    """Its Requires-Dist entries on torch that apply here, each with the extra it needs, if any."""
    if dependent is None:
        return
    for text in dependent.requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if normalized(requirement.name) != "torch":
            continue
        extra = _applies(requirement)
        if extra is not None:
            yield requirement, extra


def _applies(requirement: Requirement) -> str | None:
    """'' where the requirement applies to a plain install, the extra where it needs one, None
    where its marker excludes this platform."""
    if requirement.marker is None:
        return ""
    for extra in ["", *_EXTRA.findall(str(requirement.marker))]:
        try:
            if requirement.marker.evaluate({"extra": extra}):
                return extra
        except UndefinedEnvironmentName:
            continue
    return None


@check("torch-duplicates", "more than one torch on the path, or torch's files of another "
                           "version than its metadata")
def torch_duplicates(machine: Machine):
    copies = [(dist.version, _where(dist)) for dist in
              metadata.distributions(name="torch", path=machine.distributions.paths)]
    if not copies:
        return skipped(f"torch is not installed for {machine.python}")
    files = machine.torch.version if machine.torch else None
    listed = "; ".join(f"torch {version} ({where})" for version, where in copies)
    if len(copies) == 1 and (files is None or _public(files) == _public(copies[0][0])):
        return ok(f"one torch: {listed}")
    loaded = f"; import loads torch/version.py of {files}" if files else ""
    return finding(f"{len(copies)} torch installs: {listed}{loaded}" if len(copies) > 1 else
                   f"torch's metadata says {copies[0][0]} but its files are {files}{loaded}",
                   "uninstall torch until none is left (pip uninstall torch, repeated), install "
                   "the one wanted, then reinstall what pulled the other in with --no-deps "
                   "(often torchvision: pip install --no-deps torchvision==<its match>)")


def _public(version: str) -> str:
    """The version without its local label: a wheel's metadata says 2.14.1 where its
    torch/version.py says 2.14.1+cu130."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def _where(dist: metadata.Distribution) -> str:
    return str(dist.locate_file(""))


@check("torch-abi", "torch C++ symbols that sgl-kernel, DeepEP, vllm or torchvision's .so files "
                    "need and torch's libraries do not define (read from ELF, as nm -D)")
def torch_abi(machine: Machine):
    torch_lib = machine.first_dir("torch", "lib")
    if torch_lib is None:
        return skipped(f"torch is not installed for {machine.python}")
    libraries = sorted({*torch_lib.glob("libtorch*.so*"), *torch_lib.glob("libc10*.so*")})
    if not libraries:
        return skipped(f"{torch_lib} holds no libtorch*.so or libc10*.so")
    torch_version = machine.distributions.version("torch") or "?"
    read, broken, unreadable = [], [], []
    for module, shipped_by in EXTENSIONS:
        for so in extension_files(machine, module):
            try:
                needed = undefined_torch_symbols(so)
                read.append(so)
                missing = missing_from(libraries, needed)
            except Unreadable as problem:
                if problem.path != so:  # torch's own library: nothing can be judged against it
                    return finding(f"torch {torch_version}'s {problem.path} cannot be read as ELF "
                                   f"({_said(problem.problem)}): import torch fails or loads a "
                                   "damaged library",
                                   f"reinstall torch {torch_version} (pip install --force-reinstall "
                                   "--no-deps torch==<its version>)")
                unreadable.append((so, shipped_by, problem.problem))
                continue
            if missing:
                broken.append((so, shipped_by, missing))
    if not read and not unreadable:
        return skipped("no torch extension installed (" + ", ".join(m for m, _ in EXTENSIONS) + ")")
    if not broken and not unreadable:
        return ok(f"{len(read)} extension files, every torch symbol they need defined by torch "
                  f"{torch_version} ({torch_lib})")
    from ...demangle import demangle

    said, fixes = [], []
    if broken:
        so, shipped_by, missing = broken[0]
        others = f"; also {', '.join(b[0].name for b in broken[1:])}" if broken[1:] else ""
        said.append(f"{so} needs {len(missing)} torch symbols torch {torch_version} does not "
                    f"define, e.g. {demangle(missing[0])} ({missing[0]}): import fails with "
                    f"'undefined symbol'{others}")
        fixes.append(f"install the {shipped_by} built for torch {torch_version} (the version its "
                     "wheel names or sglang pins), or build it from source against this torch "
                     "(pip install --no-build-isolation)")
    if unreadable:
        said.append("; ".join(f"{so} cannot be read as ELF ({_said(problem)})"
                              for so, _, problem in unreadable) + ": import fails")
        fixes.append("reinstall " + ", ".join(dict.fromkeys(shipped_by for _, shipped_by, _ in unreadable))
                     + " (pip install --force-reinstall --no-deps)")
    return finding("; ".join(said), "; ".join(fixes))


def _said(problem: Exception) -> str:
    """pyelftools' and struct's messages, one line, named by the error when they say nothing."""
    text = " ".join(str(problem).split())
    return text or type(problem).__name__


def extension_files(machine: Machine, module: str) -> list[Path]:
    """The .so files of ``module`` as import would find it: its package folder, or its own
    top-level ``module*.so``, in the first path that has either."""
    for path in machine.distributions.paths:
        folder = Path(path, module)
        if folder.is_dir():
            return sorted(folder.rglob("*.so"))[:MAX_EXTENSION_FILES]
        files = sorted(Path(path).glob(f"{module}.*so"))
        if files:
            return files[:1]
    return []
