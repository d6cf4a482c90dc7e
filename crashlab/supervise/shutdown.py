"""Ending an incarnation without losing its evidence: wait while dumps are in flight, then the
stop signal to the whole tree, then SIGKILL after --grace.

A second stop request (a second Ctrl-C) cuts each wait short.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from ..notation import counted
from . import timestamps
from .options import ServeOptions
from .treewatch import TreeWatch

TICK = 0.1
KILL_WAIT = 10.0
#: How long ended processes are polled for their exit statuses once the tree is down.
SETTLE_WAIT = 2.0


class Shutdown:
    def __init__(self, watch: TreeWatch, options: ServeOptions, stops: list[int],
                 set_status: Callable[[str], None]):
        self.watch = watch
        self.options = options
        #: the stop signals received so far; a signal handler appends to it
        self.stops = stops
        self.set_status = set_status

    def on_request(self, signum: int) -> None:
        """The user asked crashlab to stop the server."""
        watch = self.watch
        watch.notify(f"received {signal.Signals(signum).name}: stopping the server")
        self.wait_for_evidence()
        with watch.store.edit():
            watch.incarnation.record.stopped_by_crashlab = True
            watch.incarnation.record.status = "stopping"
        self.set_status("stopping")
        self.terminate(signum)

    def after_root(self) -> None:
        """The launched process is gone; what it left running is stopped once no dump is in
        flight, so nothing outlives the run."""
        self.wait_for_evidence()
        if self.watch.tree.alive():
            self.watch.notify(f"the server's main process ended; stopping the "
                              f"{counted(len(self.watch.tree.alive()), 'process', 'processes')} it left")
            self.terminate(signal.SIGTERM)
        else:
            # nothing runs, yet a process may have ended since the last poll: a zombie handed
            # to crashlab is not alive() and would keep a null exit in the manifest
            self.watch.tree.settle(SETTLE_WAIT, TICK)

    def evidence_in_flight(self) -> list[str]:
        tree = self.watch.tree
        if not tree.alive():
            return []
        reasons = self.watch.collector.still_writing()
        if self.watch.incarnation.sglang_crashing and tree.root.poll() is None:
            reasons.append("SGLang is in its pre-crash sequence (request dump, coredump wait)")
        return reasons

    def wait_for_evidence(self) -> None:
        """Wait, up to --dump-timeout, while a dump is in flight; a second stop cuts it short."""
        watch = self.watch
        deadline = time.monotonic() + self.options.dump_timeout
        told = False
        while (reasons := self.evidence_in_flight()):
            if time.monotonic() >= deadline:
                with watch.store.edit():
                    watch.incarnation.record.warnings.append(
                        f"gave up waiting after --dump-timeout {self.options.dump_timeout:g} s: "
                        f"{'; '.join(reasons)}")
                watch.notify(f"--dump-timeout reached, going on: {'; '.join(reasons)}")
                return
            if len(self.stops) >= 2:
                return
            if not told:
                told = True
                self.set_status("waiting-for-dumps")
                watch.notify(f"waiting for evidence before killing anything: {'; '.join(reasons)}"
                             f" (up to {self.options.dump_timeout:g} s; a second Ctrl-C stops now)")
                with watch.store.edit():
                    watch.incarnation.record.status = "crashing"
            watch.poll_tree()
            watch.poll_dumps()
            watch.store.save_if_dirty(timestamps.now())
            time.sleep(TICK)

    def terminate(self, signum: int) -> None:
        """Stop the tree on purpose, noting whether its main process had already ended."""
        incarnation = self.watch.incarnation
        if not incarnation.stop_sent and self.watch.tree.root.poll() is not None:
            incarnation.root_ended_on_its_own = True
        incarnation.stop_sent = True
        self.signal_tree(signum)

    def signal_tree(self, signum: int) -> None:
        """The signal to the whole tree, escalated to SIGKILL after --grace (or a second stop);
        SIGKILL alone where something went wrong, so the server never outlives crashlab."""
        tree, watch = self.watch.tree, self.watch
        tree.signal_all(signum)
        stops = len(self.stops)
        deadline = time.monotonic() + (self.options.grace if signum != signal.SIGKILL else KILL_WAIT)
        while tree.alive() and time.monotonic() < deadline and len(self.stops) == stops:
            time.sleep(TICK)
            tree.poll()
            watch.poll_dumps()
        if tree.alive() and signum != signal.SIGKILL:
            watch.notify(f"{counted(len(tree.alive()), 'process', 'processes')} still running after --grace "
                         f"{self.options.grace:g} s: SIGKILL")
            tree.signal_all(signal.SIGKILL)
            deadline = time.monotonic() + KILL_WAIT
            while tree.alive() and time.monotonic() < deadline:
                time.sleep(TICK)
                tree.poll()
        tree.settle(SETTLE_WAIT, TICK)
