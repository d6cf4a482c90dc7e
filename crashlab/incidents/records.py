"""The plain records incidents are built from: one crash of one process, one driver Xid line.

They carry no storage of their own: the crash index fills them from its rows (which it records
from a run's report, crashlab.index.capture), a test writes them by hand. Times are aware
datetimes (UTC in everything crashlab writes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..vocabulary import DumpLabel, Role


@dataclass(frozen=True)
class Crash:
    """One process's crash, as one rank of one server saw it."""

    time: datetime  # its first failure
    host: str
    run_dir: str
    first_line: str  # the line that names the failure (a fault, an exception, a death)
    incarnation: int = 1  # a server restarted by --restart on-crash is a new server life
    deployment: str | None = None  # --deployment label, None where none was given
    role: Role | None = None  # None where unknown (not an SGLang launch line)
    rank: str | None = None  # SGLang's rank tags (TP0, DP1 TP3), where known
    label: DumpLabel | None = None
    signature: str | None = None  # the crash signature's hash, where one was computed
    crash_id: int | None = None  # the crash index's id, for a crash read from the index
    #: the verb that recorded a dump by hand (inspect --record, report on a loose file); None
    #: for a crash of a run crashlab serve supervised. Its run_dir is the dump's path.
    by_hand: str | None = None

    @property
    def server(self) -> tuple[str, str, int]:
        """One server life: the ranks of one incarnation of one run, on one host."""
        return self.host, self.run_dir, self.incarnation


@dataclass(frozen=True)
class XidLine:
    """One ``NVRM: Xid`` line the NVIDIA driver printed in a host's kernel log."""

    time: datetime
    host: str
    xid: int
    text: str  # the message from "NVRM: Xid" on
    device: str = ""  # what the parentheses name: the PCI address (and MIG instance, GPU-I:n)
    run_dir: str | None = None  # the crashlab serve run that read it, where one did
