"""Crash signatures: what makes two crashes the same bug, across runs, ranks, nodes and restarts.

``compute(report) -> CrashSignature`` for a TriageReport (``crashlab inspect``), a RunReport or one
of its Incidents (``crashlab serve``); ``compute_all(run)`` adds each dump's own. (Not to be
confused with crashlab.replay.signature, replay's test of whether a replay crashed the same way.)

The published CrashSignature itself is part of the reports' model (crashlab.report.signature):
the rules here read those models and make one, so the import runs one way, from here down. The
functions are imported on first use (PEP 562): the command line imports this package cheaply.
"""

__all__ = ["Signed", "compute", "compute_all"]


def __getattr__(name: str):
    if name in ("Signed", "compute", "compute_all"):
        from . import signing

        return getattr(signing, name)
    raise AttributeError(f"module 'crashlab.signature' has no attribute {name!r}")
