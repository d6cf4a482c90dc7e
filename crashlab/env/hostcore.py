"""Whether a crashing server leaves a host core, and where the kernel puts it.

The one judgement behind both ``crashlab doctor`` (its core-ulimit and core-pattern checks) and
``crashlab serve`` (which raises the server's core limit and collects its core): they must never
disagree on what is missing. Kept free of the supervisor so that doctor stays light.
"""

from __future__ import annotations

import glob
import re
import resource
from dataclasses import dataclass
from pathlib import Path

UNLIMITED = "unlimited"


def hard_limit() -> str:
    """This process's hard RLIMIT_CORE in /proc/PID/limits' spelling ("unlimited" or bytes)."""
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    return UNLIMITED if hard == resource.RLIM_INFINITY else str(hard)


def limit_problem(hard: str) -> str | None:
    """Why a server started by crashlab serve writes no host core, or None. serve raises the
    server's soft limit up to the hard one, so only a hard limit of 0 stops it."""
    if hard.strip() != "0":
        return None
    return ("the hard core limit (ulimit -Hc) is 0 and only root can raise it: "
            "a crashing server leaves no host core")


@dataclass(frozen=True)
class Destination:
    """Where kernel.core_pattern sends a core: a file (``pattern``), or a pipe to ``program``."""

    pattern: str
    program: str | None = None

    @property
    def handler(self) -> str | None:
        """systemd-coredump, apport, or None for a plain file or another program."""
        if self.program is None:
            return None
        return next((name for name in ("systemd-coredump", "apport") if name in self.program), None)

    @property
    def folder(self) -> Path | None:
        """The folder an absolute file pattern writes into (None: the process's cwd, or a pipe)."""
        return Path(self.pattern).parent if self.program is None and self.pattern.startswith("/") else None

    def where(self) -> str:
        """One line: where the cores go."""
        if self.program is not None:
            kept = {"systemd-coredump": "systemd-coredump keeps them: coredumpctl list",
                    "apport": "apport keeps them: /var/crash"}.get(self.handler or "",
                                                                   f"{self.program} receives them")
            return (f"core_pattern pipes cores to {self.program}; {kept} (a pipe handler runs on "
                    "the host, outside any container)")
        if self.folder is None:
            return f"core_pattern {self.pattern!r}: cores land in the crashing process's working directory"
        return f"core_pattern {self.pattern!r}: cores land in {self.folder}"

    def problem(self) -> str | None:
        """Why no core is written at all, or None."""
        if self.folder is not None and not self.folder.is_dir():
            return f"core_pattern {self.pattern!r}, but {self.folder} does not exist: the kernel writes no core"
        return None

    def glob(self, pid: int, cwd: Path, uses_pid: bool) -> str | None:
        """A glob for the core file of process PID (None for a pipe): %p/%P/%i/%I are the pid,
        %% a percent sign, any other specifier (%e, %t, %h, ...) a wildcard; a relative pattern
        is in the process's cwd; core_uses_pid appends .PID where the pattern has no %p."""
        if self.program is not None:
            return None
        parts = re.split(r"(%.)", self.pattern)
        expanded = "".join(str(pid) if part in ("%p", "%P", "%i", "%I") else "%" if part == "%%"
                           else "*" if part.startswith("%") and len(part) == 2 else glob.escape(part)
                           for part in parts)
        if uses_pid and "%p" not in self.pattern:
            expanded += f".{pid}"
        return expanded if self.pattern.startswith("/") else f"{glob.escape(str(cwd))}/{expanded}"


def destination(pattern: str) -> Destination:
    pattern = pattern.strip()
    if pattern.startswith("|"):
        words = pattern[1:].split()
        return Destination(pattern, words[0] if words else "?")
    return Destination(pattern)


def read_destination(proc: Path = Path("/proc")) -> Destination | None:
    """kernel.core_pattern as this process sees it, or None where it cannot be read."""
    try:
        pattern = (proc / "sys" / "kernel" / "core_pattern").read_text().strip()
    except OSError:
        return None
    return destination(pattern) if pattern else None


def uses_pid(proc: Path = Path("/proc")) -> bool:
    try:
        return (proc / "sys" / "kernel" / "core_uses_pid").read_text().strip() == "1"
    except OSError:
        return False
