"""Hangs explained: what the warps of a dump with no exception wait for.

``explain_waits(core, finder)`` gives, per launch, one report.Wait per class of warps: at a
barrier after an early return, at a barrier, polling memory, waiting on a peer in a collective
kernel, or elsewhere, each with its counts and evidence.
"""

from .classify import explain_waits

__all__ = ["explain_waits"]
