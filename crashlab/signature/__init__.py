"""Crash signatures: what makes two crashes the same bug, across runs, ranks, nodes and restarts.

``compute(report) -> CrashSignature`` for a TriageReport (``crashlab inspect``), a RunReport or one
of its Incidents (``crashlab serve``); ``compute_all(run)`` adds each dump's own. (Not to be
confused with crashlab.replay.signature, replay's test of whether a replay crashed the same way.)

The reports' models hold a CrashSignature, and computing one reads those models: so the model is
imported here at once and the functions on first use (PEP 562), which keeps the import one way.
"""

from .model import VERSION, CrashSignature

__all__ = ["VERSION", "CrashSignature", "Signed", "compute", "compute_all"]


def __getattr__(name: str):
    if name in ("Signed", "compute", "compute_all"):
        from . import signing

        return getattr(signing, name)
    raise AttributeError(f"module 'crashlab.signature' has no attribute {name!r}")
