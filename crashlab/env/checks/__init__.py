"""crashlab doctor's checks, one module per concern; ``ALL`` in the order they are shown."""

from . import builds, capture, flashinfer, toolchain
from .base import Check, Machine, Outcome

ALL: tuple[Check, ...] = (*builds.CHECKS, *toolchain.CHECKS, *flashinfer.CHECKS, *capture.CHECKS)

__all__ = ["ALL", "Check", "Machine", "Outcome"]
