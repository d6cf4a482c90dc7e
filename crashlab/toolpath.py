"""Where crashlab looks for a CUDA toolkit program (nvdisasm, cuda-gdb): one search order."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: The checkout this package runs from, where it runs from one (an editable install); a wheel's
#: package sits in site-packages, with no checkout around it. Not resolved: a package reached
#: through a link runs from the folder that holds the link.
CHECKOUT = Path(os.path.abspath(__file__)).parent.parent
#: What marks ``CHECKOUT`` as crashlab's checkout, and where that script puts NVIDIA's cuda-gdb
#: 12.4 and its tools (cuobjdump, nvdisasm).
CHECKOUT_MARK = Path(".ci") / "get-cuda-gdb"
CHECKOUT_TOOLS = Path(".cuda-gdb") / "bin"


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
        if _executable(candidate):
            return str(candidate), ""
    return None, ""


def checkout_tools() -> Path | None:
    """The folder .ci/get-cuda-gdb fills in the checkout crashlab runs from; None where crashlab
    runs from no checkout (a wheel)."""
    return CHECKOUT / CHECKOUT_TOOLS if (CHECKOUT / CHECKOUT_MARK).is_file() else None


def checkout_tool(name: str) -> str | None:
    """``name`` as .ci/get-cuda-gdb put it in this checkout, if it did."""
    folder = checkout_tools()
    return str(folder / name) if folder is not None and _executable(folder / name) else None


def _executable(path: Path) -> bool:
    return os.access(path, os.X_OK) and path.is_file()
