"""What a crash of a serve run tells its signature's facets (crashlab.index.fleet_facts), read by
capture.from_run from a real triage (a coredump built from a scenario, read by crashlab.inspect),
a real environment capture (a constructed /proc), the launch line and the incident; recorded
into a real index and read back as facets."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

import crashlab
from crashlab.env import capture as capture_environment
from crashlab.env.saved import FILE
from crashlab.index import Index
from crashlab.index.capture import from_run
from crashlab.index.facets import facets_of
from crashlab.index.records import NewCrash
from crashlab.report.model import Owner, Source, Tool
from crashlab.report.run import (
    DumpTriage,
    ExitStatus,
    FileRecord,
    Finding,
    Incident,
    ProcessRecord,
    RunReport,
)
from tests import coredump_builder, scenarios
from tests.env_machine import machine
from tests.test_env import BARE

START = datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)
UPTIME = timedelta(hours=5, minutes=12)
XID_LINE = ("NVRM: Xid (PCI:0000:2a:00): 13, pid=4242, name=python3, Graphics SM Warp Exception "
            "on (GPC 1, TPC 2, SM 0): Out Of Range Address ESR 0x51e730=0x10000e")


@pytest.fixture(scope="module")
def triage(tmp_path_factory):
    """The device_function scenario's dump with a second grid resident on the faulting device
    (a collective, as an NCCL kernel beside the faulting one), read by crashlab.inspect; its
    fault's owner set as the owner helper sets it."""
    path = tmp_path_factory.mktemp("fleet") / "core.nvcudmp"
    scenario = scenarios.device_function()
    device = scenario.spec.devices[0]
    faulting = device.grids[0]
    device.grids.append(replace(faulting, grid_id=faulting.grid_id + 100,
                                function="_Z14ring_allreducev"))
    coredump_builder.write(scenario.spec, path)
    report = crashlab.inspect(path)
    report.faults[0].owner = Owner(artifact="flashinfer", version="0.6.12",
                                   evidence=["the test set it"])
    return report


def _run(tmp_path, triage, visible: str | None = None, findings=()) -> tuple[list, object]:
    """A run directory with environment.json (a constructed machine's), with VISIBLE its
    incarnation's launch.json setting CUDA_VISIBLE_DEVICES, and a report.json-shaped
    RunReport: one incident, its FAULT dump, a request dump of 7 requests and an Xid line."""
    environment = capture_environment(machine(tmp_path / "machine", path=BARE), timeout=2)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / FILE).write_text(environment.model_dump_json())
    if visible is not None:
        (run_dir / "incarnation-1").mkdir()
        (run_dir / "incarnation-1" / "launch.json").write_text(json.dumps(
            {"argv": ["python"], "environment": {"CUDA_VISIBLE_DEVICES": visible}}))
    failed = (START + UPTIME).isoformat()
    dump = DumpTriage(path="cores/core.h.4242.1.nvcudmp", label="FAULT", written_at=failed,
                      size_bytes=1, sha256="0", summary="s", report=triage)
    incident = Incident(
        incarnation=1, directory="incarnation-1", kind="crash", started_at=START.isoformat(),
        ended_at=failed, exit=ExitStatus(code=1), stopped_by_crashlab=False, summary="boom",
        dumps=[dump], request_dumps=[FileRecord(path="dumps/d.pkl", kind="request-dump",
                                                size_bytes=1, sha256="0", requests=7)],
        findings=[Finding(kind="xid", text=XID_LINE, stream="kmsg", line=1, time=failed),
                  *findings],
        processes=[ProcessRecord(pid=4242, ppid=1, role="scheduler", ranks="TP3",
                                 cmdline="python", started_at=START.isoformat())])
    report = RunReport(tool=Tool(version="t"), status="crash", summary="boom",
                       source=Source(path=str(run_dir), size_bytes=1, kind="run"),
                       command=["python", "-m", "sglang.launch_server", "--model-path",
                                "Qwen/Qwen3-30B-A3B", "--tp-size", "4", "--ep=4"],
                       incidents=[incident])
    return from_run(run_dir, report, "serve"), environment


def test_a_runs_crash_carries_the_fault_device_launch_uptime_load_and_owner(tmp_path, triage):
    crashes, environment = _run(tmp_path, triage)
    crash = next(c for c in crashes if isinstance(c, NewCrash))
    fault, facts = triage.faults[0], crash.facts
    gpu = next(g for g in environment.gpus if g.index == fault.device)
    assert (facts.pc, facts.function_offset, facts.kernel) == (
        fault.pc, fault.function_offset, fault.kernel.name)
    assert facts.exception == fault.exception.display and facts.gpu_index == fault.device
    assert (facts.gpu_uuid, facts.pci_address) == (gpu.uuid, gpu.bus_id)
    assert facts.co_resident == ["ring_allreduce()"]
    assert (facts.model, facts.tp_size, facts.pp_size, facts.ep_size) == ("Qwen/Qwen3-30B-A3B", 4,
                                                                         None, 4)
    assert facts.uptime_s == int(UPTIME.total_seconds()) and facts.requests_in_dumps == 7
    # the ESR code and the exception vary with the fault; the register address is one per SM
    assert (facts.xid, facts.esr) == ("13", "0x0e, Out Of Range Address")
    assert facts.owner == "flashinfer 0.6.12"


@pytest.mark.parametrize("visible, named", [("5,2", 5), ("GPU-00000003", 3), ("MIG-1", None)])
def test_the_faulting_gpu_is_the_one_cuda_visible_devices_names(tmp_path, triage, visible, named):
    """The dump's device 0 is the process's first visible GPU: an index, a UUID's prefix, or
    (a MIG instance) none of the environment's GPUs."""
    crashes, environment = _run(tmp_path, triage, visible)
    facts = next(c for c in crashes if isinstance(c, NewCrash)).facts
    gpu = next((g for g in environment.gpus if g.index == named), None)
    assert triage.faults[0].device == 0
    assert (facts.gpu_uuid, facts.pci_address) == ((gpu.uuid, gpu.bus_id) if gpu else (None, None))
    assert named is None or facts.gpu_uuid is not None


def test_the_runs_facts_come_back_as_facets(tmp_path, triage, index_address):
    crashes, _ = _run(tmp_path, triage)
    with Index(index_address) as index:
        for item in crashes:
            if isinstance(item, NewCrash):
                index.record(item)
        hash_ = next(c for c in crashes if isinstance(c, NewCrash)).signature.hash
        by = {f.name: f for f in facets_of(index, hash_).fields}
    fault = triage.faults[0]
    assert [v.value for v in by["pc"].values] == [fault.pc]
    assert [v.value for v in by["owner"].values] == ["flashinfer 0.6.12"]
    assert [v.value for v in by["tp_size"].values] == ["4"]
    assert [v.value for v in by["uptime_s"].values] == [str(5 * 3600)]  # 5 h 12 min: hour 5
    assert [(v.value, v.count) for v in by["co_resident"].values] == [("ring_allreduce()", 1)]


def _python_crash(tmp_path, findings: list[Finding]) -> NewCrash:
    """The crash of a run whose server raised in Python: no dump, the log's FINDINGS."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ended = (START + UPTIME).isoformat()
    incident = Incident(
        incarnation=1, directory="incarnation-1", kind="crash", started_at=START.isoformat(),
        ended_at=ended, exit=ExitStatus(code=1), stopped_by_crashlab=False, summary="boom",
        dumps=[], request_dumps=[], findings=findings, processes=[])
    report = RunReport(tool=Tool(version="t"), status="crash", summary="boom",
                       source=Source(path=str(run_dir), size_bytes=1, kind="run"),
                       command=["python", "-m", "sglang.launch_server"], incidents=[incident])
    [crash] = [c for c in from_run(run_dir, report, "serve") if isinstance(c, NewCrash)]
    return crash


def test_a_python_crash_fills_the_exception_facet_with_its_exception_line(tmp_path):
    """The traceback's exception line is the crash's exception: not "unknown" beside a report
    that names it."""
    raised = "IndexError: index 5000 is out of bounds for dimension 0 with size 1000"
    at = START.isoformat()
    crash = _python_crash(tmp_path, [
        Finding(kind="scheduler-exception", text="Scheduler hit an exception: Traceback (most "
                "recent call last):", stream="stderr", line=3, time=at),
        Finding(kind="traceback", text=raised, stream="stderr", line=4, end_line=9, time=at)])
    assert crash.facts.exception == raised


def test_a_traceback_that_printed_no_exception_line_leaves_the_exception_unknown(tmp_path):
    from crashlab.report.run import NO_EXCEPTION_LINE

    crash = _python_crash(tmp_path, [Finding(kind="traceback", text=NO_EXCEPTION_LINE,
                                             stream="stderr", line=4, time=START.isoformat())])
    assert crash.facts.exception is None


def test_a_dumps_exception_stays_the_faults_beside_a_traceback(tmp_path, triage):
    """A GPU fault's crash whose log also printed a traceback: the facet is the fault's."""
    raised = Finding(kind="traceback", text="RuntimeError: CUDA error: an illegal memory access "
                     "was encountered", stream="stderr", line=9, time=START.isoformat())
    crashes, _ = _run(tmp_path, triage, findings=[raised])
    crash = next(c for c in crashes if isinstance(c, NewCrash))
    assert crash.facts.exception == triage.faults[0].exception.display
