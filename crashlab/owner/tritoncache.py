"""Is a module image one of Triton's JIT-compiled kernels? Look for it in a Triton cache
(``$TRITON_CACHE_DIR``, default ``~/.triton/cache``: one folder per compilation hash holding
``<kernel>.cubin`` beside ``<kernel>.json``, its metadata).

A dump holds the image as the driver relocated it, so its bytes differ from the cache's file
where addresses were patched; what relocation leaves alone is which code sections there are and
their sizes. An image matches a cached cubin with the same ``.text.<function>`` sections, each of
the same size.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from ..cubin import Cubin, CubinError

_CODE = ".text."
#: a cubin larger than this is no JIT kernel's (they are kilobytes to a few MiB): skipped unread
MAX_CUBIN_BYTES = 256 * 2**20
#: a kernel's metadata is a few kilobytes
MAX_METADATA_BYTES = 2**20


def code_shape(image: Cubin) -> tuple[tuple[str, int], ...]:
    """The image's code sections, by name and size, sorted."""
    return tuple(sorted((section.name, section.size) for section in image.sections
                        if section.name.startswith(_CODE)))


def _shape_of(data: bytes) -> tuple[tuple[str, int], ...]:
    """The code shape of a cached cubin's bytes; () where they are not a readable cubin."""
    try:
        return code_shape(Cubin(data))
    except CubinError:
        return ()


def cached_cubin(image: Cubin, caches: list[Path]) -> tuple[Path, dict] | None:
    """The cache's cubin with this image's code, with its metadata ({} where it has none)."""
    wanted = code_shape(image)
    if not wanted:
        return None
    for cache in caches:
        for cubin in sorted(cache.glob("*/*.cubin")):
            found = _regular_bytes(cubin, MAX_CUBIN_BYTES)
            if found is not None and _shape_of(found) == wanted:
                return cubin, _metadata(cubin.with_suffix(".json"))
    return None


def _regular_bytes(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file of at most ``limit`` bytes in a real folder of the cache;
    None for anything else: a FIFO would block the read forever, a device or a huge file would
    never end, a link may lead out of the cache."""
    try:
        if not stat.S_ISDIR(path.parent.lstat().st_mode):
            return None
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        try:
            found = os.fstat(descriptor)
            if not stat.S_ISREG(found.st_mode) or found.st_size > limit:
                return None
            data = file.read(limit + 1)
        except OSError:
            return None
    return data if len(data) <= limit else None


def _metadata(path: Path) -> dict:
    text = _regular_bytes(path, MAX_METADATA_BYTES)
    try:
        value = json.loads(text) if text is not None else {}
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past Python's stack
        return {}
    return value if isinstance(value, dict) else {}
