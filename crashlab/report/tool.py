"""Tool: the program that wrote a JSON document, a model of its own so that a document that is
not a triage report (a dump's listing, a replay result) names its writer without importing the
TriageReport model (a quarter of a listing's start-up)."""

from __future__ import annotations

from ..published import ClosedModel as _Model


class Tool(_Model):
    """The program that wrote the report (every JSON crashlab writes names it so)."""

    name: str = "crashlab"
    """Always 'crashlab'."""
    version: str
    """crashlab's version (crashlab.__version__) when it wrote the report."""
