"""Whose code faulted, and is a fix for it known: the artifact (wheel or library) that owns a
faulting kernel, named from what the crash left, each fact kept as evidence."""

from .decide import Clues, owner_of, refined

__all__ = ["Clues", "owner_of", "refined"]
