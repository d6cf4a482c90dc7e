"""What stays and what varies across a signature's crashes (crashlab.index.facets) and what it
allows one to say (readings.py): a constructed fleet recorded through the real recording path
into a real index on SQLite and on PostgreSQL, read back by ``crashlab show`` in the terminal,
as JSON and as Markdown; each reading with a fleet that gives it and one that does not."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from crashlab.index import Filters, Index
from crashlab.index.backends import connect
from crashlab.index.facets import MAX_VALUES, facets_of
from crashlab.index.readings import HOUR_S, ONE_DEVICE_MIN
from crashlab.index.recording import record_all
from crashlab.index.records import FleetFacts, NewCrash
from crashlab.index.schema import MIGRATIONS, MIGRATIONS_TABLE
from tests.conftest import ROOT, run_cli
from tests.index_fixtures import crash, signature

A, B = signature("a1b2c3d4e5f6"), signature("b0b0b0b0b0b0")
HOSTILE_HOST = "[bold red]node-x[/] *x* <b>h</b>"
HOSTILE_KERNEL = "void k<`a|b`>(int) | `tick` [link](http://e.x)"


def _record(address: str, crashes: list[NewCrash], tmp_path: Path) -> None:
    """Through the recording the verbs use: a warning would mean nothing was recorded."""
    warnings: list[str] = []
    assert record_all(crashes, address, tmp_path, warnings.append) == len(crashes), warnings


def _fleet() -> list[NewCrash]:
    """Signature A: one PC on 3 hosts, 4 GPUs, 2 drivers, 4 ranks, uptimes of 2 to 9 hours, one
    kernel always co-resident; signature B: 2 crashes on a third driver."""
    seeded = []
    hosts = ["node1", "node1", "node2", "node2", HOSTILE_HOST, "node1"]
    for n, host in enumerate(hosts):
        facts = FleetFacts(pc="0x7f3a10", function_offset=0x1a0, kernel=HOSTILE_KERNEL,
                           exception="Warp Illegal Address", source_line="moe.cu:88",
                           gpu_index=n % 4, gpu_uuid=f"GPU-{n % 4:04x}", pci_address=f"0000:{n % 4}1:00.0",
                           cuda="12.8", flashinfer="0.6.12" if n < 4 else "0.6.18",
                           sgl_kernel="0.3.9", model="m/Qwen3", tp_size=8, pp_size=1, ep_size=8,
                           uptime_s=(2 + n) * HOUR_S + 60 * n + 30, requests_in_dumps=10 * n,
                           owner="flashinfer 0.6.12", co_resident=["nccl_allreduce", f"k{n}"])
        seeded.append(crash(f"a{n}", A, 1000.0 + n, host=host, driver="580.95" if n % 2 else "570.1",
                            rank=f"TP{n % 4}", torch="2.8.0", sglang="0.5.23", facts=facts))
    seeded += [crash(f"b{n}", B, 2000.0 + n, host="node9", driver="555.42",
                     facts=FleetFacts(pc=f"0x{n}", gpu_uuid="GPU-ffff")) for n in range(2)]
    return seeded


def _kinds(facets) -> set[str]:
    return {reading.kind for reading in facets.readings}


def test_the_facets_count_each_fields_values_as_seeded(index_address, tmp_path):
    fleet = _fleet()
    _record(index_address, fleet, tmp_path)
    ours = [c for c in fleet if c.signature is A]
    with Index(index_address) as index:
        facets = facets_of(index, A.hash)
    by = {facet.name: facet for facet in facets.fields}
    assert facets.crashes == len(ours)
    for name, value_of in [("host", lambda c: c.host), ("driver", lambda c: c.driver),
                           ("rank", lambda c: c.rank), ("pc", lambda c: c.facts.pc),
                           ("gpu_uuid", lambda c: c.facts.gpu_uuid),
                           ("flashinfer", lambda c: c.facts.flashinfer),
                           ("kernel", lambda c: c.facts.kernel),
                           ("tp_size", lambda c: str(c.facts.tp_size))]:
        expected = Counter(value_of(c) for c in ours)
        assert {v.value: v.count for v in by[name].values} == expected, name
        assert by[name].constant == (len(expected) == 1), name
        assert by[name].known == len(ours)
    hours = Counter(str(c.facts.uptime_s // HOUR_S * HOUR_S) for c in ours)  # each hour's start
    assert {v.value: v.count for v in by["uptime_s"].values} == hours
    assert [v.value for v in by["co_resident"].values][0] == "nccl_allreduce"
    assert by["co_resident"].constant and by["co_resident"].known == len(ours)
    # fields no crash of the fleet knows are unknown, not constant
    assert by["xid"].known == 0 and not by["xid"].constant
    constant = [facet.constant for facet in facets.fields]
    assert constant == sorted(constant, reverse=True)  # constant ones first


def test_a_read_only_index_gives_the_same_facets_and_readings_writing_nothing(index_address,
                                                                          tmp_path):
    """crashlab ui opens the index read-only, where PostgreSQL refuses even a temporary table:
    the facets are then counted over a subquery, to the same result."""
    _record(index_address, _fleet(), tmp_path)
    with Index(index_address) as index:
        written = facets_of(index, A.hash)
    with Index(index_address, read_only=True) as index:
        read = facets_of(index, A.hash)
    assert read == written and read.readings


def test_a_field_with_more_values_than_listed_counts_the_rest(index_address, tmp_path):
    many = [crash(f"m{n}", A, 1000.0 + n, host=f"host{n:02}") for n in range(MAX_VALUES + 3)]
    _record(index_address, many, tmp_path)
    with Index(index_address) as index:
        host = next(f for f in facets_of(index, A.hash).fields if f.name == "host")
    assert len(host.values) == MAX_VALUES and host.others == 3 and not host.constant
    assert host.known == len(many)


def test_a_coarse_key_takes_the_facets_of_every_signature_under_it(index_address, tmp_path):
    one, two = signature("c1c1c1c1c1c1", coarse="feedfeedfeed"), signature("c2c2c2c2c2c2",
                                                                           coarse="feedfeedfeed")
    _record(index_address, [crash("c1", one, 1.0, host="n1"), crash("c2", two, 2.0, host="n2"),
                            crash("c3", two, 3.0, host="n2")], tmp_path)
    with Index(index_address) as index:
        facets = facets_of(index, "feedfeedfeed", coarse=True)
    host = next(f for f in facets.fields if f.name == "host")
    assert facets.crashes == 3 and {v.value: v.count for v in host.values} == {"n1": 1, "n2": 2}


def _readings(address: str, crashes: list[NewCrash], tmp_path: Path) -> set[str]:
    _record(address, crashes, tmp_path)
    with Index(address) as index:
        return _kinds(facets_of(index, A.hash))


def _facts(n: int, **facts) -> NewCrash:
    more = {key: facts.pop(key) for key in ("host", "driver", "rank") if key in facts}
    return crash(f"r{n}", A, 100.0 + n, facts=FleetFacts(**facts), **more)


def test_same_pc_on_several_gpus_is_not_one_device(index_address, tmp_path):
    _record(index_address, [_facts(n, pc="0x10", gpu_uuid=f"GPU-{n}", host="node1")
                            for n in range(2)], tmp_path)
    with Index(index_address) as index:
        found = [r.text for r in facets_of(index, A.hash).readings if r.kind == "not-one-device"]
    assert found == ["same PC across 2 GPUs: not one bad device"]  # one host: not said


def test_same_pc_on_one_gpu_of_one_host_says_nothing_of_other_devices(index_address, tmp_path):
    assert "not-one-device" not in _readings(index_address, [
        _facts(n, pc="0x10", gpu_uuid="GPU-1", host="node1") for n in range(2)], tmp_path)


def test_a_pc_that_moves_is_not_read_as_the_same_fault_on_many_devices(index_address, tmp_path):
    assert "not-one-device" not in _readings(index_address, [
        _facts(n, pc=f"0x{n}", gpu_uuid=f"GPU-{n}", host=f"node{n}") for n in range(3)], tmp_path)


def test_devices_are_counted_over_the_crashes_of_the_constant_pc(index_address, tmp_path):
    """Crashes of unknown PC on other hosts and GPUs say nothing of where that PC faults."""
    known = [_facts(n, pc="0x10", gpu_uuid="GPU-1", host="node-a") for n in range(2)]
    unknown = [_facts(10 + n, gpu_uuid=f"GPU-{2 + n}", host=f"node-{'bc'[n % 2]}")
               for n in range(4)]
    assert "not-one-device" not in _readings(index_address, known + unknown, tmp_path)


def test_the_not_one_device_evidence_names_the_pc_not_the_unknown(index_address, tmp_path):
    """More crashes of unknown PC than of the PC: the unknown row is listed first, the evidence
    still names the PC, and counts the devices of its crashes only."""
    known = [_facts(n, pc="0x10", gpu_uuid=f"GPU-{n}", host=f"node{n}") for n in range(2)]
    unknown = [_facts(10 + n, host=f"other{n}") for n in range(3)]
    _record(index_address, known + unknown, tmp_path)
    with Index(index_address) as index:
        reading = next(r for r in facets_of(index, A.hash).readings if r.kind == "not-one-device")
    hosts = len({c.host for c in known})
    assert reading.text == f"same PC across {len(known)} GPUs, {hosts} hosts: not one bad device"
    assert reading.evidence == [f"pc 0x10 in all {len(known)} crashes whose PC is known",
                                f"{len(known)} GPU UUIDs over the {len(known)} of them whose "
                                "GPU is known", f"{hosts} hosts, rank unknown"]


def test_a_tie_lists_the_known_values_before_the_unknown_on_each_backend(index_address, tmp_path):
    """SQLite sorts NULL first, PostgreSQL last: the facets order them the same on both, also
    for which values survive the limit."""
    known = [_facts(n, gpu_uuid=f"GPU-{n:02}") for n in range(MAX_VALUES)]
    _record(index_address, [*known, _facts(99)], tmp_path)  # one crash of unknown GPU
    with Index(index_address) as index:
        gpus = next(f for f in facets_of(index, A.hash).fields if f.name == "gpu_uuid")
    assert [v.value for v in gpus.values] == sorted(c.facts.gpu_uuid for c in known)
    assert gpus.others == 1 and gpus.known == len(known)


def test_one_gpu_serial_over_enough_crashes_suspects_the_device(index_address, tmp_path):
    ours = [_facts(n, gpu_uuid="GPU-bad", host="node1") for n in range(ONE_DEVICE_MIN)]
    other = crash("other", B, 5.0, facts=FleetFacts(gpu_uuid="GPU-good"))
    assert "one-device" in _readings(index_address, [*ours, other], tmp_path)


def test_one_gpu_for_the_whole_fleet_suspects_nothing(index_address, tmp_path):
    """A single-GPU box has every crash on its GPU: that says nothing of the device."""
    ours = [_facts(n, gpu_uuid="GPU-only") for n in range(ONE_DEVICE_MIN)]
    others = [crash(f"other{n}", B, 5.0 + n, facts=FleetFacts(gpu_uuid="GPU-only"))
              for n in range(ONE_DEVICE_MIN)]
    assert "one-device" not in _readings(index_address, [*ours, *others], tmp_path)


def test_one_gpu_serial_with_a_crash_of_unknown_gpu_suspects_nothing(index_address, tmp_path):
    crashes = [_facts(n, gpu_uuid="GPU-bad") for n in range(ONE_DEVICE_MIN)] + [_facts(9)]
    assert "one-device" not in _readings(index_address, crashes, tmp_path)


def test_only_on_a_driver_needs_other_drivers_in_the_index(index_address, tmp_path):
    ours = [_facts(n, driver="580.95") for n in range(2)]
    other = crash("other", B, 5.0, driver="570.1")
    assert "one-driver" in _readings(index_address, [*ours, other], tmp_path)


def test_one_driver_for_the_whole_fleet_says_nothing(index_address, tmp_path):
    ours = [_facts(n, driver="580.95") for n in range(2)]
    other = crash("other", B, 5.0, driver="580.95")
    assert "one-driver" not in _readings(index_address, [*ours, other], tmp_path)


def test_only_after_uptime_reads_the_shortest_uptime(index_address, tmp_path):
    _record(index_address, [_facts(n, uptime_s=(3 + n) * HOUR_S + 5) for n in range(2)], tmp_path)
    with Index(index_address) as index:
        reading = next(r for r in facets_of(index, A.hash).readings if r.kind == "after-uptime")
    assert reading.text == "only after uptime > 3 h"


def test_an_unknown_or_short_uptime_allows_no_uptime_reading(index_address, tmp_path):
    crashes = [_facts(0, uptime_s=5 * HOUR_S), _facts(1, uptime_s=HOUR_S - 1), _facts(2)]
    assert "after-uptime" not in _readings(index_address, crashes, tmp_path)


def test_a_kernel_in_every_crash_is_read_as_co_resident(index_address, tmp_path):
    crashes = [_facts(n, co_resident=["nccl_ring", f"other{n}"]) for n in range(2)]
    _record(index_address, crashes, tmp_path)
    with Index(index_address) as index:
        found = [r.text for r in facets_of(index, A.hash).readings if r.kind == "co-resident"]
    assert found == ["only with kernel nccl_ring co-resident"]


def test_a_kernel_missing_from_one_crash_is_not_read_as_co_resident(index_address, tmp_path):
    crashes = [_facts(0, co_resident=["nccl_ring"]), _facts(1, co_resident=["gemm"]), _facts(2)]
    assert "co-resident" not in _readings(index_address, crashes, tmp_path)


def test_one_crash_allows_no_reading(index_address, tmp_path):
    lone = _facts(0, pc="0x1", gpu_uuid="GPU-1", driver="580.95", uptime_s=9 * HOUR_S,
                  co_resident=["nccl_ring"])
    assert _readings(index_address, [lone, crash("other", B, 5.0, driver="570.1")], tmp_path) == set()


def test_show_prints_the_facets_in_the_terminal_as_json_and_as_markdown(index_address, tmp_path):
    fleet = _fleet()
    _record(index_address, fleet, tmp_path)
    terminal = run_cli("show", A.hash[:6], "--db", index_address, env={"COLUMNS": "200"})
    assert terminal.returncode == 0, terminal.stderr
    out = terminal.stdout.decode()
    assert "what stays across its 6 crashes" in out and "what varies" in out
    assert "pc: 0x7f3a10 (6 of 6 known)" in out
    assert "reading: same PC across 4 GPUs, 3 hosts, 4 ranks: not one bad device" in out
    assert "reading: only after uptime > 2 h" in out
    assert "uptime_s: 2-3 h: 1, 3-4 h: 1" in out  # each hour's crashes, as hours
    assert HOSTILE_HOST in out and HOSTILE_KERNEL in out  # as itself, never markup

    shown = json.loads(run_cli("show", A.hash, "--json", "--db", index_address).stdout)
    kernel = next(f for f in shown["facets"]["fields"] if f["name"] == "kernel")
    assert kernel["values"] == [{"value": HOSTILE_KERNEL, "count": 6}] and kernel["constant"]
    host = next(f for f in shown["facets"]["fields"] if f["name"] == "host")
    assert {v["value"] for v in host["values"]} == {c.host for c in fleet if c.signature is A}
    assert {r["kind"] for r in shown["facets"]["readings"]} == {"not-one-device", "after-uptime",
                                                                "co-resident"}

    markdown = run_cli("show", A.hash, "--markdown", "--db", index_address)
    assert markdown.returncode == 0, markdown.stderr
    text = markdown.stdout.decode()
    assert "### What stays and what varies across its 6 crashes" in text
    kernel_row = next(row for row in text.splitlines() if row.startswith("| kernel |"))
    assert kernel_row.count("|") - kernel_row.count("\\|") == 4  # the pipes inside are escaped
    assert "``void k<`a\\|b`>(int) \\| `tick` [link](http://e.x)``" in kernel_row
    host_row = next(row for row in text.splitlines() if row.startswith("| host |"))
    assert "`[bold red]node-x[/] *x* <b>h</b>`" in host_row  # in a code span: not markup, not HTML
    assert "<b>h</b>" not in text.replace("`[bold red]node-x[/] *x* <b>h</b>`", "")
    assert "- same PC across 4 GPUs, 3 hosts, 4 ranks: not one bad device" in text
    assert "| uptime_s | `2-3 h` (1), `3-4 h` (1)" in text


def test_show_markdown_of_a_crash_and_with_json_is_refused_in_one_line(index_address, tmp_path):
    _record(index_address, [crash("r1", A, 1.0)], tmp_path)
    for args in (["1", "--markdown"], [A.hash, "--markdown", "--json"]):
        done = run_cli("show", *args, "--db", index_address)
        assert done.returncode == 2 and len(done.stderr.decode().strip().splitlines()) == 1, args


def _migrated_to(index_address: str, last: int):
    """A connection to an index made by migrations 1 to LAST only, holding signature A."""
    db = connect(index_address)
    with db.transaction():
        db.execute(MIGRATIONS_TABLE)
        for migration in [m for m in MIGRATIONS if m.number <= last]:
            for statement in migration.statements:
                db.execute(db.dialect(statement))
            db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)",
                       (migration.number, migration.name))
        db.execute("INSERT INTO signatures (hash, version, kind, title, search, body, first_seen, "
                   "last_seen, crash_count) VALUES (?, 1, 'gpu-fault', 't', 's', '{}', 1, 1, 1)",
                   (A.hash,))
    return db


def test_migration_4_adds_the_facts_to_an_index_of_the_previous_schema(index_address, tmp_path):
    """An index made by the schema before (migrations 1 to 3) with a crash in it: opening it
    applies migration 4, and the old crash counts as unknown in every new field."""
    db = _migrated_to(index_address, 3)
    with db.transaction():
        db.execute("INSERT INTO crashes (crash_key, signature_hash, signature_version, crashed_at, "
                   "recorded_at, recorded_by, host, versions, source, summary, total_bytes) "
                   "VALUES ('old', ?, 1, 1, 1, 'serve', 'node1', '{}', '/r', 's', 0)", (A.hash,))
    db.close()
    _record(index_address, [_facts(1, pc="0x10", host="node2")], tmp_path)
    with Index(index_address) as index:
        assert index.schema_version() == MIGRATIONS[-1].number
        by = {f.name: f for f in facets_of(index, A.hash).fields}
    assert {v.value: v.count for v in by["pc"].values} == {"0x10": 1, None: 1}
    assert by["pc"].known == 1 and by["host"].known == 2 and by["co_resident"].known == 0


def test_migration_6_names_the_requests_in_the_dumps_as_such_and_keeps_their_count(index_address):
    """The count migration 4 stored as requests_in_flight is the requests in the request dumps
    (reports say "in flight" of those running at the crash): migration 6 renames the column and
    keeps each crash's value; the facet shows it under its new name."""
    db = _migrated_to(index_address, 5)
    with db.transaction():
        db.execute("INSERT INTO crashes (crash_key, signature_hash, signature_version, crashed_at, "
                   "recorded_at, recorded_by, host, versions, source, summary, total_bytes, "
                   "requests_in_flight) VALUES ('old', ?, 1, 1, 1, 'serve', 'node1', '{}', '/r', "
                   "'s', 0, 33)", (A.hash,))
    db.close()
    with Index(index_address) as index:
        assert index.schema_version() >= 6
        by = {f.name: f for f in facets_of(index, A.hash).fields}
    assert "requests_in_flight" not in by
    assert [(v.value, v.count) for v in by["requests_in_dumps"].values] == [("33", 1)]


def test_a_dump_recorded_before_contents_were_hashed_is_the_same_crash_recorded_again(
        index_address, tmp_path):
    """An index of the schema before migration 5 knew a dump recorded on its own by host, path,
    size and time. Recorded again at the same path, the dump is that crash (not a second one)
    and gets its contents' hash, so a copy of it is that crash too."""
    import shutil

    dump = tmp_path / "core.nvcudmp"
    shutil.copyfile(ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp", dump)
    size = dump.stat().st_size
    db = _migrated_to(index_address, 4)
    with db.transaction():
        db.execute("INSERT INTO crashes (crash_key, signature_hash, signature_version, crashed_at, "
                   "recorded_at, recorded_by, host, versions, source, summary, total_bytes) "
                   "VALUES (?, ?, 1, 1, 1, 'inspect', 'laptop', '{}', ?, 's', ?)",
                   (f"laptop:{dump}:{size}:1", A.hash, str(dump), size))
    db.close()
    for path in (dump, shutil.copyfile(dump, tmp_path / "copy.nvcudmp")):
        done = run_cli("inspect", path, "--no-sass", "--record", "--db", index_address)
        assert done.returncode == 0, done.stderr.decode()
        assert "already recorded as crash 1 in" in done.stderr.decode()
    with Index(index_address) as index:
        [old] = index.crashes(Filters())
    assert old.dump_sha256 is not None and old.id == 1


def test_report_shows_the_facets_of_a_crash_the_index_holds(index_address, tmp_path):
    """A dump reported once is recorded by that report; reported again, it is in the index and
    the body shows its signature's facets, and the fleet's other crashes of that signature."""
    core = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
    first = run_cli("report", core, "--out", tmp_path / "one", "--db", index_address)
    assert first.returncode == 0, first.stderr
    assert "Across the fleet" not in first.stdout.decode()  # not in the index before
    with Index(index_address) as index:
        recorded = index.crashes(Filters())[0]
        hash_ = index.signature(recorded.signature).hash
    _record(index_address, [crash("fleet", signature(hash_), 5.0, host=HOSTILE_HOST,
                                  facts=FleetFacts(kernel=HOSTILE_KERNEL))], tmp_path)
    again = run_cli("report", core, "--out", tmp_path / "two", "--db", index_address)
    body = again.stdout.decode()
    assert again.returncode == 0, again.stderr
    assert "### Across the fleet: what stays and what varies over the 2 crashes" in body
    host_row = next(row for row in body.splitlines() if row.startswith("| host |"))
    # the dump reported on its own has no host (never this machine's): the fleet's is the one known
    assert host_row == "| host | `[bold red]node-x[/] *x* <b>h</b>` | 1 of 2 known |"
    assert body.index("### Across the fleet") < body.index("### Triage")


def test_report_anonymized_renames_the_fleets_other_hosts(index_address, tmp_path):
    core = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
    assert run_cli("report", core, "--out", tmp_path / "one", "--db", index_address).returncode == 0
    with Index(index_address) as index:
        hash_ = index.crashes(Filters())[0].signature
    _record(index_address, [crash("fleet", signature(hash_), 5.0, host="gpu-node-secret-7.corp")],
            tmp_path)
    again = run_cli("report", core, "--anonymize", "--out", tmp_path / "two", "--db", index_address)
    body = again.stdout.decode()
    assert again.returncode == 0, again.stderr
    assert "### Across the fleet" in body and "gpu-node-secret" not in body
    host_row = next(row for row in body.splitlines() if row.startswith("| host |"))
    assert host_row.endswith(".example` | 1 of 2 known |")  # the anonymizer's name for it
