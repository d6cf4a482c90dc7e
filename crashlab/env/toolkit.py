"""The CUDA toolkit a source build would use: CUDA_HOME and its nvcc.

CUDA_HOME is found as torch's extension builder finds it (``_find_cuda_home`` in
torch/utils/cpp_extension.py, which ``sglang.check_env`` reports): the CUDA_HOME variable, else
CUDA_PATH, else the folder above the ``bin/`` of the nvcc on PATH, else /usr/local/cuda when it
exists. nvcc is that home's ``bin/nvcc``, else the one on PATH.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .host import Host

#: "Cuda compilation tools, release 12.8, V12.8.93"
_RELEASE = re.compile(r"release (?P<release>\d+(?:\.\d+)*), V(?P<version>\d+(?:\.\d+)*)")


def cuda_home(host: Host) -> tuple[str | None, str | None]:
    """(the folder, what named it)."""
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if host.environ.get(variable):
            return host.environ[variable], variable
    nvcc = shutil.which("nvcc", path=host.search_path)
    if nvcc:
        return str(Path(nvcc).parent.parent), "nvcc on PATH"
    if Path("/usr/local/cuda").is_dir():
        return "/usr/local/cuda", "/usr/local/cuda"
    return None, None


def nvcc_path(host: Host, home: str | None) -> str | None:
    if home and Path(home, "bin", "nvcc").is_file():
        return str(Path(home, "bin", "nvcc"))
    return shutil.which("nvcc", path=host.search_path)


def nvcc_version(output: str) -> tuple[str | None, str | None]:
    """(release, version) from ``nvcc --version``."""
    match = _RELEASE.search(output)
    return (match["release"], match["version"]) if match else (None, None)
