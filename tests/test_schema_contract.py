"""The published schemas keep their promise: every report of schema_version 1 validates, whichever
crashlab wrote it, and so does a later report that adds a field or a named value.

Old reports are fixtures written by older crashlab commits (fixtures/reports/PROVENANCE.md); new
ones are made here from the bundled fixtures. Validation is the jsonschema library's, as a
consumer of the reports would run it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import crashlab
from crashlab.cli.schema import SCHEMAS
from tests import coredump_builder, scenarios
from tests.conftest import ROOT, run_cli
from tests.schema_check import errors, published

REPORTS = ROOT / "fixtures" / "reports"
SYNTHETIC = ROOT / "fixtures" / "synthetic"
OLD_REPORTS = sorted(REPORTS.rglob("*.json"))


def schema_of(report: Path) -> str:
    """fixtures/reports/<commit>/<which>-<what>.json"""
    return report.name.split("-", 1)[0]


def walk(node):
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from walk(child)


@pytest.mark.parametrize("which", sorted(SCHEMAS))
def test_published_objects_are_open_and_named_values_may_grow(which):
    schema = published(which)
    nodes = list(walk(schema))
    assert not [n for n in nodes if isinstance(n, dict) and n.get("additionalProperties") is False]
    assert not [n for n in nodes if isinstance(n, dict) and "enum" in n]
    named = [n for n in nodes if isinstance(n, dict) and "examples" in n]
    assert named and all(n["type"] == "string" for n in named)
    assert schema["properties"]["schema_version"]["const"] == 1  # the one value that may not grow
    assert "objects are open" in schema["description"]


#: schemas first published after the commits the fixtures come from
NEWER_THAN_THE_FIXTURES = {"environment", "doctor", "report-bundle", "signature", "crash-list",
                           "crash-show", "crash-gc", "incident-list", "bisect", "hang",
                           "xid-triage"}


def test_every_kind_of_report_has_an_old_fixture():
    assert {schema_of(path) for path in OLD_REPORTS} == set(SCHEMAS) - NEWER_THAN_THE_FIXTURES
    assert len({path.parent.name for path in OLD_REPORTS}) >= 2  # reports of two older commits


@pytest.mark.parametrize("report", OLD_REPORTS, ids=lambda p: str(p.relative_to(REPORTS)))
def test_a_report_an_older_crashlab_wrote_validates(report):
    assert errors(json.loads(report.read_text()), schema_of(report)) == []


@pytest.mark.parametrize("scenario", ["fault", "hang", "device_function", "every_section_type"])
def test_a_report_of_this_crashlab_validates(tmp_path, scenario):
    path = tmp_path / "core.nvcudmp"
    coredump_builder.write(getattr(scenarios, scenario)().spec, path)
    assert errors(json.loads(crashlab.inspect(path).model_dump_json()), "triage") == []


@pytest.mark.parametrize("dump", sorted(SYNTHETIC.glob("*.nvcudmp")), ids=lambda p: p.name)
def test_the_bundled_dumps_reports_validate(dump):
    assert errors(json.loads(crashlab.inspect(dump).model_dump_json()), "triage") == []


def test_a_report_with_the_debuggers_view_validates(real_cuda_gdb):
    report = crashlab.inspect(SYNTHETIC / "moe_align_out_of_range.nvcudmp", debugger=True,
                              debugger_program=real_cuda_gdb)
    assert report.debugger.status in ("ok", "partial") and report.debugger.faults
    assert errors(json.loads(report.model_dump_json()), "triage") == []


@pytest.mark.parametrize("dump", sorted((ROOT / "fixtures" / "sglang_dumps").glob("*.pkl")),
                         ids=lambda p: p.name)
def test_the_listing_of_every_bundled_dump_validates(dump):
    listed = run_cli("replay", dump, "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert errors(json.loads(listed.stdout), "listing") == []


def test_a_later_report_with_new_fields_and_new_values_validates():
    """What a later crashlab of schema_version 1 may write: fields and named values unknown today."""
    later = json.loads((REPORTS / "392e7d4" / "triage-moe_align-debugger.json").read_text())
    later["provenance"] = {"host": "node-7"}
    later["status"] = "partial-dump"
    fault = later["faults"][0]
    fault["exception"]["scope"] = "grid"
    fault["pc_source"] = "a newer row"
    fault["sass"]["instructions"][0]["opcode"] = "LDG.E"
    later["debugger"]["problems"].append({"kind": "a-new-problem", "message": "m", "command": None})
    assert errors(later, "triage") == []


def test_what_the_contract_promises_is_still_checked():
    """Open is not empty: types, required fields, hex addresses and the version still hold."""
    report = json.loads((REPORTS / "5807732" / "triage-moe_align.json").read_text())
    broken = copy.deepcopy(report)
    broken["faults"][0]["pc"] = int(report["faults"][0]["pc"], 16)
    del broken["faults"][0]["exception"]["code"]
    broken["faults"][0]["sass"]["instructions"][0]["address"] = "7fff3a000200"
    broken["schema_version"] = 2
    assert len(errors(broken, "triage")) == 4
