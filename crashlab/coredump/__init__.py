"""Native reader of CUDA GPU coredumps (.nvcudmp): no GPU, no cuda-gdb."""

from .core import CoreDump

__all__ = ["CoreDump"]
