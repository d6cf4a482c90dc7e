"""Sizes as people write them on a command line: ``25MB``, ``10M``, ``500k``, ``1.5GiB``, ``4096``.

k, M and G are powers of 1000 (GitHub states its 25 MB limit in those); KiB, MiB and GiB powers
of 1024; a bare number is bytes.
"""

from __future__ import annotations

import re

from .errors import BadInput

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")


def parse_size(text: str, what: str = "--max-size") -> int:
    match = _SIZE.fullmatch(text)
    unit = _UNITS.get(match[2].lower()) if match else None
    if not match or not unit:
        raise BadInput(f"{what} {text!r}: not a size (write e.g. 25MB, 10M, 500k or 4096)")
    size = int(float(match[1]) * unit)
    if size <= 0:
        raise BadInput(f"{what} {text!r}: must be more than 0 bytes")
    return size


def shown(size: int) -> str:
    """``26214400`` -> ``26.2 MB``; under 10 kB in bytes."""
    for unit, factor in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= factor and (unit != "kB" or size >= 10**4):
            return f"{size / factor:.1f} {unit}"
    return f"{size} bytes"


def with_bytes(size: int) -> str:
    """``26214400`` -> ``26.2 MB (26,214,400 bytes)``: readable at a glance, exact for a script
    or a comparison with ``ls -l``; under 10 kB the bytes alone."""
    readable = shown(size)
    return readable if readable.endswith("bytes") else f"{readable} ({size:,} bytes)"
