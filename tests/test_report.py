"""The report: JSON contract, schema, and the terminal and Markdown renderings of one object."""

from __future__ import annotations

import json

from rich.console import Console

import crashlab
from crashlab.report import markdown, terminal
from crashlab.report.model import TriageReport
from crashlab.report.schema import json_schema
from tests import scenarios
from tests.conftest import run_cli

CONTRACT = {
    "top": {"schema_version", "source", "dump", "devices", "kernels", "faults", "warnings"},
    "source": {"path", "size_bytes", "kind"},
    "dump": {"abi_version", "driver_version", "generation_flags", "section_count"},
    "device": {"index", "name", "sm_type", "num_sms"},
    "kernel": {"device", "grid_id", "name", "mangled", "grid_dim", "block_dim"},
    "fault": {"exception", "device", "sm", "warp", "lane", "grid_id", "kernel", "block_idx",
              "thread_idx", "pc", "function_offset", "faulting_lanes", "faulting_warps", "sass"},
    "sass": {"instructions", "source", "unavailable_reason"},
    "instruction": {"address", "text", "faulting"},
}


def test_json_keeps_the_design_contract(build):
    report = crashlab.inspect(build(scenarios.fault()).path)
    data = json.loads(report.model_dump_json())
    assert data["schema_version"] == 1
    assert CONTRACT["top"] <= data.keys()
    assert CONTRACT["source"] <= data["source"].keys() and data["source"]["kind"] == "cuda-coredump"
    assert CONTRACT["dump"] <= data["dump"].keys()
    assert CONTRACT["device"] <= data["devices"][0].keys()
    assert CONTRACT["kernel"] <= data["kernels"][0].keys()
    fault = data["faults"][0]
    assert CONTRACT["fault"] <= fault.keys()
    assert {"code", "name", "display"} <= fault["exception"].keys()
    assert {"name", "mangled"} <= fault["kernel"].keys()
    assert CONTRACT["sass"] <= fault["sass"].keys()
    assert CONTRACT["instruction"] <= fault["sass"]["instructions"][0].keys()
    assert {"file", "line"} <= fault["sass"]["source"][0].keys()
    assert fault["pc"].startswith("0x") and fault["sass"]["instructions"][0]["address"].startswith("0x")
    assert TriageReport.model_validate(data) == report


def test_schema_command_prints_the_model_schema():
    done = run_cli("schema")
    assert done.returncode == 0
    schema = json.loads(done.stdout)
    assert schema == json_schema()
    assert "faults" in schema["properties"] and "Fault" in schema["$defs"]


def test_schema_of_the_run_and_replay_reports():
    from crashlab.replay.result import ReplayResult
    from crashlab.report.run import RunReport

    assert json.loads(run_cli("schema", "run").stdout) == json_schema(RunReport, "run")
    assert json.loads(run_cli("schema", "replay").stdout) == json_schema(ReplayResult, "replay")
    refused = run_cli("schema", "nonsense")
    assert refused.returncode == 2 and len(refused.stderr.decode().splitlines()) == 1


def test_terminal_view_shows_the_triage(build):
    scenario = scenarios.device_function()
    report = crashlab.inspect(build(scenario).path)
    console = Console(record=True, width=160)
    terminal.render(report, console)
    out = console.export_text()
    for expected in ("Warp Illegal Address", "scatter_row(float*, int const*, int, float) +0x70",
                     "block      (1,0,0)  thread (32,0,0)", "*>", "device_function.cu:6",
                     "scatter_rows(float*, int const*, int) +0xc0 (0x7fff3a0000c0)", "R0=0x00010000",
                     "resident kernels (1)"):
        assert expected in out, expected


def test_markdown_is_an_issue_body(build):
    report = crashlab.inspect(build(scenarios.fault()).path)
    body = markdown.render(report)
    assert body.startswith("### crashlab: Warp Illegal Address in write_past_end")
    assert "<details><summary>SASS around the faulting PC" in body
    assert "```" in body and "*> 0x7fff3a0000b0" in body
    assert "Shortened" not in body


def _huge(report: TriageReport, copies: int) -> TriageReport:
    fault = report.faults[0]
    faults = [fault.model_copy(update={"pc": hex(0x1000 + i)}) for i in range(copies)]
    kernels = [report.kernels[0].model_copy(update={"grid_id": i}) for i in range(copies)]
    return report.model_copy(update={"faults": faults, "kernels": kernels})


def test_markdown_fits_githubs_limit_cutting_least_important_first(build):
    report = _huge(crashlab.inspect(build(scenarios.fault()).path), 60)
    full = markdown._render(report, markdown._Detail())
    assert len(full) > markdown.GITHUB_LIMIT
    body = markdown.render(report)
    assert len(body) <= markdown.GITHUB_LIMIT
    assert "Shortened to fit GitHub's limit: omitted registers of secondary faults" in body
    # the primary fault keeps its SASS as long as anything else can go
    assert body.index("*> ") < body.index("#### Fault 2")


def test_markdown_last_resort_truncation_says_so(build):
    report = _huge(crashlab.inspect(build(scenarios.fault()).path), 3)
    body = markdown.render(report, limit=2000)
    assert len(body) <= 2000
    assert "cut here to fit" in body


def test_cli_json_and_markdown(build):
    path = build(scenarios.fault()).path
    as_json = run_cli("inspect", path, "--json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout)["faults"][0]["exception"]["code"] == 14
    as_markdown = run_cli("inspect", path, "--markdown")
    assert as_markdown.returncode == 0 and as_markdown.stdout.startswith(b"### crashlab:")


def test_cli_reads_standard_input(build):
    path = build(scenarios.fault(), name="core.nvcudmp.gz", compress=True).path
    done = run_cli("inspect", "-", "--json", "--no-sass", stdin=path.read_bytes())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["source"]["compressed"] and report["faults"][0]["kernel"]["mangled"]


def test_terminal_view_prints_text_from_the_dump_as_text(build):
    """Names, notes, warnings and paths come from a stranger's dump: markup in them is printed
    as it is, never interpreted (nor a reason for Rich to raise)."""
    report = crashlab.inspect(build(scenarios.device_function()).path)
    hostile = "[/bold]x[red]y[/red][link=file:///etc]z"
    fault = report.faults[0]
    fault.kernel.name = fault.function = report.kernels[0].name = hostile
    fault.backtrace[0].function = hostile
    fault.notes.append(hostile)
    fault.sass.source[0].file = hostile
    report.warnings.append(hostile)
    report.source.path = hostile
    console = Console(record=True, width=400)
    terminal.render(report, console)
    out = console.export_text()
    assert out.count(hostile) >= 7, out
