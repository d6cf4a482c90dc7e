"""The kernel log held against a real H200 dump, and an incident triaged from a log alone, through
the real command (constructed Xid lines, labelled synthetic in fixtures/logs/xid/PROVENANCE.md)."""

from __future__ import annotations

import json

import pytest

import crashlab
from crashlab.report.kernellog import XidTriage
from crashlab.report.model import TriageReport
from tests.conftest import ROOT, run_cli

LOGS = ROOT / "fixtures" / "logs" / "xid"
[NULL_ARGUMENT] = (ROOT / "fixtures" / "gpu" / "h200" / "null_argument.explain").glob("core.*.nvcudmp")
MMU_FAULT = ("NVRM: Xid (PCI:0000:3b:00): 31, pid=7, name=python3, channel 0x00000008, intr "
             "00000000. MMU Fault: ENGINE GRAPHICS GPC0 GPCCLIENT_T1_8 faulted @ {va}. Fault is "
             "of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE\n")


@pytest.fixture(scope="module")
def verdicts():
    """Each constructed log's checks against the real null-pointer dump, by what they compare."""
    return {which: {check.what: check for check in crashlab.inspect(
                NULL_ARGUMENT, kernel_log=LOGS / f"null_argument-{which}.log").kernel_log.checks}
            for which in ("agrees", "differs")}


def test_lines_that_agree_with_the_dump_corroborate_it(verdicts):
    agreed = verdicts["agrees"]
    assert {what: check.verdict for what, check in agreed.items()} == {
        "sms": "agrees", "exception": "agrees", "address": "agrees"}
    assert "corroborates the explanation" in agreed["address"].says
    assert "NVIDIA documents no mapping" in agreed["sms"].says  # which SM is which: not said


def test_an_xid_31_address_off_the_explained_page_contradicts_the_explanation(verdicts):
    differed = verdicts["differs"]
    assert {what: check.verdict for what, check in differed.items()} == {
        "sms": "differs", "exception": "differs", "address": "differs"}
    assert "contradicts the explanation" in differed["address"].says
    assert "0x7fcdce700000" in differed["address"].says


def test_the_checks_reach_the_json_the_terminal_and_the_markdown():
    base = ("inspect", NULL_ARGUMENT, "--kernel-log", LOGS / "null_argument-differs.log")
    shown = run_cli(*base)
    assert shown.returncode == 0, shown.stderr
    assert b"address differs" in shown.stdout and b"contradicts" in shown.stdout
    markdown = run_cli(*base, "--markdown").stdout.decode()
    assert "contradicts the explanation" in markdown
    report = TriageReport.model_validate_json(run_cli(*base, "--json").stdout)
    assert report.kernel_log is not None and len(report.kernel_log.xids) == 3


def test_a_log_alone_triages_an_incident_whose_repeats_share_a_signature(tmp_path):
    first, repeat = tmp_path / "node7.log", tmp_path / "node9.log"
    first.write_text(MMU_FAULT.format(va="0x7fcd_ce700000"))
    repeat.write_text("Nov 23 10:15:02 node9 kernel: " + MMU_FAULT.format(va="0x7f12_00400000"))
    shown = run_cli("inspect", "--kernel-log", first)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.decode().splitlines()[0] == (
        "MMU fault on GPU PCI:0000:3b:00 at VA 0x7fcdce700000 (write, PDE missing): software; "
        "kernel unknown: no GPU dump (serve --coredump would have kept one); rank unknown: no run "
        "directory was given, and a log alone names no rank")
    one, two = (XidTriage.model_validate_json(run_cli("inspect", "--kernel-log", log, "--json").stdout)
                for log in (first, repeat))
    assert one.signature is not None and two.signature is not None
    assert one.signature.hash == two.signature.hash and one.signature.kind == "gpu-xid"


def test_markup_in_a_log_stays_text_in_every_view(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("NVRM: Xid (PCI:0000:3b:00): 43, pid=1, name=p, [bold red]x[/] <script>x</script> "
                   "**b** channel 0x00000001\n")
    shown = run_cli("inspect", "--kernel-log", log)
    assert b"[bold red]x[/]" in shown.stdout
    markdown = run_cli("inspect", "--kernel-log", log, "--markdown").stdout.decode()
    assert "<script>" not in markdown and "**b**" not in markdown


def test_bad_logs_get_one_line_and_exit_2(tmp_path):
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\0ELF" * 64)
    for args in (("--kernel-log", binary), ("--kernel-log", tmp_path / "missing.log"), ()):
        done = run_cli("inspect", *args)
        assert done.returncode == 2, done
        assert len(done.stderr.decode().strip().splitlines()) == 1
        assert b"Traceback" not in done.stderr


def test_a_log_without_an_xid_is_nothing_found(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("usb 1-1: new high-speed USB device\n")
    done = run_cli("inspect", "--kernel-log", log, "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["signature"] is None


def test_a_log_that_names_none_of_the_dumps_gpus_is_held_against_nothing():
    report = crashlab.inspect(NULL_ARGUMENT, kernel_log=LOGS / "null_argument-elsewhere.log")
    assert [(d.pci_bus_id, d.pci_dev_id) for d in report.devices] == [(0, 6)]  # the device table's
    [check] = report.kernel_log.checks  # neither agreeing nor differing on the fault
    assert check.what == "machine" and check.verdict == "not comparable"
    assert "not this dump's machine" in check.says and "3b:00" in check.says and "00:06" in check.says


def test_a_log_from_another_host_is_said_to_be_and_still_checked():
    log = LOGS / "null_argument-otherhost.log"
    checks = crashlab.inspect(NULL_ARGUMENT, kernel_log=log, host="node7").kernel_log.checks
    assert {check.what: check.verdict for check in checks} == {
        "host": "differs", "sms": "agrees", "exception": "agrees", "address": "agrees"}
    assert "node9" in checks[0].says and "node7" in checks[0].says
    same_host = crashlab.inspect(NULL_ARGUMENT, kernel_log=log, host="node9").kernel_log.checks
    assert "host" not in {check.what for check in same_host}


def test_report_says_the_log_is_another_machines(tmp_path):
    done = run_cli("report", NULL_ARGUMENT, "--kernel-log", LOGS / "null_argument-elsewhere.log",
                   "--host", "node7", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    body = done.stdout.decode()
    assert "not this dump's machine" in body and "node9" in body and "corroborates" not in body


def test_inspect_holds_the_logs_host_against_its_record_host(tmp_path):
    done = run_cli("inspect", NULL_ARGUMENT, "--kernel-log", LOGS / "null_argument-otherhost.log",
                   "--record", "--host", "node7", "--db", tmp_path / "index.sqlite", "--json")
    assert done.returncode == 0, done.stderr
    checks = json.loads(done.stdout)["kernel_log"]["checks"]
    assert checks[0]["what"] == "host" and checks[0]["verdict"] == "differs"


@pytest.mark.parametrize(("fault_type", "va", "verdict", "granularity"), [
    ("FAULT_PDE", "0x0_001ff000", "agrees", "2 MiB one page-directory entry (PDE0) maps"),
    ("FAULT_PDE", "0x0_00200000", "differs", "2 MiB one page-directory entry (PDE0) maps"),
    ("FAULT_PTE", "0x0_001ff000", "differs", "4 KiB page"),
    ("FAULT_PTE", "0x0_00000000", "agrees", "4 KiB page"),
])
def test_an_xid_31_address_is_compared_at_its_fault_types_granularity(tmp_path, fault_type, va,
                                                                       verdict, granularity):
    """The real null-pointer dump's explained address is 0x0. A missing PDE unmaps the 2 MiB a
    PDE0 entry maps, so an address elsewhere in it agrees; a missing PTE only the 4 KiB page."""
    log = tmp_path / "node.log"
    log.write_text((LOGS / "null_argument-agrees.log").read_text()
                   .replace("0x0_00000000", va).replace("FAULT_PDE", fault_type))
    [address] = [c for c in crashlab.inspect(NULL_ARGUMENT, kernel_log=log).kernel_log.checks
                 if c.what == "address"]
    assert (address.verdict, address.granularity) == (verdict, granularity)
    region = "0x0-0x1fffff" if fault_type == "FAULT_PDE" else "0x0"
    assert f"the {granularity} {region}" in address.says
