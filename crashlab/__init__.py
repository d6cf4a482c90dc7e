"""crashlab: crash forensics for GPU LLM serving.

``crashlab.inspect(path)`` reads a CUDA GPU coredump without a GPU and returns a TriageReport.
"""

__version__ = "0.1.0"

from .api import inspect  # noqa: E402
from .report.model import TriageReport  # noqa: E402

__all__ = ["inspect", "TriageReport", "__version__"]
