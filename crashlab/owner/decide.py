"""owner_of: the artifact that owns a faulting kernel and its version, every fact kept as
evidence, and how a known fix stands against that version.

The clues, most telling first: the module image's code found in a Triton JIT cache; the
kernel's own name; the names of the other kernels in its module image (a CUTLASS template is
whoever's instantiates it); then, for the version, the environment's package list and the
libraries the server had loaded (its /proc/PID/maps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..cubin import Cubin
from ..report.model import Owner
from ..report.text import readable_name
from . import image, maps, names, tritoncache

if TYPE_CHECKING:
    from .fixes import FixTable

#: The distributions an artifact is published as, most likely first.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "flashinfer": ("flashinfer-python", "flashinfer-cubin"),
    "flashinfer-jit": ("flashinfer-python", "flashinfer-jit-cache"),
    "sgl-kernel": ("sglang-kernel", "sgl-kernel"),
    "vllm": ("vllm",),
    "torch": ("torch",),
    "triton-jit": ("triton", "pytorch-triton"),
    "cudnn": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"),
    "cublas": ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"),
    "nccl": ("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
}
#: A name shown in an evidence line is cut to this many characters.
NAME_SHOWN = 100
#: A soname's version is taken only when it is this precise (libcudnn.so.9 names a series).
_PARTS_OF_A_RELEASE = 3


@dataclass(frozen=True)
class Clues:
    """What a crash left that can name the owner of its faulting kernel."""

    kernel: str
    """The faulting kernel's demangled name."""
    image: Cubin | None = None
    """The module image (cubin) holding the faulting PC."""
    maps: str = ""
    """/proc/PID/maps of the server's processes, as serve recorded them."""
    packages: dict[str, str] = field(default_factory=dict)
    """Installed distributions (any spelling) and their versions."""
    triton_caches: tuple[Path, ...] = ()
    """Triton JIT caches to look for the module image in."""
    signature: str | None = None
    """The crash signature, for fixes keyed by signature."""


def owner_of(clues: Clues, table: FixTable | None = None) -> Owner:
    evidence: list[str] = []
    facts = image.read_image(clues.image) if clues.image is not None else image.ImageFacts()
    if facts.toolchain:
        evidence.append(f"module image built by: {facts.toolchain}")
    return _versioned(_artifact(clues, facts, evidence), evidence, clues, table)


def refined(owner: Owner, clues: Clues, table: FixTable | None = None) -> Owner:
    """``owner`` (named from the dump alone) with the version and fix status that the server's
    package list and loaded libraries give; serve has them, a lone dump does not."""
    return _versioned(owner.artifact, list(owner.evidence), clues, table)


def _versioned(artifact: str, evidence: list[str], clues: Clues,
               table: FixTable | None) -> Owner:
    version = _version(artifact, clues, evidence)
    if artifact == names.UNKNOWN:  # no row is in it (FixEntry refuses one): no table is read
        return Owner.model_construct(artifact=artifact, version=version, evidence=evidence,
                                     fix=None, fix_status="no-known-fix")
    from . import fixes  # the table, its models and packaging: for a named artifact only

    fix = fixes.find(table or fixes.shipped(), artifact, names.bare(clues.kernel), clues.signature)
    return Owner.model_construct(artifact=artifact, version=version, evidence=evidence,
                                 fix=fix.known() if fix else None,
                                 fix_status=fixes.status(fix, version))


def _artifact(clues: Clues, facts: image.ImageFacts, evidence: list[str]) -> str:
    if clues.image is not None and clues.triton_caches:
        cached = tritoncache.cached_cubin(clues.image, list(clues.triton_caches))
        if cached is not None:
            path, metadata = cached
            named = f" (its metadata names kernel {metadata['name']})" if "name" in metadata else ""
            evidence.append(f"module image has the code sections of {path}, in a Triton JIT cache"
                            f"{named}")
            return "triton-jit"
    own = names.artifact_named(clues.kernel)
    if own is not None and own not in names.GENERIC:
        evidence.append(f"kernel name {_shown(clues.kernel)} is {own}'s by its prefix")
        return own
    for function in facts.functions:
        sibling = names.artifact_named(function)
        if sibling is not None and sibling not in names.GENERIC:
            evidence.append(f"its module image also holds {_shown(function)}, {sibling}'s by its "
                            "prefix")
            return sibling
    if own is not None:
        evidence.append(f"kernel name {_shown(clues.kernel)} is a {own} template; nothing in its "
                        "module image names the library it was built into")
        return own
    evidence.append("no known library prefix in the kernel's name nor in any other function "
                    "name its module image holds")
    return names.UNKNOWN


def _version(artifact: str, clues: Clues, evidence: list[str]) -> str | None:
    version = None
    installed = _by_normal_name(clues.packages)
    for distribution in DISTRIBUTIONS.get(artifact, ()):
        if distribution in installed:
            evidence.append(f"package list: {distribution} {installed[distribution]}")
            version = installed[distribution]
            break
    for library in maps.loaded(clues.maps):
        if library.artifact != artifact:
            continue
        evidence.append(f"loaded by the server: {library.path}")
        if version is None and library.version and \
                len(library.version.split(".")) >= _PARTS_OF_A_RELEASE:
            version = library.version
    return version


def _by_normal_name(packages: dict[str, str]) -> dict[str, str]:
    """The package list by PEP 503 name. Only serve has one: a lone dump's owner imports nothing
    of env/ (its package reader brings importlib.metadata and email)."""
    if not packages:
        return {}
    from ..env.packages import normalized

    return {normalized(name): version for name, version in packages.items()}


def _shown(name: str) -> str:
    return readable_name(names.bare(name), NAME_SHOWN)
