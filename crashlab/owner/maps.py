"""The loaded libraries of a server process (its /proc/PID/maps), mapped to their artifacts.

A path tells the artifact by where it lies (``site-packages/flashinfer/``,
``sgl_kernel/``, ``torch/lib/libtorch_cuda.so``, FlashInfer's JIT cache under
``~/.cache/flashinfer/<version>/``, Triton's under ``~/.triton/cache/``) and sometimes its version
(a library's soname suffix, the JIT cache's folder).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: (pattern over a mapped path, artifact); a named group ``version`` is the artifact's version.
LIBRARY_PATHS: tuple[tuple[str, str], ...] = (
    (r"/\.cache/flashinfer/(?P<version>\d[^/]*)/", "flashinfer-jit"),
    (r"/flashinfer(_cubin|_jit_cache)?/", "flashinfer"),
    (r"/sgl_kernel/", "sgl-kernel"),
    (r"/vllm/[^/]*\.so$", "vllm"),
    (r"/torch/lib/libtorch_cuda\.so$", "torch"),
    (r"/libcudnn[a-z_]*\.so(\.(?P<version>\d+(\.\d+)*))?$", "cudnn"),
    (r"/libcublas(Lt)?\.so(\.(?P<version>\d+(\.\d+)*))?$", "cublas"),
    (r"/libnccl\.so(\.(?P<version>\d+(\.\d+)*))?$", "nccl"),
    (r"/\.triton/cache/", "triton-jit"),
)

_COMPILED = tuple((re.compile(pattern), artifact) for pattern, artifact in LIBRARY_PATHS)


@dataclass(frozen=True)
class Loaded:
    """One mapped file that names an artifact."""

    artifact: str
    path: str
    version: str | None


def mapped_paths(text: str) -> list[str]:
    """The distinct files a maps text maps, in order (``address perms offset dev inode path``;
    lines without a path, ``[heap]`` and the like, and comment lines are left out)."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/") and not line.startswith("#"):
            seen.setdefault(fields[5].removesuffix(" (deleted)"), None)
    return list(seen)


def loaded(text: str) -> list[Loaded]:
    """Every mapped file that names an artifact, one per file."""
    found = []
    for path in mapped_paths(text):
        for pattern, artifact in _COMPILED:
            match = pattern.search(path)
            if match:
                found.append(Loaded(artifact, path, match.groupdict().get("version")))
                break
    return found
