"""Incident grouping on CONSTRUCTED record sets (many nodes, many servers: more than this machine
can run), and Xid lines in the formats NVIDIA's driver prints, each quoted from a public source
named beside it. The records of real runs are tests/test_incidents_serve.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from crashlab.incidents import Crash, XidLine, group
from crashlab.incidents.grouping import incident_id
from crashlab.incidents.xid import from_dmesg, from_findings
from crashlab.report.run import Finding

T0 = datetime(2026, 11, 23, 10, 0, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def crash(seconds, host="node1", run="runs/a", rank=None, label=None, deployment=None,
          role=None, line="boom", incarnation=1) -> Crash:
    return Crash(time=at(seconds), host=host, run_dir=run, first_line=line, rank=rank, label=label,
                 deployment=deployment, role=role, incarnation=incarnation)


def tp8_server(seconds, host, run, deployment, role, fault_rank=3):
    """Constructed: one TP-8 server whose rank ``fault_rank`` faults and whose other seven ranks
    are dumped while they wait for it, their dumps finished before the faulting rank's."""
    ranks = [crash(seconds + 0.5, host, run, f"TP{r}", "COLLATERAL", deployment, role)
             for r in range(8) if r != fault_rank]
    return ranks + [crash(seconds, host, run, f"TP{fault_rank}", "FAULT", deployment, role,
                          line="Warp Illegal Address in fused_moe_kernel")]


def test_a_servers_ranks_are_fault_first_even_when_the_collateral_dumps_were_finished_earlier():
    ranks = [crash(5, rank="TP1", label="COLLATERAL"), crash(9, rank="TP0", label="FAULT"),
             crash(4, rank="TP2", label="COLLATERAL"), crash(6, rank="TP3", label="UNREADABLE")]
    [incident] = group(ranks)
    assert [c.rank for c in incident.members] == ["TP0", "TP2", "TP1", "TP3"]
    assert incident.first_failure.rank == "TP0"
    assert "FAULT TP0, COLLATERAL TP2, COLLATERAL TP1, UNREADABLE TP3" in incident.notes[0]


def test_without_a_fault_dump_the_earliest_crash_leads():
    [incident] = group([crash(3, rank="TP1"), crash(1, rank="TP0"), crash(2, rank="TP2")])
    assert [c.rank for c in incident.members] == ["TP0", "TP2", "TP1"]


def test_a_pd_deployment_on_four_nodes_is_one_incident_led_by_the_dead_prefill_server():
    """Constructed: 2 prefill + 2 decode TP-8 servers on 4 nodes (label pd-7); prefill server 1
    faults; both decode servers crash 75 s later (SGLang's 60 s coredump wait, then missed
    heartbeats); prefill server 2 never crashes. An unrelated plain server on node2 crashes at
    the same time without a label, and the driver prints Xid lines on three hosts."""
    prefill = tp8_server(0, "node1", "runs/prefill-1", "pd-7", "prefill")
    decode_a = tp8_server(75, "node3", "runs/decode-1", "pd-7", "decode")
    decode_b = tp8_server(76, "node4", "runs/decode-2", "pd-7", "decode", fault_rank=0)
    unrelated = [crash(10, "node2", "runs/plain", "TP0", None, None, "plain", line="OOM")]
    xids = [XidLine(at(-1.5), "node1", 13, "NVRM: Xid (PCI:0000:3b:00): 13, Graphics SM Warp "
                    "Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address", "PCI:0000:3b:00"),
            XidLine(at(75), "node3", 43, "NVRM: Xid (PCI:0000:5e:00): 43, pid=881, Ch 00000010",
                    "PCI:0000:5e:00"),
            XidLine(at(400), "node1", 79, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off "
                    "the bus.", "PCI:0000:3b:00"),
            XidLine(at(5), "node9", 48, "NVRM: Xid (PCI:0000:07:00): 48, DBE", "PCI:0000:07:00")]
    incidents = group(decode_b + unrelated + decode_a + prefill, xids)
    assert len(incidents) == 2
    pd, plain = incidents
    assert pd.first_failure.run_dir == "runs/prefill-1" and pd.first_failure.label == "FAULT"
    assert [c.run_dir for c in pd.members] == ["runs/prefill-1"] * 8 + ["runs/decode-1"] * 8 + \
        ["runs/decode-2"] * 8
    assert [c.label for c in pd.members[8:16]] == ["FAULT"] + ["COLLATERAL"] * 7
    assert pd.hosts == ["node1", "node3", "node4"]
    assert [x.xid for x in pd.xids] == [13, 43]  # 79 is 400 s later; node9 is no host of it
    assert any("Xid 13 on node1 (PCI:0000:3b:00) 1.5 s before the first failure" in n
               for n in pd.notes)
    assert sum("likely its consequence" in n for n in pd.notes) == 2
    assert [c.run_dir for c in plain.members] == ["runs/plain"] and plain.xids == []
    assert len({pd.id, plain.id}) == 2


def test_the_window_is_anchored_at_the_first_failure_not_chained():
    """Constructed: one host, no label, a server crashing every 50 s."""
    crashes = [crash(50 * n, run=f"runs/{n}") for n in range(6)]
    incidents = group(crashes, window=120)
    assert [[c.run_dir for c in i.members] for i in incidents] == [
        ["runs/0", "runs/1", "runs/2"], ["runs/3", "runs/4", "runs/5"]]
    assert [len(i.members) for i in group(crashes, window=0)] == [1] * 6


@pytest.mark.parametrize("other, joins", [
    (dict(host="node1"), True),  # same host, neither labelled
    (dict(host="node2"), False),  # another host, neither labelled
    (dict(host="node2", deployment="pd"), False),  # a label on one side only
])
def test_without_labels_a_deployment_is_one_host(other, joins):
    incidents = group([crash(0, host="node1"), crash(30, run="runs/b", **other)])
    assert len(incidents) == (1 if joins else 2)


def test_two_labels_on_one_host_are_two_incidents_and_one_label_spans_hosts():
    a = [crash(0, "node1", "runs/a", deployment="blue"), crash(1, "node1", "runs/b", deployment="green")]
    assert len(group(a)) == 2
    assert len(group([crash(0, "node1", "runs/a", deployment="blue"),
                      crash(1, "node5", "runs/c", deployment="blue")])) == 1


def test_restarts_of_one_run_are_separate_servers():
    incidents = group([crash(0, rank="TP0", incarnation=1), crash(200, rank="TP0", incarnation=2)])
    assert [i.first_failure.incarnation for i in incidents] == [1, 2]


def test_the_id_is_derived_from_the_first_crash_alone():
    first = crash(0, rank="TP0", label="FAULT", line="Warp Illegal Address")
    alone = group([first])[0].id
    assert alone == incident_id(first) and alone.startswith("inc-") and len(alone) == 16
    grown = group([crash(20, run="runs/b"), first, crash(0.2, rank="TP1", label="COLLATERAL")])
    assert grown[0].id == alone
    assert group([crash(0, rank="TP0", label="FAULT", line="other")])[0].id != alone


def test_an_xid_joins_the_nearest_incident_and_only_one():
    incidents = group([crash(0, run="runs/a"), crash(150, run="runs/b")],
                      [XidLine(at(100), "node1", 31, "NVRM: Xid (PCI:0000:01:00): 31, ...")])
    assert [len(i.xids) for i in incidents] == [0, 1]


# Xid lines, each as a public source quotes it (the source beside it).
REAL_XID_LINES = [
    # NVIDIA/open-gpu-kernel-modules#461 (driver 525.85.05, ARM64, PCI domain 0004)
    (79, "PCI:0004:01:00", "NVRM: Xid (PCI:0004:01:00): 79, pid='<unknown>', name=<unknown>, "
                           "GPU has fallen off the bus."),
    (119, "PCI:0004:01:00", "NVRM: Xid (PCI:0004:01:00): 119, pid=430, name=nv_queue, "
                            "Timeout waiting for RPC from GSP!"),
    # NVIDIA developer forums, "Error Graphics SM Warp Exception on (GPC 1, TPC 0): Out Of Range
    # Address (Xid 13, Xid 43)"
    (13, "PCI:0000:01:00", "NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on "
                           "(GPC 1, TPC 0): Out Of Range Address"),
    (43, "PCI:0000:01:00", "NVRM: Xid (PCI:0000:01:00): 43, Ch 00000020, engmask 00000101"),
    # NVIDIA/open-gpu-kernel-modules#1030 (driver 595.71.05)
    (31, "PCI:0000:01:00", "NVRM: Xid (PCI:0000:01:00): 31, pid=13705, name=UnrealEditor, "
                           "channel 0x0000000c, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC2 "
                           "GPCCLIENT_PROP_0 faulted @ 0x0_00000000. Fault is of type FAULT_PDE "
                           "ACCESS_TYPE_VIRT_READ"),
    # NVIDIA/gpu-operator#1146
    (48, "PCI:0000:07:00", "NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An "
                           "uncorrectable double bit error (DBE) has been detected on GPU in the "
                           "framebuffer at physAddr 0x7fdf0de80 partition 5, subpartition 1"),
    # stas00/ml-engineering, compute/accelerator/nvidia/debug.md
    (63, "PCI:0000:10:1c", "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row "
                           "marked for remapping, reset gpu to activate."),
    # NVIDIA developer forums, "kernel: NVRM: Xid 74 ... NVLink: fatal error detected on link"
    (74, "PCI:0000:c1:00", "NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>', name=<unknown>, "
                           "NVLink: fatal error detected on link 1"),
    # NVIDIA/open-gpu-kernel-modules, _gpuGenerateErrorLog (the formats in its comment; the
    # first on a MIG partition)
    (94, "PCI:0000:01:00 GPU-I:05", "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, "
                                    "Contained: CE User Channel (0x9). RST: No, D-RST: No"),
    (95, "PCI:0000:01:00", "NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG "
                           "(0x2, 0x1). RST: Yes, D-RST: No"),
    # NVIDIA's Xid documentation (docs.nvidia.com/deploy/xid-errors): an older driver's form
    (14, "0000:03:00", "NVRM: Xid (0000:03:00): 14, Channel 00000001"),
]


@pytest.mark.parametrize("xid, device, line", REAL_XID_LINES)
def test_real_xid_lines_are_read_from_every_prefix_dmesg_and_syslog_give(xid, device, line):
    boot = datetime(2026, 11, 23, 9, 0, 0, tzinfo=timezone.utc)
    text = "\n".join([
        f"[ 3600.250000] {line}",  # dmesg: seconds since boot
        f"[Mon Nov 23 10:00:01 2026] {line}",  # dmesg -T
        f"2026-11-23T10:00:02,500000+00:00 {line}",  # dmesg --time-format=iso
        f"Nov 23 10:00:03 gpu-node-4 kernel: {line}",  # syslog, journalctl
        f"[ 3600.250000] [ T1946] {line}",  # a kernel that tags the printing thread
        "[ 3600.300000] NVRM: GPU at PCI:0000:3b:00: GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7",
    ])
    reading = from_dmesg(text, "node1", boot_time=boot, year=2026)
    assert [(x.xid, x.device, x.text) for x in reading.lines] == [(xid, device, line)] * 5
    assert [x.time for x in reading.lines] == [at(0.25), at(1), at(2.5), at(3), at(0.25)]
    assert [x.host for x in reading.lines] == ["node1", "node1", "node1", "gpu-node-4", "node1"]
    assert reading.undated == []


def test_an_xid_line_without_a_time_is_kept_apart():
    line = REAL_XID_LINES[0][2]
    reading = from_dmesg(f"{line}\n[ 12.5] {line}\nNov 23 10:00:03 h kernel: {line}", "node1")
    assert reading.lines == [] and reading.undated == [line] * 3


def test_the_runs_xid_findings_become_xid_lines_at_the_time_they_were_read():
    line = REAL_XID_LINES[0][2]
    findings = [Finding(kind="xid", text=line, stream="kmsg", line=1, time=at(7).isoformat()),
                Finding(kind="cuda-error", text="CUDA error: an illegal memory access was "
                        "encountered", stream="stderr", line=9, time=at(8).isoformat())]
    assert from_findings(findings, "node1") == [XidLine(at(7), "node1", 79, line, "PCI:0004:01:00")]
