"""A fleet of crashes for the web view's tests, recorded through the index's real recording path
(Index.record, Index.record_xid), and ``crashlab ui`` run on it as a real process.

The fleet: one GPU-fault signature on three hosts, whose first server's run directory holds a
real report.json (crashlab.inspect on a synthetic coredump, in a RunReport, its owner set), a FAULT
rank and a COLLATERAL rank with an Xid line after them, every crash of it at one PC in one kernel
on a GPU of its own, after hours of uptime (facts); a sibling signature under the same coarse
key; an old crash, outside a week's window; and a crash recorded from a coredump alone without its
triage (as before the index kept triages), which the crash page inspects and, the web view's
index being read-only, does not keep. Texts from outside can be made hostile (HOSTILE)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import crashlab
from crashlab.incidents import XidLine
from crashlab.index import Index
from crashlab.index.records import CrashFile, FleetFacts, NewCrash
from crashlab.report.model import KnownFix, Owner, Source, Tool
from crashlab.report.run import DumpTriage, ExitStatus, Incident, RunReport
from tests.conftest import ROOT
from tests.index_fixtures import crash, signature
from tests.serve_harness import wait_for

CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
HOUR, DAY = 3600.0, 86400.0


def facts(n: int) -> FleetFacts:
    """The main signature's crash N: one PC and kernel, GPU N, N + 2 hours up."""
    return FleetFacts(pc="0x7fff20", kernel="moe_align_block_size",
                      exception="Warp Out-of-range Address",
                      gpu_uuid=f"GPU-{n:08x}-0000-0000-0000-000000000000",
                      uptime_s=(n + 2) * 3600 + 60)


@dataclass
class Fleet:
    address: str
    main: str  # the signature with most crashes
    sibling: str
    old: str  # a signature whose one crash is 20 days old
    alone: str  # the signature of the crash recorded from a coredump alone
    counts: dict[str, int] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    fault_id: int = 0
    collateral_id: int = 0
    alone_id: int = 0
    core_in_run: Path = Path()
    replay: str = ""
    owner: Owner | None = None
    xid_text: str = ""
    texts: dict[str, str] = field(default_factory=dict)


def _run_report(run: Path, core: Path, replay: str, owner: Owner) -> None:
    triage = crashlab.inspect(core, sass=True)
    triage.faults[0].owner = owner
    dump = DumpTriage(path=str(core), label="FAULT", reasons=["first to fail"],
                      written_at="2026-11-26T10:00:00+00:00", size_bytes=core.stat().st_size,
                      sha256="0" * 64, summary=triage.summary, report=triage)
    incident = Incident(incarnation=1, directory=str(run / "incarnation-1"), kind="crash",
                        started_at="a", ended_at="b", exit=ExitStatus(code=1),
                        stopped_by_crashlab=False, summary=triage.summary, dumps=[dump],
                        replay_commands=[replay])
    report = RunReport(tool=Tool(version="t"), status="crash", summary=triage.summary,
                       source=Source(path=str(run), size_bytes=1, kind="run"),
                       command=["python", "-m", "sglang.launch_server"], incidents=[incident])
    (run / "report.json").write_text(report.model_dump_json(), encoding="utf-8")


def seed(address: str, folder: Path, hostile: str | None = None) -> Fleet:
    """Record the fleet into ADDRESS (files under FOLDER); HOSTILE replaces the texts from
    outside (hosts, ranks, titles, summaries, the Xid line) with itself and a tag."""
    now = time.time()
    text = (lambda tag, plain: f"{hostile} {tag}") if hostile else (lambda tag, plain: plain)
    main, sibling, old, alone = "a1" * 6, "b2" * 6, "c3" * 6, "d4" * 6
    coarse = "e5" * 6
    hosts = [text("host0", "node-a"), text("host1", "node-b"), text("host2", "node-c")]
    run = folder / "run-1"
    (run / "incarnation-1").mkdir(parents=True)
    core = run / "incarnation-1" / "core_1_TP0.nvcudmp"
    shutil.copyfile(CORE, core)
    owner = Owner(artifact="sgl-kernel", version="0.3.1", evidence=["the kernel name's prefix"],
                  fix=KnownFix(artifact="sgl-kernel", fixed_in="0.3.4",
                               link="https://example.org/fix/1", summary="bounds of the expert ids"),
                  fix_status="fixed-in-later")
    fleet = Fleet(address=address, main=main, sibling=sibling, old=old, alone=alone, hosts=hosts,
                  core_in_run=core, replay=f"crashlab replay {run}/request-dump.pkl", owner=owner,
                  xid_text=text("xid", "Xid (PCI:0000:17:00): 79, GPU has fallen off the bus"))
    _run_report(run, core, fleet.replay, owner)
    main_sig = signature(main, title=text("title", "Warp Out-of-range Address in moe_align"),
                         coarse=coarse)
    with Index(address) as index:
        def put(new: NewCrash) -> int:
            fleet.counts[new.signature.hash] = fleet.counts.get(new.signature.hash, 0) + 1
            return index.record(new)[0]

        first = now - 2 * HOUR
        fleet.fault_id = put(crash(
            "fault", main_sig, first, host=hosts[0], files=[(core, core.stat().st_size)],
            summary=text("summary", "moe_align faulted"), run_dir=str(run), incarnation=1,
            rank=text("rank", "TP0"), label="FAULT", driver="580.95", pid=4242, facts=facts(0)))
        fleet.collateral_id = put(crash(
            "collateral", main_sig, first + 5, host=hosts[0], summary="collateral rank",
            run_dir=str(run), incarnation=1, rank="TP1", label="COLLATERAL", driver="580.95",
            facts=facts(1)))
        index.record_xid(XidLine(time=datetime.fromtimestamp(first + 9, timezone.utc),
                                 host=hosts[0], xid=79, text=fleet.xid_text,
                                 device="PCI:0000:17:00", run_dir=str(run)))
        for n in range(6):  # the same bug on the other hosts, over the last three days
            put(crash(f"main-{n}", main_sig, now - DAY * 3 + n * 10 * HOUR,
                               host=hosts[1 + n % 2], driver="575.57", rank=f"TP{n % 4}",
                               label="FAULT", run_dir=str(folder / f"run-m{n}"),
                               facts=facts(2 + n)))
        for n in range(3):
            put(crash(f"sibling-{n}", signature(sibling, coarse=coarse),
                               now - DAY + n * HOUR, host=hosts[1]))
        put(crash("old", signature(old), now - 20 * DAY, host=hosts[2]))
        fleet.alone_id = put(NewCrash(
            key="alone", signature=signature(alone), crashed_at=now - 3 * HOUR,
            recorded_by="inspect", source=str(CORE), summary="read from a coredump alone",
            host=hosts[2], files=[CrashFile(path=str(CORE), kind="coredump",
                                            size_bytes=CORE.stat().st_size)]))
    return fleet


class UiServer:
    """``crashlab ui --db ADDRESS --port 0`` in its own process; its address read from what it
    says on start."""

    def __init__(self, address: str, *options: str, timeout: float = 120.0):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "crashlab", "ui", "--db", address, "--port", "0", *options],
            stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self.said: list[str] = []
        self.url = ""
        started = threading.Event()
        # read from the start in a thread: a server that never says its address must not hang
        # the test, and the server logs each request on stderr (a full pipe would stop it)
        threading.Thread(target=self._read, args=(started,), daemon=True).start()
        if not (started.wait(timeout) and self.url):
            ended = started.is_set()  # its stderr closed: it is ending
            if not ended:
                self.process.kill()
            code = self.process.wait(timeout=30)
            how = f"exit {code}" if ended else f"no address said in {timeout:g} s"
            raise AssertionError(f"crashlab ui did not start ({how}): {''.join(self.said)}")

    def _read(self, started: threading.Event) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.said.append(line)
            found = re.search(r"(http://[\d.]+:\d+)/", line)
            if found and not self.url:
                self.url = found[1]
                started.set()
        started.set()  # the server ended without saying its address

    def logged(self, words: str, timeout: float = 30.0) -> str:
        """What the server has said once ``words`` is in it: its request log comes from another
        thread of the server and reaches the pipe after the response does."""
        return wait_for(lambda: words in "".join(self.said) and "".join(self.said),
                        f"{words!r} in crashlab ui's log", timeout)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
