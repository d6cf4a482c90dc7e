"""The server's loaded libraries: /proc/PID/maps of every process of its tree, at start and at
crash, kept in the incarnation's folder (maps-start.txt, maps-crash.txt) for crashlab.owner to
name the library a faulting kernel came from and its version.

A GPU coredump holds the module images, not the path of the library they were loaded from: the
maps are where "sgl_kernel/sm100/common_ops.abi3.so" or "~/.cache/flashinfer/0.6.12/..." is
written. Only file-backed mappings are kept, each process's under a ``# pid N role`` line.
"""

from __future__ import annotations

from pathlib import Path

from . import files

START = "maps-start.txt"
CRASH = "maps-crash.txt"
NAMES = (CRASH, START)


def _file_lines(text: str) -> list[str]:
    """The lines that map a file (``address perms offset dev inode /path``)."""
    return [line for line in text.splitlines()
            if (fields := line.split(None, 5)) and len(fields) == 6 and fields[5].startswith("/")]


def snapshot(processes: list[tuple[int, str]], path: Path) -> bool:
    """Write the file-backed mappings of each (pid, role) still alive to ``path``; False (and
    nothing written) where none could be read."""
    parts = []
    for pid, role in processes:
        try:
            text = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        parts.append("\n".join([f"# pid {pid} {role}", *_file_lines(text)]))
    if not parts:
        return False
    files.write_atomic(path, ("\n".join(parts) + "\n").encode("utf-8", "surrogateescape"))
    return True


def read(folder: Path) -> str:
    """Both snapshots of an incarnation's folder, the crash's first ("" where there is none)."""
    texts = []
    for name in NAMES:
        try:
            texts.append((folder / name).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return "\n".join(texts)
