"""Is a module image one of Triton's JIT-compiled kernels? Look for it, byte for byte, in a
Triton cache (``$TRITON_CACHE_DIR``, default ``~/.triton/cache``: one folder per compilation
hash holding ``<kernel>.cubin`` beside ``<kernel>.json``, its metadata)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def cached_cubin(image: bytes, caches: list[Path]) -> tuple[Path, dict] | None:
    """The cache's cubin that is this image, with its metadata ({} where it has none)."""
    wanted = hashlib.sha256(image).digest()
    for cache in caches:
        for cubin in sorted(cache.glob("*/*.cubin")):
            try:
                if cubin.stat().st_size != len(image) or \
                        hashlib.sha256(cubin.read_bytes()).digest() != wanted:
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
