"""FlashInfer's own files: the optional modules it imports, its companion wheels, its JIT cache.

FlashInfer imports some modules only where a kernel needs them: its NVSHMEM kernels import
``nvidia.nvshmem`` (flashinfer/jit/env.py), which no wheel of FlashInfer requires, and which a
source-built torch does not pull in either, so SGLang dies mid-start with ``No module named
'nvidia.nvshmem'`` (flashinfer#1511). flashinfer-cubin and flashinfer-jit-cache must be of
FlashInfer's own version, or its import raises. Its JIT cache,
``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<archs>/cached_ops/<module>/``, is keyed
by version only and judged by ninja on file times: a reinstall of the same version with other
bytes reuses modules built from the old sources (flashinfer#4489).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from .base import Machine, finding, ok, registry, skipped

CHECKS, check = registry("flashinfer")

#: (module, what imports it in FlashInfer's source, the wheel that provides it ({cuda}: the CUDA
#: major version), variables that make FlashInfer look elsewhere instead)
OPTIONAL_MODULES = (
    ("nvidia.nvshmem", re.compile(r"^\s*(import nvidia\.nvshmem|from nvidia(\.nvshmem)? import)",
                                  re.MULTILINE),
     "nvidia-nvshmem-cu{cuda}", ("NVSHMEM_INCLUDE_PATH", "NVSHMEM_LIBRARY_PATH")),
    ("nvshmem", re.compile(r"^\s*(import nvshmem\b|from nvshmem(\.\w+)* import)", re.MULTILINE),
     "nvshmem4py-cu{cuda}", ()),
)
#: FlashInfer's sources that hold those imports (read as text, never imported).
SOURCES = ("jit/env.py", "comm/*.py", "jit/comm/*.py")


def _flashinfer(machine: Machine):
    installed = machine.distributions.get("flashinfer-python") or machine.distributions.get("flashinfer")
    package = machine.first_dir("flashinfer")
    if installed is None or package is None:
        return None, None, skipped(f"flashinfer is not installed for {machine.python}")
    return installed, package, None


@check("flashinfer-optional-modules", "modules FlashInfer imports for some kernels "
                                      "(nvidia.nvshmem) missing from the path")
def optional_modules(machine: Machine):
    installed, package, why = _flashinfer(machine)
    if why:
        return why
    text = "\n".join(path.read_text(encoding="utf-8", errors="replace")
                     for pattern in SOURCES for path in sorted(package.glob(pattern)))
    wanted = [entry for entry in OPTIONAL_MODULES if entry[1].search(text)]
    if not wanted:
        return ok(f"flashinfer {installed.version} imports none of "
                  f"{', '.join(m for m, *_ in OPTIONAL_MODULES)}")
    found, missing = [], []
    for module, _, wheel, variables in wanted:
        if variables and all(machine.host.environ.get(v) for v in variables):
            found.append(f"{module} (from {', '.join(variables)})")
        elif machine.first_dir(*module.split(".")):
            found.append(module)
        else:
            missing.append((module, wheel, variables))
    if not missing:
        return ok(f"flashinfer {installed.version} imports {', '.join(found)}: present")
    cuda = (machine.torch.cuda or "12").split(".")[0] if machine.torch else "12"
    module, wheel, variables = missing[0]
    instead = f", or set {' and '.join(variables)} to a system install" if variables else ""
    return finding(f"flashinfer {installed.version} imports {module} for some kernels, and no "
                   f"folder {module.replace('.', '/')} is on {machine.python}'s path: they fail "
                   f"with No module named '{module}'",
                   f"pip install {wheel.format(cuda=cuda)}{instead}")


@check("flashinfer-companions", "flashinfer-cubin and flashinfer-jit-cache of another version "
                                "than flashinfer (its import raises)")
def companions(machine: Machine):
    installed, _, why = _flashinfer(machine)
    if why:
        return why
    version = installed.version
    mismatched: list[str] = []
    matched: list[str] = []
    for name, matches in (("flashinfer-cubin", lambda v: v == version),
                          ("flashinfer-jit-cache", lambda v: v.startswith(version))):
        theirs = machine.distributions.version(name)
        if theirs is not None:
            (matched if matches(theirs) else mismatched).append(f"{name} {theirs}")
    if not mismatched:
        return ok(f"flashinfer {version}" + (f" with {', '.join(matched)}" if matched else
                                             ": no flashinfer-cubin or flashinfer-jit-cache"))
    bypassed = " (FLASHINFER_DISABLE_VERSION_CHECK is set: it loads them anyway)" \
        if machine.host.environ.get("FLASHINFER_DISABLE_VERSION_CHECK") else \
        ": import flashinfer raises 'does not match flashinfer version'"
    return finding(f"flashinfer {version} with {', '.join(mismatched)}{bypassed}",
                   f"install the companions of flashinfer {version} (flashinfer-cubin=={version}; "
                   f"flashinfer-jit-cache=={version}+cu<NN> from FlashInfer's wheel index)")


@check("flashinfer-jit-cache", "FlashInfer JIT modules built before this install of the same "
                               "version (flashinfer#4489: ninja reuses them)")
def jit_cache(machine: Machine):
    installed, _, why = _flashinfer(machine)
    if why:
        return why
    base = machine.host.environ.get("FLASHINFER_WORKSPACE_BASE") or machine.host.environ.get("HOME")
    if not base:
        return skipped("neither FLASHINFER_WORKSPACE_BASE nor HOME is set")
    cache = Path(base, ".cache", "flashinfer", installed.version)
    modules = sorted(cache.glob("*/cached_ops/*/*.so"))
    if not modules:
        return ok(f"no JIT module of flashinfer {installed.version} in {cache}")
    record = installed.metadata_dir / "RECORD"
    try:
        installed_at = record.stat().st_mtime
    except OSError:
        return skipped(f"{record} is missing: the install time is not known")
    older = [so for so in modules if so.stat().st_mtime < installed_at]
    when = datetime.fromtimestamp(installed_at, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if not older:
        return ok(f"{len(modules)} JIT modules in {cache}, all built after flashinfer "
                  f"{installed.version} was installed ({when})")
    return finding(f"{len(older)} of {len(modules)} JIT modules in {cache} were built before "
                   f"flashinfer {installed.version} was installed ({when}), e.g. "
                   f"{older[0].parent.name}: ninja judges them by file times only and reuses them "
                   "even where the new install's sources differ (flashinfer#4489)",
                   f"rm -rf {cache} (FlashInfer rebuilds each module on first use)")
