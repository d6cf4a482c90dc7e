"""Polling one incarnation's process tree and dump folders, and saying what changed."""

from __future__ import annotations

from dataclasses import dataclass

from ..logpatterns import CRASH_SIGNALS
from ..report.run import FileRecord
from ..textsize import with_bytes
from .collect import DumpCollector
from .incarnation import LiveIncarnation
from .manifest import ManifestStore
from .options import Notify
from .proctree import ProcessTree


@dataclass
class TreeWatch:
    incarnation: LiveIncarnation
    tree: ProcessTree
    collector: DumpCollector
    store: ManifestStore
    notify: Notify

    def poll_tree(self) -> None:
        """Record processes that appeared or ended; a crash signal is news."""
        appeared, ended = self.tree.poll()
        ended += self.tree.reported_exits(self.incarnation.reported_exits)
        if not (appeared or ended):
            return
        with self.store.edit():
            self.incarnation.record.processes = self.tree.records()
            self.incarnation.record.forgotten_processes = self.tree.forgotten
        for record in ended:
            if record.exit is not None and record.exit.signal in CRASH_SIGNALS:
                ranks = f" {record.ranks}" if record.ranks else ""
                self.notify(f"{record.role}{ranks} (pid {record.pid}) {record.exit.describe()}")

    def poll_dumps(self) -> None:
        self.add_dumps(self.collector.poll())

    def add_dumps(self, records: list[FileRecord]) -> None:
        if records:
            self.store.add_files(records)
            for record in records:
                self.notify(f"coredump collected: {record.path} ({with_bytes(record.size_bytes)}"
                            f"{'' if record.complete else ', INCOMPLETE'})")
