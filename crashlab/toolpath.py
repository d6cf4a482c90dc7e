"""Where crashlab looks for a CUDA toolkit program (nvdisasm, cuda-gdb): one search order."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def find_cuda_tool(name: str, override: str) -> tuple[str | None, str]:
    """(path, "") for ``name`` found at $``override``, on PATH, or under CUDA_HOME, CUDA_PATH or
    /usr/local/cuda; (None, "") where it is nowhere; (None, sentence) for a bad override."""
    wanted = os.environ.get(override)
    if wanted:
        found = shutil.which(wanted)
        return (found, "") if found else (None, f"{override}={wanted} is not an executable file")
    found = shutil.which(name)
    if found:
        return found, ""
    homes = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    for home in filter(None, homes):
        candidate = Path(home, "bin", name)
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate), ""
    return None, ""
