"""What a module image (a cubin the dump holds) says about who built it.

Read on the production cubins carved from sglang-kernel 0.4.10 and vllm 0.33.0
(fixtures/cubins/production): none has a ``.comment`` section or a producer string naming its
wheel; every one has a ``.note.nv.tkinfo`` note (type 2000) whose strings are the tool, the
toolkit release and its build and the options (``ptxas``, ``Cuda compilation tools, release
13.0, V13.0.88``, ``-arch sm_100f -m 64``). That names the toolchain, not the owner; what tells
one wheel's cubin from another's is the names of the kernels built into it (a cubin from
sgl-kernel holds ``expert_specialization::`` kernels beside its CUTLASS ones).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection, SymbolTableSection

from ..demangle import demangle

#: The note NVIDIA's tools write into a cubin with the toolkit that built it.
TOOLKIT_NOTE = ".note.nv.tkinfo"
#: Symbol type of a function (kernels and device functions) in a cubin's symbol table.
_FUNCTION = "STT_FUNC"


@dataclass(frozen=True)
class ImageFacts:
    """The toolchain line of the note (None where there is none) and the image's function names,
    demangled."""

    toolchain: str | None = None
    functions: list[str] = field(default_factory=list)


def read_image(image: bytes) -> ImageFacts:
    """The facts of one cubin; an unreadable image gives none (the owner is then named from
    other clues)."""
    try:
        elf = ELFFile(io.BytesIO(image))
        return ImageFacts(toolchain=_toolchain(elf), functions=_functions(elf))
    except (ELFError, ValueError, KeyError, OSError):
        return ImageFacts()


def _toolchain(elf: ELFFile) -> str | None:
    section = elf.get_section_by_name(TOOLKIT_NOTE)
    if not isinstance(section, NoteSection):
        return None
    for note in section.iter_notes():
        raw = note["n_desc"]
        data = raw.encode("latin-1") if isinstance(raw, str) else bytes(raw)
        words = [piece.decode("utf-8", "replace") for piece in data.split(b"\0")]
        strings = [word.strip() for word in words if word.strip() and word.isprintable()]
        if strings:
            return ", ".join(strings[-4:])  # the tool, the release, its build, the options
    return None


def _functions(elf: ELFFile) -> list[str]:
    table = elf.get_section_by_name(".symtab")
    if not isinstance(table, SymbolTableSection):
        return []
    return sorted({demangle(symbol.name) for symbol in table.iter_symbols()
                   if symbol["st_info"]["type"] == _FUNCTION and symbol.name
                   and not symbol.name.startswith("$")})
