"""SGLang crash dumps: safe loading, faithful replay against a server, minimization.

``crashlab.replay.load(path) -> CrashDump`` reads a dump without importing sglang or running
anything it names.
"""

from .loader import load
from .records import CrashDump, Request

__all__ = ["load", "CrashDump", "Request"]
