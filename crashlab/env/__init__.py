"""The machine a crash happened on: what ``crashlab env`` captures and ``crashlab doctor`` checks.

Nothing here imports torch, sglang or any CUDA library, or opens a GPU device: a wedged GPU makes
``torch.cuda`` and nvidia-smi hang, and the environment is wanted most on exactly that machine.
Versions come from package metadata and files read as text; tools run under a timeout.

``capture()`` takes an Environment; ``load(run_dir)`` reads the one ``crashlab serve`` kept.
"""

from .capture import capture
from .model import Environment
from .saved import load

__all__ = ["Environment", "capture", "load"]
