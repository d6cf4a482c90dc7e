"""Polling one incarnation's process tree and dump folders, and saying what changed."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..logpatterns import CRASH_SIGNALS
from ..report.run import FileRecord
from ..textsize import with_bytes
from . import collect, procmaps
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
    #: the maps snapshots taken (crashlab.supervise.procmaps), each once
    maps_taken: set[str] = field(default_factory=set)

    def poll_tree(self) -> None:
        """Record processes that appeared or ended; a crash signal is news. The maps at start
        are taken once the server is healthy (its libraries loaded), or at once where there is
        no health check."""
        appeared, ended = self.tree.poll()
        ended += self.tree.reported_exits(self.incarnation.reported_exits)
        health = self.incarnation.record.health
        if not health.url or health.first_healthy_at is not None:
            self.take_maps(procmaps.START)
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
        """Collect finished dumps; while the driver writes the first one, the crashing
        processes are still alive: their maps are taken then."""
        records = self.collector.poll()
        if records or self.incarnation.driver.busy():
            self.take_maps(procmaps.CRASH)
        self.add_dumps(records)

    def take_maps(self, name: str) -> None:
        if name in self.maps_taken:
            return
        self.maps_taken.add(name)
        path = self.incarnation.dirs.path / name
        processes = [(proc.pid, self._role(proc.pid)) for proc in self.tree.alive()]
        if procmaps.snapshot(processes, path):
            self.store.add_files([collect.record(self.incarnation.run.run_dir, path, "process-maps")])

    def _role(self, pid: int) -> str:
        return next((record.role for record in self.tree.records() if record.pid == pid), "process")

    def add_dumps(self, records: list[FileRecord]) -> None:
        if records:
            self.store.add_files(records)
            for record in records:
                self.notify(f"coredump collected: {record.path} ({with_bytes(record.size_bytes)}"
                            f"{'' if record.complete else ', INCOMPLETE'})")
