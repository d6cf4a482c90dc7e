"""Installed Python distributions, read from their metadata and never imported.

Importing torch or sglang to ask its version initialises CUDA in some builds and takes seconds in
all of them; the metadata answers in milliseconds and also says what each package was built
against (its Requires-Dist pins). Lookup follows the search path as the import system does: the
first distribution of a name wins.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.message import Message
from importlib import metadata
from pathlib import Path
from typing import cast


def normalized(name: str) -> str:
    """PEP 503's normal form: ``sgl_kernel``, ``SGL-Kernel`` and ``sgl.kernel`` are one name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Installed:
    name: str
    version: str
    requires: tuple[str, ...]
    #: the folder the distribution's files are relative to (its site-packages)
    location: Path
    metadata_dir: Path

    def files(self) -> list[str]:
        """Its files as RECORD lists them, relative to ``location`` (read on demand: RECORD of a
        large wheel runs to thousands of lines)."""
        try:
            return [str(item) for item in metadata.PathDistribution(self.metadata_dir).files or ()]
        except (OSError, ValueError):
            return []


_METADATA_DIR = re.compile(r"^(?P<name>[^-]+)(-[^-]*)?\.(dist-info|egg-info)$")


class Distributions:
    """The distributions visible from ``paths``, by normalised name.

    Only folder names are listed up front (``sgl_kernel-0.3.9.dist-info``); a distribution's
    METADATA is parsed when it is asked for, so a site-packages of 400 distributions costs a
    directory listing, not 400 parses."""

    def __init__(self, paths: Iterable[str]):
        self.paths = [path for path in paths if path]
        self._folders: dict[str, Path] = {}
        self._read: dict[str, Installed | None] = {}
        for path in self.paths:
            try:
                entries = sorted(os.scandir(path), key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                match = _METADATA_DIR.match(entry.name)
                if match and entry.is_dir():
                    self._folders.setdefault(normalized(match["name"]), Path(entry.path))

    def get(self, name: str) -> Installed | None:
        key = normalized(name)
        if key not in self._read:
            folder = self._folders.get(key)
            self._read[key] = _installed(folder) if folder else None
        return self._read[key]

    def version(self, name: str) -> str | None:
        found = self.get(name)
        return found.version if found else None

    def names(self) -> list[str]:
        return sorted(self._folders)

    def module_file(self, *parts: str) -> Path | None:
        """The first ``site/part/...`` file that exists on the paths, as ``import`` would find it."""
        for path in self.paths:
            candidate = Path(path, *parts)
            if candidate.is_file():
                return candidate
        return None


def _installed(folder: Path) -> Installed | None:
    dist = metadata.PathDistribution(folder)
    try:
        # an email Message (whose get() gives None for a missing field); typeshed's
        # PackageMetadata protocol lists no get()
        meta = cast(Message, dist.metadata)
        name = meta.get("Name") if meta else None
        requires = tuple(dist.requires or ())
    except (OSError, ValueError):
        return None
    if not name:
        return None
    return Installed(name=name, version=meta.get("Version") or "", requires=requires,
                     location=folder.parent, metadata_dir=folder)


@dataclass(frozen=True)
class TorchBuild:
    version: str | None
    cuda: str | None
    hip: str | None
    git_version: str | None
    debug: bool | None


def torch_build(distributions: Distributions) -> TorchBuild | None:
    """torch's own build facts, from the ``torch/version.py`` its build wrote, read as text.

    Its metadata says only the version; the CUDA it was built with and its git commit are in that
    file (``cuda = '12.8'``, ``git_version = '…'``), which ``torch.version`` merely imports."""
    source = distributions.module_file("torch", "version.py")
    if source is None:
        return None
    try:
        tree = ast.parse(source.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    values = {}
    for node in tree.body:
        target, value = _assignment(node)
        if target is None or value is None:
            continue
        try:
            values[target] = ast.literal_eval(value)
        except ValueError:
            continue
    return TorchBuild(version=_text(values.get("__version__")), cuda=_text(values.get("cuda")),
                      hip=_text(values.get("hip")), git_version=_text(values.get("git_version")),
                      debug=values.get("debug") if isinstance(values.get("debug"), bool) else None)


def _assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id, node.value
    return None, None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None
