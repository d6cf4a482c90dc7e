"""What a module image (a cubin the dump holds) says about who built it.

Read on the production cubins carved from sglang-kernel 0.4.10 and vllm 0.33.0
(fixtures/cubins/production): none has a ``.comment`` section or a producer string naming its
wheel; every one has a ``.note.nv.tkinfo`` note (type 2000) whose strings are the tool, the
toolkit release and its build and the options (``ptxas``, ``Cuda compilation tools, release
13.0, V13.0.88``, ``-arch sm_100f -m 64``): crashlab.cubin.Cubin.toolchain. That names the
toolchain, not the owner; what tells one wheel's cubin from another's is the names of the
kernels built into it (a cubin from sgl-kernel holds ``expert_specialization::`` kernels beside
its CUTLASS ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cubin import Cubin, CubinError
from ..demangle import demangle


@dataclass(frozen=True)
class ImageFacts:
    """The toolchain line of the note (None where there is none) and the image's function names,
    demangled."""

    toolchain: str | None = None
    functions: list[str] = field(default_factory=list)


def read_image(image: Cubin) -> ImageFacts:
    """The facts of one cubin; a damaged image gives none (the owner is then named from other
    clues)."""
    try:
        return ImageFacts(toolchain=image.toolchain, functions=_functions(image))
    except CubinError:
        return ImageFacts()


def _functions(image: Cubin) -> list[str]:
    return sorted({demangle(symbol.name) for symbol in image.symbols
                   if symbol.type == "STT_FUNC" and symbol.name and not symbol.name.startswith("$")})
