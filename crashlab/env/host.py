"""Where the environment is read from: the process's own view of the machine by default, a tree
built by a test otherwise, so that every probe and check runs on a constructed machine too."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Host:
    proc: Path = Path("/proc")
    sys: Path = Path("/sys")
    etc: Path = Path("/etc")
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    #: where Python distributions are looked for (sys.path of the interpreter that serves)
    site_paths: tuple[str, ...] = field(default_factory=lambda: tuple(sys.path))
    #: the machine's architecture where /proc/sys/kernel/arch (Linux 6.1+) does not say it
    machine: str = field(default_factory=lambda: os.uname().machine)

    @property
    def search_path(self) -> str:
        return self.environ.get("PATH", os.defpath)

    def read_text(self, path: Path, limit: int = 1 << 20) -> str | None:
        """A small text file's content, or None where it is missing or unreadable; never more than
        ``limit`` bytes, since a file under /proc or /sys can be endless."""
        try:
            with open(path, "rb") as handle:
                return handle.read(limit).decode("utf-8", "replace")
        except OSError:
            return None
