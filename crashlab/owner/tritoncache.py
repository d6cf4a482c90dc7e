"""Is a module image one of Triton's JIT-compiled kernels? Look for it in a Triton cache
(``$TRITON_CACHE_DIR``, default ``~/.triton/cache``: one folder per compilation hash holding
``<kernel>.cubin`` beside ``<kernel>.json``, its metadata).

A dump holds the image as the driver relocated it, so its bytes differ from the cache's file
where addresses were patched; what relocation leaves alone is which code sections there are and
their sizes. An image matches a cached cubin with the same ``.text.<function>`` sections, each of
the same size.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

_CODE = ".text."


def code_shape(image: bytes) -> tuple[tuple[str, int], ...]:
    """The image's code sections, by name and size, sorted; () where it is not an ELF file."""
    try:
        elf = ELFFile(io.BytesIO(image))
        return tuple(sorted((section.name, section["sh_size"]) for section in elf.iter_sections()
                            if section.name.startswith(_CODE)))
    except (ELFError, ValueError, KeyError, OSError):
        return ()


def cached_cubin(image: bytes, caches: list[Path]) -> tuple[Path, dict] | None:
    """The cache's cubin with this image's code, with its metadata ({} where it has none)."""
    wanted = code_shape(image)
    if not wanted:
        return None
    for cache in caches:
        for cubin in sorted(cache.glob("*/*.cubin")):
            try:
                if code_shape(cubin.read_bytes()) != wanted:
                    continue
            except OSError:
                continue
            return cubin, _metadata(cubin.with_suffix(".json"))
    return None


def _metadata(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
