"""Incidents in the crash index, on both backends (a SQLite file, a real PostgreSQL server):
migration 2 over an index made before it, crashes grouped by their first failure with the Xid
lines recorded beside them, the incident ``show ID`` names, and coarse signature keys.

The crash records are constructed (the serve runs that make real ones are in
tests/test_incidents_serve.py): a prefill server of deployment pd-1 that dies at t=1000, a
decode server of pd-1 whose FAULT rank failed at t=1050 but finished its dump at t=1200, its
COLLATERAL rank's dump finished at t=1100, and a server on node3 at t=5000.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from crashlab.errors import BadInput
from crashlab.incidents import XidLine
from crashlab.index import Filters, Index, schema
from crashlab.index.commands import show
from crashlab.index.incidents import listing
from tests.conftest import run_cli
from tests.index_fixtures import crash, signature
from tests.schema_check import errors

PREFILL, FAULT, COLLATERAL, LATER = (signature("aaaa00000001", coarse="c0a250000001"),
                                     signature("bbbb00000002", coarse="c0a2f0000002"),
                                     signature("cccc00000003"), signature("dddd00000004"))
XID = XidLine(time=datetime.fromtimestamp(1040, timezone.utc), host="node2", xid=79,
              text="NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.",
              device="PCI:0000:3b:00", run_dir="/runs/decode")


def _record_deployment(index: Index) -> None:
    pd = dict(deployment="pd-1", incarnation=1)
    index.record(crash("prefill", PREFILL, 1000.0, host="node1", run_dir="/runs/prefill",
                       server_role="prefill", rank="TP0", **pd))
    index.record(crash("decode-fault", FAULT, 1200.0, host="node2", run_dir="/runs/decode",
                       server_role="decode", rank="TP0", label="FAULT", first_failure_at=1050.0,
                       **pd))
    index.record(crash("decode-collateral", COLLATERAL, 1100.0, host="node2",
                       run_dir="/runs/decode", server_role="decode", rank="TP1",
                       label="COLLATERAL", **pd))
    index.record(crash("later", LATER, 5000.0, host="node3", run_dir="/runs/later"))
    assert index.record_xid(XID) is True
    assert index.record_xid(XID) is False  # recorded again (report after serve): found


def test_crashes_are_grouped_into_incidents_newest_first_with_their_xid_lines(index_address):
    with Index(index_address) as index:
        _record_deployment(index)
        found = listing(index, Filters(), window=120.0)
        assert [len(i.crashes) for i in found.incidents] == [1, 3]  # newest first
        later, pd = found.incidents
        assert [c.source for c in later.crashes] == ["/runs/later"]
        # the prefill server failed first; the decode server's FAULT rank before its COLLATERAL,
        # though the COLLATERAL dump was finished first
        assert [(c.server_role, c.label, c.rank) for c in pd.crashes] == [
            ("prefill", None, "TP0"), ("decode", "FAULT", "TP0"), ("decode", "COLLATERAL", "TP1")]
        assert pd.first_failure == "1970-01-01T00:16:40+00:00"
        assert pd.crashes[1].first_failure_at == "1970-01-01T00:17:30+00:00"
        assert pd.hosts == ["node1", "node2"]
        assert [(x.xid, x.host, x.run_dir) for x in pd.xids] == [(79, "node2", "/runs/decode")]
        assert any("likely its consequence" in note for note in pd.notes)
        assert any(note.startswith("Xid 79 on node2") for note in pd.notes)
        assert later.xids == []

        assert [i.id for i in listing(index, Filters(limit=1), 120.0).incidents] == [later.id]
        # a window shorter than the decode server's 50 s: the deployment's servers part
        assert [len(i.crashes) for i in listing(index, Filters(), 30.0).incidents] == [1, 2, 1]
        hosted = listing(index, Filters(host="node2"), 120.0).incidents
        assert [[c.rank for c in i.crashes] for i in hosted] == [["TP0", "TP1"]]
        assert hosted[0].xids[0].xid == 79  # the Xid line is on node2


def test_one_kernel_line_read_by_two_runs_of_a_host_is_one_xid_line(index_address):
    with Index(index_address) as index:
        _record_deployment(index)
        second_reader = replace(XID, run_dir="/runs/other-on-node2",
                                time=datetime.fromtimestamp(1041.5, timezone.utc))
        repeated = replace(XID, time=datetime.fromtimestamp(1090, timezone.utc))
        assert index.record_xid(second_reader) and index.record_xid(repeated)
        found = index.xid_lines(0, 10_000)
        # the second run's reading of the same line is left out; the driver's repeat stays
        assert [(x.time.timestamp(), x.run_dir) for x in found] == [
            (1040.0, "/runs/decode"), (1090.0, "/runs/decode")]
        [pd] = [i for i in listing(index, Filters(), window=120.0).incidents if len(i.crashes) == 3]
        assert len(pd.xids) == 2


def test_show_names_the_incident_of_a_crash(index_address):
    with Index(index_address) as index:
        _record_deployment(index)
        collateral = index.crashes(Filters(signature=COLLATERAL.hash))[0]
        incident = show(index, str(collateral.id)).incident
        assert incident.id == listing(index, Filters(), 120.0).incidents[1].id
        assert [c.rank for c in incident.crashes] == ["TP0", "TP0", "TP1"]
        alone = show(index, str(index.crashes(Filters(signature=LATER.hash))[0].id)).incident
        assert [c.source for c in alone.crashes] == ["/runs/later"]
        # the deployment's next crash, 300 s after the first failure: an incident of its own
        index.record(crash("prefill-again", PREFILL, 1300.0, host="node1", deployment="pd-1",
                           run_dir="/runs/prefill-2", server_role="prefill"))
        again = index.crashes(Filters(signature=PREFILL.hash, limit=1))[0]
        assert [c.source for c in show(index, str(again.id)).incident.crashes] == \
            ["/runs/prefill-again"]


def test_a_coarse_key_lists_and_shows_the_signatures_under_it(index_address):
    moved = signature("bbbb00000009", coarse=FAULT.coarse)  # the same bug, its line moved
    with Index(index_address) as index:
        _record_deployment(index)
        index.record(crash("moved", moved, 2000.0))
        index.record(crash("moved-2", moved, 2100.0))
        by_coarse = index.crashes(Filters(signature=FAULT.coarse[:5]))
        assert [c.signature for c in by_coarse] == [moved.hash, moved.hash, FAULT.hash]
        shown = show(index, FAULT.coarse)
        assert shown.kind == "coarse" and shown.signature is None
        assert [(s.hash, s.count) for s in shown.signatures] == [(moved.hash, 2), (FAULT.hash, 1)]
        assert show(index, FAULT.hash).signature.coarse == FAULT.coarse
        with pytest.raises(BadInput, match="ambiguous"):
            index.signature_key("c0a2")  # two coarse keys
        with pytest.raises(BadInput, match="is a coarse key"):
            index.signature_hash(FAULT.coarse)


def test_an_index_made_before_migration_2_is_migrated_in_place(index_address, monkeypatch):
    with monkeypatch.context() as old:  # the crashlab that knew migration 1 alone
        old.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
        old.setattr(schema, "LATEST", 1)
        with Index(index_address) as index:
            assert index.schema_version() == 1
            with index.backend.transaction():  # its INSERTs, with migration 1's columns
                index.backend.execute(
                    "INSERT INTO signatures (hash, version, kind, title, search, body, "
                    "first_seen, last_seen, crash_count) VALUES (?, 1, 'gpu-fault', 't', 's', "
                    "'{}', 1000, 1000, 1)", (FAULT.hash,))
                index.backend.execute(
                    "INSERT INTO crashes (crash_key, signature_hash, signature_version, "
                    "crashed_at, recorded_at, recorded_by, host, versions, source, summary, "
                    "total_bytes, role, label) VALUES ('old', ?, 1, 1000, 1000, 'serve', "
                    "'node1', '{}', '/runs/old', 'an old crash', 0, 'scheduler', 'FAULT')",
                    (FAULT.hash,))
    with Index(index_address) as index:
        assert index.schema_version() == schema.LATEST
        [old] = index.crashes(Filters())
        assert (old.source, old.role, old.label, old.server_role) == \
            ("/runs/old", "scheduler", "FAULT", None)
        assert old.first_failure_at == old.crashed_at  # the only time it knew
        assert index.signature(FAULT.hash).coarse is None
        index.record(crash("new", FAULT, 1100.0, first_failure_at=1090.0))
        assert index.signature(FAULT.hash).coarse == FAULT.coarse  # learnt when seen again
        assert index.signature(FAULT.hash).count == 2
        assert [len(i.crashes) for i in listing(index, Filters(), 120.0).incidents] == [2]


def test_list_incidents_on_the_command_line(index_address):
    with Index(index_address) as index:
        _record_deployment(index)
        index.record(crash("markup", signature("eeee00000005", title="[red]x[/red] :smile:"),
                           9000.0, host="node[1]", summary="[bold]not markup[/bold]"))
    done = run_cli("list", "--incidents", "--json", "--db", index_address)
    assert done.returncode == 0, done.stderr.decode()
    listed = json.loads(done.stdout)
    assert errors(listed, "incident-list") == []
    assert listed["window_s"] == 120.0 and len(listed["incidents"]) == 3
    text = run_cli("list", "--incidents", "--db", index_address)
    assert text.returncode == 0, text.stderr.decode()
    heading, *lines = text.stdout.decode().splitlines()
    assert heading == f"index: {listed['index']}"
    assert lines[0].startswith("incident inc-") and "node[1]" in lines[0]
    assert "[red]x[/red] :smile:" in lines[1] and "on node[1]: first failure" in lines[2]
    pd = lines[len(lines) - lines[::-1].index(""):]  # the last block
    assert pd[0].startswith("incident inc-") and "3 crashes, 1 Xid line on node1, node2" in pd[0]
    assert [row.split()[5:7] for row in pd[1:4]] == [["prefill", "TP0"], ["decode", "TP0"],
                                                     ["decode", "TP1"]]
    assert pd[4].startswith("  xid 79 ") and "GPU has fallen off the bus." in pd[4]
    limited = run_cli("list", "--incidents", "--limit", "2", "--db", index_address)
    assert limited.stdout.decode().count("incident inc-") == 2
    shown = run_cli("show", "1", "--db", index_address).stdout.decode().splitlines()
    assert [row.split()[:3] for row in shown if row.startswith("with")] == [
        ["with", "crash", "2"], ["with", "crash", "3"], ["with", "xid", "79"]]
    assert run_cli("list", "--incidents", "--host", "node9", "--db", index_address).returncode == 1


def _fleet(index: Index, seed: int, dense: bool) -> None:
    """A constructed fleet over 3.5 days: a PD deployment across two hosts, two unlabelled hosts
    whose servers crash in bursts with quiet hours between, and (DENSE) one whose servers crash
    every 100 s without a gap a 120 s window could settle on; TP-2 servers whose COLLATERAL dump
    is finished up to 90 s after the FAULT, and Xid lines near some first failures."""
    rng = random.Random(seed)
    sig = signature("eeee00000005")
    hosts = [("pd-1", "node1"), ("pd-1", "node2"), (None, "node3"), (None, "node4")]
    at, server = 0.0, 0
    while at < 300_000:
        at += rng.choice([15, 40, 80, 110, 200, 3_000])
        deployment, host = rng.choice(hosts)
        server += 1
        run = f"/runs/s{server}"
        common = dict(host=host, run_dir=run, deployment=deployment, incarnation=1,
                      server_role="decode" if host == "node2" else "plain")
        index.record(crash(f"s{server}-fault", sig, at + 60, label="FAULT", rank="TP0",
                           first_failure_at=at, **common))
        index.record(crash(f"s{server}-coll", sig, at + rng.uniform(1, 90), label="COLLATERAL",
                           rank="TP1", **common))
        if rng.random() < 0.3:
            index.record_xid(replace(XID, host=host, run_dir=run,
                                     time=datetime.fromtimestamp(at + rng.uniform(-100, 100), timezone.utc)))
    for number in range(3_100 if dense else 0):  # to past the last burst
        index.record(crash(f"d{number}", sig, number * 100.0, host="node5", run_dir=f"/runs/d{number}"))


@pytest.mark.parametrize("seed,dense", [(1, False), (2, False), (3, True)])
def test_the_newest_incidents_are_those_grouping_every_crash_makes(index_address, seed, dense,
                                                                     monkeypatch):
    with Index(index_address) as index:
        _fleet(index, seed, dense)
        total = len(index.grouping_records(["1 = 1"], []))
        read = []
        grouping_records = index.grouping_records
        monkeypatch.setattr(index, "grouping_records",
                            lambda *args: read.append(len(found := grouping_records(*args))) or found)
        everything = listing(index, Filters(), window=120.0).incidents
        for limit in (1, 7, 50):
            read.clear()
            newest = listing(index, Filters(limit=limit), window=120.0).incidents
            assert [i.model_dump() for i in newest] == [i.model_dump() for i in everything[:limit]]
            # a recent span of the crashes settles the newest incidents; crashing without a
            # gap (DENSE) never settles, and every crash is grouped
            assert (read[-1] == total) is dense
        host = listing(index, Filters(host="node3", limit=5), window=120.0).incidents
        assert [i.model_dump() for i in host] == [
            i.model_dump() for i in listing(index, Filters(host="node3"), window=120.0).incidents[:5]]


def test_dumps_recorded_by_hand_are_incidents_of_their_own_labelled_so(index_address, tmp_path):
    """Two dumps inspected by hand (two crashes of one fault, a second apart, one with the
    --host it came from) and two serve runs (a Python SIGSEGV, an AttributeError) on one host
    within the window: each hand-recorded dump is its own incident, named as what it is, at the
    time its driver stamped, on the host given or an unknown one; the serve runs join by the
    host-window rule, the note saying why, not their summaries."""
    import time

    from tests.elf_patch import restamped
    from tests.test_index_cli import CORE

    now, host = int(time.time()), "node3"
    dumps = [restamped(CORE, tmp_path / f"by-hand-{n}.nvcudmp", now + n) for n in range(2)]
    for dump, given in zip(dumps, (["--host", host], []), strict=True):
        assert run_cli("inspect", dump, "--no-sass", "--record", *given,
                       "--db", index_address).returncode == 0
    with Index(index_address) as index:
        for number, summary in enumerate(["SIGSEGV in server", "AttributeError: 'NoneType' "
                                          "object has no attribute 'shape'"]):
            index.record(crash(f"run{number}", signature(f"ffff0000000{number}"), now + 10 * number,
                               host=host, run_dir=f"/runs/run{number}", incarnation=1,
                               summary=summary))
    listed = json.loads(run_cli("list", "--incidents", "--json", "--db", index_address).stdout)
    groups = sorted(([c["source"] for c in i["crashes"]], i["notes"]) for i in listed["incidents"])
    assert [sources for sources, _ in groups] == [["/runs/run0", "/runs/run1"], *[
        [str(dump)] for dump in dumps]]
    for number, (dump, (_, notes)) in enumerate(zip(dumps, groups[1:], strict=True)):
        on = host if number == 0 else "unknown host"
        assert notes == [f"recorded by hand: inspect {dump} on {on}: first failure at "
                         f"{datetime.fromtimestamp(now + number, timezone.utc).isoformat()}"]
    joined = groups[0][1][1]
    assert f"joined: no --deployment label, same host {host}, first failure 10.0 s after" in joined
    assert "AttributeError" not in joined and "SIGSEGV" not in " ".join(groups[0][1])
    text = run_cli("list", "--incidents", "--db", index_address).stdout.decode()
    assert text.count("note recorded by hand: inspect") == 2
