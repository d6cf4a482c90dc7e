"""The driver's Xid lines decoded: every prefix form the index reads, the payloads NVIDIA's
formats name, the GPU's UUID and serial withheld, hostile logs refused or read within a bound
(fixtures/logs/xid, with its PROVENANCE.md)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crashlab.errors import BadInput
from crashlab.incidents import kernellogfile
from crashlab.incidents.kernellogfile import read_kernel_log, read_kernel_text
from crashlab.incidents.xiddecode import TEXT_LIMIT, decode
from crashlab.report.kernellog import KernelLog
from tests.conftest import ROOT

LOGS = ROOT / "fixtures" / "logs" / "xid"
FORMS = ["kmsg.log", "dmesg-iso.log", "dmesg-ctime.log", "syslog.log", "dmesg-since-boot.log"]
#: What each of the fourteen payloads decodes to, in the logs' order.
EXPECTED = [
    (13, "sm-exception"), (13, "sm-exception"), (13, "esr"), (13, "sm-exception"), (13, "esr"),
    (31, "mmu-fault"), (43, "channel"), (45, "channel"), (63, "row-remap"), (94, "containment"),
    (95, "containment"), (79, "fallen-off-bus"), (119, "gsp-timeout"), (154, "recovery-action"),
]


@pytest.mark.parametrize("form", FORMS)
def test_every_prefix_form_gives_the_same_decoded_xids(form):
    log = read_kernel_log(str(LOGS / form))
    assert [(event.xid, event.kind) for event in log.xids] == EXPECTED
    first, mmu, channel_reset = log.xids[0], log.xids[5], log.xids[7]
    assert (first.gpc, first.tpc, first.sm, first.exception) == (0, 8, 0, "Invalid Address Space")
    assert first.device == "PCI:0000:00:06"
    assert (mmu.address, mmu.access, mmu.fault_type, mmu.fault_meaning) == (
        "0x7fcdce700000", "write", "FAULT_PDE", "PDE missing")
    assert (mmu.engine, mmu.client, mmu.pid, mmu.process) == (
        "GRAPHICS GPC0", "GPCCLIENT_T1_8", 4242, "python3")
    assert (channel_reset.channel, channel_reset.caused_by) == ("0x8", 31)
    dated = form in ("dmesg-iso.log", "dmesg-ctime.log")
    assert (first.time is not None) is dated


def test_nvidias_class_and_action_ride_on_each_event():
    by_xid = {event.xid: event for event in read_kernel_log(str(LOGS / "kmsg.log")).xids}
    assert (by_xid[31].origin, by_xid[31].immediate_action) == ("software", "RESTART_APP")
    assert (by_xid[79].origin, by_xid[79].immediate_action) == ("hardware", "RESTART_BM")
    assert (by_xid[95].reset_required, by_xid[95].drain_required) == (True, False)
    assert (by_xid[154].recovery_from, by_xid[154].recovery_to) == ("None", "GPU Reset Required")
    assert by_xid[119].exception == "no answer to GSP_RM_CONTROL in 6 s"


def test_esr_words_that_never_vary_are_named_as_no_evidence():
    log = read_kernel_log(str(LOGS / "syslog.log"))
    assert log.constant_esr_words == ["0x…728=0x1f81fb60", "0x…72c=0x1174"]
    esr = [event for event in log.xids if event.kind == "esr"]
    assert [event.esr_code for event in esr] == ["0x10", "0x0e"]
    assert [word.varies for word in esr[0].esr] == [True, True, False, False]
    assert "undocumented" in esr[1].notes[0] and "Out Of Range Address" in esr[1].notes[0]


def test_the_gpu_uuid_and_board_serial_never_reach_the_report():
    log = read_kernel_log(str(LOGS / "dmesg-iso.log"))
    dumped = log.model_dump_json()
    assert "0a1b2c3d-4e5f" not in dumped and "1650123456789" not in dumped
    assert log.redacted == ["GPU UUID", "board serial number"]
    event = decode(79, "PCI:0000:3b:00",
                   "GPU GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d, serial number is 1650123456789.", 1)
    assert "0a1b2c3d" not in event.text and "1650123456789" not in event.text


def test_mig_instances_and_old_drivers_name_their_device():
    log = read_kernel_log(str(LOGS / "mig-and-old.log"))
    assert [(event.device, event.xid) for event in log.xids] == [
        ("PCI:0000:01:00 GPU-I:05", 94), ("0000:03:00", 14)]
    assert log.xids[0].exception == "CE User Channel" and log.xids[0].pid == 7194


def test_a_binary_file_or_a_folder_is_refused_with_one_line(tmp_path):
    binary = tmp_path / "core"
    binary.write_bytes(b"\x7fELF\0\0\0" * 100)
    with pytest.raises(BadInput, match="not text"):
        read_kernel_log(str(binary))
    with pytest.raises(BadInput, match="not a file"):
        read_kernel_log(str(tmp_path))
    with pytest.raises(BadInput, match="cannot be read|not a file"):
        read_kernel_log(str(tmp_path / "missing"))


def test_a_huge_log_is_read_within_its_bound_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(kernellogfile, "MAX_BYTES", 4096)
    monkeypatch.setattr(kernellogfile, "MAX_XIDS", 5)
    line = "NVRM: Xid (PCI:0000:3b:00): 43, pid=1, name=p, channel 0x00000001\n"
    huge = tmp_path / "kern.log"
    huge.write_text(line * 1000 + ("x" * 100_000) + "\n")
    log = read_kernel_log(str(huge))
    assert log.cut and len(log.xids) == 5 and log.omitted_xids == 4096 // len(line) - 5
    assert any("only the first" in note for note in log.notes)


def test_a_very_long_line_is_cut_before_it_is_decoded():
    log = read_kernel_text("NVRM: Xid (PCI:0000:3b:00): 31, " + "A" * 1_000_000, "x")
    assert len(log.xids[0].text) == TEXT_LIMIT


@settings(max_examples=300, deadline=None)
@given(xid=st.integers(0, 10**6), device=st.text(max_size=80), message=st.text(max_size=600))
def test_any_payload_decodes_to_an_event_or_plain_text(xid, device, message):
    event = decode(xid, device, message, 1)
    assert len(event.text) <= TEXT_LIMIT and event.xid == xid
    json.loads(event.model_dump_json())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([
    "NVRM: Xid (PCI:0000:3b:00): 13, ", "Graphics SM Warp Exception on (GPC 1, TPC ", "ESR ",
    "0x50d730=0x40010 ", "MMU Fault: ENGINE ", " faulted @ 0x", "_", "Fault is of type ",
    "ACCESS_TYPE_VIRT_", "\n", "[bold]", "Contained: ", "RST: Yes, D-RST: ", "GPU-", "9",
    "\x00", "\udcff", "pid=", ", name=", "2026-11-23T10:15:01+00:00 ", "\r"]), max_size=60))
def test_any_arrangement_of_xid_fragments_reads_without_error(parts):
    log = read_kernel_text("".join(parts), "fuzz")
    KernelLog.model_validate_json(log.model_dump_json())
