"""crashlab: crash forensics for GPU LLM serving.

``crashlab.inspect(path)`` reads a CUDA GPU coredump without a GPU and returns a TriageReport;
``crashlab.read_hang(run_dir)`` reads a hang capture across its ranks and returns a HangReading.
"""

from .version import __version__

__all__ = ["inspect", "read_hang", "TriageReport", "__version__"]


def __getattr__(name: str):
    """``inspect`` and ``TriageReport`` on first use: ``crashlab replay`` and
    ``crashlab.replay`` need neither the coredump reader nor the report model."""
    if name == "inspect":
        from .api import inspect
        return inspect
    if name == "read_hang":
        from .api import read_hang
        return read_hang
    if name == "TriageReport":
        from .report.model import TriageReport
        return TriageReport
    raise AttributeError(f"module 'crashlab' has no attribute {name!r}")
