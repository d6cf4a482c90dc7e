"""The server's whole process tree: who is in it, what each one is, and how each one ended.

Only a parent can wait for a child, so exact exit statuses come three ways:
- the launched command is crashlab's child: Popen reaps it;
- crashlab makes itself a *child subreaper* (Linux prctl), so descendants orphaned by a dying
  parent are re-parented to crashlab instead of init: they stay in the tree, cannot escape the
  final clean-up, and crashlab reaps them itself;
- a descendant reaped by its own living parent (SGLang's SubprocessWatchdog polls its children
  every second) is seen, if the poll catches it, as a zombie whose status the kernel publishes
  in /proc/<pid>/stat (field 52, exit_code). Otherwise its status is recorded as unknown.
psutil has no call for the last two, hence the small amount of prctl and /proc code here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import time

import psutil

from ..privacy.redact import PLAIN, Redactor
from ..report.run import ExitStatus, ProcessRecord
from . import timestamps

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_RANK = r"(?:ATTN_CP|MOE_DP|DP|PP|TP|EP)\d+"
_RANK_SUFFIX = re.compile(rf"(?:_{_RANK})+$")
MAX_CMDLINE = 500
#: Records kept per incarnation: a server that keeps starting short-lived helpers must not
#: grow crashlab (and the manifest) without bound. Past it, the oldest processes that ended
#: cleanly or unseen are forgotten (counted); crashes and the server itself are always kept.
MAX_RECORDS = 1000
#: SGLang's children take their ``sglang::`` title (setproctitle) only once their imports are
#: done, seconds after they appear as a bare ``multiprocessing.spawn`` command line; an unnamed
#: process (or one whose command line read empty) is looked at again until it is this old.
TITLE_WINDOW = 600.0



def subreaper(enable: bool) -> bool | None:
    """Make this process a child subreaper (or stop being one); the previous state, None if
    the platform has no such thing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        previous = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(previous), 0, 0, 0) != 0:
            return None
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(enable), 0, 0, 0) != 0:
            return None
        return bool(previous.value)
    except (OSError, AttributeError):
        return None


def status_from_returncode(returncode: int, observed: str = "waited") -> ExitStatus:
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = None
        return ExitStatus(signal=number, signal_name=name, observed=observed)
    return ExitStatus(code=returncode, observed=observed)


def _zombie_returncode(pid: int) -> int | None:
    """The exit status a zombie left in /proc/<pid>/stat (Linux >= 3.5), as a returncode."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2:].split()
        return os.waitstatus_to_exitcode(int(fields[49]))  # field 52 of the whole line
    except (OSError, ValueError, IndexError):
        return None


def role_of(cmdline: list[str]) -> tuple[str, str | None]:
    """SGLang names its children with setproctitle: ``sglang::scheduler_DP0_TP1``."""
    first = cmdline[0] if cmdline else ""
    if first.startswith("sglang::"):
        title = (first[len("sglang::"):].split() or [""])[0]
        ranks = " ".join(re.findall(_RANK, title)) or None
        return _RANK_SUFFIX.sub("", title).split(":")[0] or "sglang", ranks
    if any("multiprocessing.resource_tracker" in part for part in cmdline):
        return "resource_tracker", None
    return "process", None


class ProcessTree:
    """Every process the launched command started, polled with psutil."""

    def __init__(self, root: subprocess.Popen, redactor: Redactor = PLAIN):
        self.root = root
        self._redactor = redactor
        self._own = psutil.Process()
        self._root_proc = psutil.Process(root.pid)
        self._born = self._root_proc.create_time()
        self._tracked: dict[tuple[int, float], tuple[psutil.Process, ProcessRecord]] = {}
        self.forgotten = 0
        self.root_record = self._track(self._root_proc, role="server")

    def _cmdline(self, cmdline: list[str]) -> str:
        return " ".join(self._redactor.argv(cmdline))[:MAX_CMDLINE]

    def records(self) -> list[ProcessRecord]:
        return [record for _, record in self._tracked.values()]

    def _track(self, proc: psutil.Process, role: str | None = None) -> ProcessRecord | None:
        try:
            with proc.oneshot():
                key = (proc.pid, proc.create_time())
                if key in self._tracked:
                    return None
                try:
                    cmdline = proc.cmdline()
                except psutil.ZombieProcess:
                    cmdline = [proc.name()]
                found_role, ranks = role_of(cmdline)
                record = ProcessRecord(pid=proc.pid, ppid=proc.ppid(), role=role or found_role,
                                       ranks=ranks,
                                       cmdline=self._cmdline(cmdline),
                                       started_at=timestamps.of(key[1]))
        except psutil.Error:
            return None
        self._tracked[key] = (proc, record)
        return record

    def poll(self) -> tuple[list[ProcessRecord], list[ProcessRecord]]:
        """(processes that appeared or took their title, processes that ended) since the last poll."""
        appeared = [r for r in map(self._track, self._descendants()) if r is not None]
        appeared += self._titled()
        ended = []
        for proc, record in self._tracked.values():
            # a zombie seen under a living parent is looked at again: once that parent dies it
            # becomes crashlab's to reap, and its status then becomes exact
            first = record.exit is None
            if (record.exit is None or record.exit.observed == "zombie") \
                    and self._observe_end(proc, record) \
                    and first:
                ended.append(record)
        self._forget_unremarkable()
        return appeared, ended

    def _titled(self) -> list[ProcessRecord]:
        """Live processes read again: unnamed ones that have since set an ``sglang::`` title,
        and any whose command line read empty (a process seen in the middle of its exec: its
        parent's Popen returns before the kernel has laid out the new argv)."""
        titled = []
        for key, (proc, record) in self._tracked.items():
            if (record.role != "process" and record.cmdline) or record.exit is not None \
                    or time.time() - key[1] > TITLE_WINDOW:
                continue
            try:
                cmdline = proc.cmdline()
            except psutil.Error:
                continue
            role, ranks = role_of(cmdline)
            named = record.role == "process" and role != "process"
            if named:
                record.role, record.ranks = role, ranks
            if cmdline and (named or not record.cmdline):
                record.cmdline = self._cmdline(cmdline)
                titled.append(record)
        return titled

    def _forget_unremarkable(self) -> None:
        excess = len(self._tracked) - MAX_RECORDS
        if excess <= 0:
            return
        unremarkable = [key for key, (_, record) in self._tracked.items()
                        if record is not self.root_record and record.exit is not None
                        and (record.exit.clean or record.exit.observed == "unknown")]
        for key in unremarkable[:excess]:
            del self._tracked[key]
            self.forgotten += 1

    def _descendants(self) -> list[psutil.Process]:
        """crashlab's descendants born with or after the server: with the subreaper set, this
        includes orphans whose parent has died."""
        try:
            children = self._own.children(recursive=True)
        except psutil.Error:
            return []
        found = []
        for proc in children:
            try:
                if proc.create_time() >= self._born:
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    def _observe_end(self, proc: psutil.Process, record: ProcessRecord) -> bool:
        """Record how a process ended, once it has; reap it where crashlab is its parent."""
        if proc.pid == self.root.pid:
            returncode = self.root.poll()
            if returncode is None:
                return False
            record.exit = status_from_returncode(returncode)
        else:
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    return False
                if proc.ppid() == self._own.pid:  # an orphan handed to crashlab: reap it
                    waited, wait_status = os.waitpid(proc.pid, os.WNOHANG)
                    if not waited:
                        return False
                    record.exit = status_from_returncode(os.waitstatus_to_exitcode(wait_status))
                elif record.exit is None:
                    returncode = _zombie_returncode(proc.pid)
                    record.exit = (status_from_returncode(returncode, "zombie")
                                   if returncode is not None else ExitStatus(observed="unknown"))
                else:
                    return False
            except (psutil.NoSuchProcess, ChildProcessError):
                if record.exit is not None:
                    return False
                record.exit = ExitStatus(observed="unknown")
            except psutil.Error:
                return False
        record.ended_at = record.ended_at or timestamps.now()
        return True

    def reported_exits(self, reported: dict[int, int]) -> list[ProcessRecord]:
        """Exit codes the server's own log gave for children whose status crashlab missed."""
        updated = []
        for proc, record in self._tracked.values():
            code = reported.get(proc.pid)
            if code is not None and (record.exit is None or record.exit.observed == "unknown"):
                record.exit = status_from_returncode(code, "log")
                record.ended_at = record.ended_at or timestamps.now()
                updated.append(record)
        return updated

    def settle(self, timeout: float, tick: float) -> None:
        """After the tree was stopped: poll until every process's end is recorded, then record
        as unknown the end of any that is no longer running but was never seen ending (a zombie
        reaped by another between two polls), so no process is left with no exit at all."""
        deadline = time.monotonic() + timeout
        self.poll()
        while any(r.exit is None for r in self.records()) and time.monotonic() < deadline:
            time.sleep(tick)
            self.poll()
        living = {proc.pid for proc in self.alive()}
        for record in self.records():
            if record.exit is None and record.pid not in living:
                record.exit = ExitStatus(observed="unknown")
                record.ended_at = record.ended_at or timestamps.now()

    def alive(self) -> list[psutil.Process]:
        living = []
        for proc, record in self._tracked.values():
            if record.exit is not None:
                continue
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    living.append(proc)
            except psutil.Error:
                continue
        return living

    def signal_all(self, signum: int) -> None:
        """The server's process group, then any tracked process that left the group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.root.pid, signum)
        for proc in self.alive():
            try:
                if os.getpgid(proc.pid) != self.root.pid:
                    proc.send_signal(signum)
            except (psutil.Error, ProcessLookupError):
                continue
