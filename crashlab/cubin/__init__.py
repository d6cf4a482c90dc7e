"""What the GPU ran, one cubin at a time: each cubin opened once (crashlab.cubin.image.Cubin), its
line table (lines), its ``.nv.info`` records, parameter layouts, frame and shared sizes (nvinfo),
and one exception for a damaged one (errors.CubinError). No dump is needed: the coredump reader
hands out the cubins a dump holds (crashlab.coredump.core.CoreDump.cubin)."""

from .errors import CubinError
from .image import Cubin

__all__ = ["Cubin", "CubinError"]
