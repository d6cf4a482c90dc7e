"""The expected crash a replay takes from the run directory around its dump: report.json read
through its published model, a later crashlab's fields dropped, a file the model refuses named
in one warning line. No server: the expectation is read before any replay starts."""

from __future__ import annotations

import copy
import json

import pytest

from crashlab.replay.expect import from_run_directory
from tests.conftest import ROOT

#: serve's report.json of a real tensor-parallel GPU fault, written by an older crashlab
OLD_RUN_REPORT = json.loads((ROOT / "fixtures" / "reports" / "392e7d4" / "run-tp2-gpu-fault.json")
                            .read_text())
SCHEDULER_EXCEPTION = "[2026-11-23 16:49:56] Scheduler hit an exception: Traceback (most recent call last):"


def _finding(kind: str, text: str, line: int) -> dict:
    return {"kind": kind, "text": text, "stream": "stderr", "line": line,
            "time": "2026-11-23T16:49:56Z"}


def _run(tmp_path, report, incarnation: int = 1):
    """A run directory with ``report`` (a dict, or text as written) and a dump in ``incarnation``."""
    requests = tmp_path / "run" / f"incarnation-{incarnation}" / "requests" / "node7"
    requests.mkdir(parents=True)
    dump = requests / "crash_dump_2026-06-01_12-00-01.pkl"
    dump.write_bytes(b"")
    text = report if isinstance(report, str) else json.dumps(report)
    (tmp_path / "run" / "report.json").write_text(text)
    return dump


def _report(**incident_changes) -> dict:
    report = copy.deepcopy(OLD_RUN_REPORT)
    report["incidents"][0].update(incident_changes)
    return report


def test_the_first_fault_dumps_kernel_and_class_are_expected(tmp_path):
    dump = _run(tmp_path, OLD_RUN_REPORT)
    expected, warning = from_run_directory(dump)
    assert warning is None
    assert expected.kernel == "moe_align_block_size(int const*, int*, int)"
    assert expected.fault_class == "illegal-address" and expected.patterns == []
    assert expected.source == f"{tmp_path / 'run' / 'report.json'} (incarnation 1)"


def test_a_later_crashlabs_fields_are_dropped_not_refused(tmp_path):
    report = copy.deepcopy(OLD_RUN_REPORT)
    report["added_by_a_later_crashlab"] = {"anything": 1}
    report["incidents"][0]["dumps"][0]["report"]["faults"][0]["new_field"] = [1, 2]
    expected, warning = from_run_directory(_run(tmp_path, report))
    assert warning is None and expected.kernel == "moe_align_block_size(int const*, int*, int)"


def test_the_incident_of_the_dumps_own_incarnation_is_taken(tmp_path):
    report = copy.deepcopy(OLD_RUN_REPORT)
    second = copy.deepcopy(report["incidents"][0])
    second.update(incarnation=2, directory="incarnation-2", kind="dumps")
    second["dumps"][0]["report"]["faults"][0]["kernel"]["name"] = "rms_norm_kernel(float*)"
    report["incidents"].append(second)
    expected, _ = from_run_directory(_run(tmp_path, report, incarnation=2))
    assert expected.kernel == "rms_norm_kernel(float*)" and expected.source.endswith("(incarnation 2)")


def test_without_a_coredump_the_cuda_error_line_is_expected(tmp_path):
    findings = [_finding("cuda-error", "RuntimeError: CUDA error: misaligned address", 40)]
    expected, warning = from_run_directory(_run(tmp_path, _report(dumps=[], findings=findings)))
    assert warning is None and expected.fault_class == "misaligned-address" and expected.kernel is None


def test_without_either_the_scheduler_exception_is_expected(tmp_path):
    findings = [_finding("scheduler-exception", SCHEDULER_EXCEPTION, 61),
                _finding("traceback", "KeyError: 'bootstrap_room'", 61)]
    expected, warning = from_run_directory(_run(tmp_path, _report(dumps=[], findings=findings)))
    assert warning is None and expected.patterns == ["KeyError: 'bootstrap_room'"]


def test_an_incident_naming_no_fault_is_said(tmp_path):
    dump = _run(tmp_path, _report(dumps=[], findings=[_finding("oom", "CUDA out of memory", 9)]))
    assert from_run_directory(dump) == (
        None, f"{tmp_path / 'run' / 'report.json'}: its incident names no fault to compare the "
              "replay with")


def test_a_run_without_incidents_expects_nothing(tmp_path):
    report = copy.deepcopy(OLD_RUN_REPORT)
    report["incidents"] = []
    assert from_run_directory(_run(tmp_path, report)) == (None, None)


def test_a_dump_outside_any_run_directory_expects_nothing(tmp_path):
    dump = tmp_path / "crash_dump.pkl"
    dump.write_bytes(b"")
    assert from_run_directory(dump) == (None, None)


@pytest.mark.parametrize("text, refusal", [
    ("{not json", "JSONDecodeError"),
    (json.dumps({"schema_version": 1, "status": "crash", "incidents": [{"incarnation": 1}]}),
     "ValidationError"),
    (json.dumps(_report(kind="a-later-kind")), "ValidationError"),
    (json.dumps([1, 2]), "ValidationError"),
], ids=["not-json", "a-fragment", "an-incident-kind-it-does-not-know", "not-an-object"])
def test_a_report_the_model_refuses_is_one_warning_line(tmp_path, text, refusal):
    dump = _run(tmp_path, text)
    assert from_run_directory(dump) == (
        None, f"{tmp_path / 'run' / 'report.json'}: not read as a run report ({refusal}); no "
              "expected crash taken from it")
