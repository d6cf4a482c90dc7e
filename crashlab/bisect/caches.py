"""Caches a step empties before it builds (``--clear-cache``): a JIT cache such as flashinfer's
keeps kernels compiled by another commit, and a step served from it tests the wrong code.

Only what the user named is removed, and never a folder that holds their own things: the home
directory, the checkout, the output folder, the reproducer, the working directory, or the
release environments bisect keeps.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import BadInput


def checked(folders: tuple[str, ...], keep: list[Path]) -> list[Path]:
    """The --clear-cache folders, each refused when it is or holds something in ``keep``."""
    found = []
    for given in folders:
        folder = Path(given).expanduser().resolve()
        holds = [path for path in keep if path == folder or folder in path.parents]
        if folder == Path(folder.anchor) or holds:
            raise BadInput(f"--clear-cache {given}: it holds {holds[0] if holds else 'everything'}; "
                           "name the cache folder itself")
        found.append(folder)
    return found


def protected(*paths: Path) -> list[Path]:
    """What no --clear-cache may hold: these, the home directory and the working directory."""
    return [path.expanduser().resolve() for path in (*paths, Path.home(), Path.cwd())]


def clear(folders: list[Path]) -> list[str]:
    """Empty each folder that exists (it is removed; the program that uses it makes it again)."""
    cleared = []
    for folder in folders:
        if folder.is_dir():
            shutil.rmtree(folder)
            cleared.append(str(folder))
    return cleared
