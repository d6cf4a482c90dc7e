"""The one way the cubin layer says a cubin is damaged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class CubinError(ValueError):
    """A cubin, or one part of it, that cannot be read. ``part`` names the part (``.debug_line``,
    ``.nv.info``), None for the ELF itself; the message says why."""

    def __init__(self, message: str, part: str | None = None):
        super().__init__(message)
        self.part = part


@contextmanager
def reading(part: str | None) -> Iterator[None]:
    """Turns whatever a reader raises while reading ``part`` into a CubinError: a damaged image
    makes struct and the decoders raise many types (IndexError, KeyError, struct.error,
    ValueError)."""
    try:
        yield
    except CubinError:
        raise
    except Exception as exc:
        raise CubinError(str(exc) or type(exc).__name__, part) from exc
