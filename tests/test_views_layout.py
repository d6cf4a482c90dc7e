"""inspect's terminal and Markdown views laid out as a reader sees them.

At 80 columns no line is wider than the terminal, the summary stays line 1 whole, every
identifier of a kernel's name is printed unbroken (names wrap after ``::``, ``,``, ``<``, ``(``),
and a SASS instruction is printed whole beside its address, its source on the same line or the
next (tests/test_views_tmux.py checks the same in a real tmux pane). At 160 columns (and into a pipe) the wide layout keeps a column per fact. Where warps stand
(the hang view) is given with function, offset, PC, source line and instruction, and terminal and
Markdown print the same phrase for the same fact. The dumps are the bundled fixtures, builder
scenarios around real nvcc cubins, and the production cubins carved from public wheels (CUTLASS's
kernel names demangle to about 10,000 characters).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

import crashlab
from crashlab.console import PIPED_WIDTH, ViewConsole
from crashlab.escape import escape
from crashlab.report import markdown, terminal, text
from tests import scenarios
from tests.conftest import ROOT, run_cli
from tests.coredump_builder import markers
from tests.test_production_cubins import CUBIN_FILES, fault_dump, site
from tests.test_views_hostile import ANSI, _rendered_text

FIXTURES = sorted((ROOT / "fixtures" / "synthetic").glob("*.nvcudmp"))
HANG = ROOT / "fixtures" / "synthetic" / "hang_no_exception.nvcudmp"
MOE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
IDENTIFIER = re.compile(r"(?<!\w)[A-Za-z_]\w*")


def terminal_view(report, width: int) -> list[str]:
    """The terminal view on a terminal ``width`` columns wide, colours taken off."""
    console = ViewConsole(width=width, file=io.StringIO(), force_terminal=True)
    terminal.render(report, console)
    return ANSI.sub("", console.file.getvalue()).split("\n")[:-1]


def shown_names(report) -> list[str]:
    """Every C++ name the views print: kernels, functions holding PCs, backtrace frames."""
    names = [text.kernel_name(k.name, k.grid_id) for k in report.kernels]
    names += [p.function for k in report.kernels for p in k.warps_at if p.function]
    for fault in report.faults:
        names += [fault.function or ""] + [f.function or "" for f in fault.backtrace]
    return [text.readable_name(name) for name in names]


def assert_reads_at_80(report) -> None:
    lines = terminal_view(report, 80)
    out = "\n".join(lines)
    assert lines[0] == escape(report.summary)
    wide = [line for line in lines[1:] if cell_len(line) > 80]
    assert not wide, wide[:3]
    assert not [line for line in lines if line != line.rstrip()]
    for name in shown_names(report):
        for identifier in set(IDENTIFIER.findall(name)):
            assert re.search(rf"(?<![\w]){re.escape(identifier)}(?!\w)", out), (identifier, name)
    for fault in report.faults[:1]:
        for ins in fault.sass.instructions:
            at = next((i for i, line in enumerate(lines)
                       if f"{ins.address}  {text.instruction(ins.text)}" in line), None)
            assert at is not None, ins.text
            source = text.short_source(ins.source)
            assert source in lines[at] or source in lines[at + 1], (ins.text, source)


@pytest.fixture(scope="module")
def production_reports(tmp_path_factory) -> dict[str, crashlab.TriageReport]:
    reports = {}
    for cubin in CUBIN_FILES:
        for where in ("kernel", "callee"):
            path = tmp_path_factory.mktemp("production") / "core.nvcudmp"
            fault_dump(cubin, site(cubin, where), path)
            reports[f"{cubin}:{where}"] = crashlab.inspect(path)
    return reports


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_bundled_dumps_read_at_80_columns(fixture):
    assert_reads_at_80(crashlab.inspect(fixture))


def test_production_kernels_read_at_80_columns(production_reports):
    for label, report in production_reports.items():
        assert report.faults[0].sass.instructions, label
        assert_reads_at_80(report)


def test_builder_scenarios_read_at_80_columns(build):
    """A device function with its caller frame; two devices, two fault groups."""
    several = scenarios.fault(device_count=2, faulting_device=1)
    several.spec.devices[0].sms[2].ctas[0].warps[0].lanes[5].exception = scenarios.WARP_MISALIGNED_ADDRESS
    for scenario, name in ((scenarios.device_function(), "function.nvcudmp"), (several, "two.nvcudmp")):
        report = crashlab.inspect(build(scenario, name=name).path)
        assert report.faults[0].backtrace or len(report.faults) > 1
        assert_reads_at_80(report)


def test_a_symbol_operand_of_1400_characters_is_named_readably(production_reports):
    """CUTLASS's return labels carry the kernel's mangled name: the views name it as a reader
    would (the JSON keeps nvdisasm's text)."""
    fault = production_reports["cutlass_mxfp8_grouped_gemm.sm_100.cubin:callee"].faults[0]
    labelled = [ins for ins in fault.sass.instructions if "`(_ZN7cutlass" in ins.text]
    assert labelled and all(len(ins.text) > 1400 for ins in labelled)
    out = "\n".join(terminal_view(production_reports["cutlass_mxfp8_grouped_gemm.sm_100.cubin:callee"], 80))
    assert "RET.REL.NODEC R2 `(cutlass::device_kernel<…>)" in out
    assert "_ZN7cutlass" not in out.split("\n", 1)[1]


def test_the_wide_layout_at_160_columns():
    lines = terminal_view(crashlab.inspect(MOE), 160)
    header = next(line for line in lines if "kernel" in line and "┃" in line)
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["dev", "grid", "kernel", "grid x block",
                                                                   "SMs", "warps"]
    fault = crashlab.inspect(MOE).faults[0]
    for ins in fault.sass.instructions:
        assert any(ins.address in line and ins.text in line and text.short_source(ins.source) in line
                   for line in lines), ins.text
    assert any(text.source_chain(fault.sass.source) in line for line in lines)


def test_into_a_pipe_the_layout_is_the_wide_one():
    done = run_cli("inspect", HANG)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.decode().splitlines()
    assert PIPED_WIDTH == 160 and any("grid x block" in line for line in lines)
    report = crashlab.inspect(HANG)
    kernel = report.kernels[0]
    assert f"  {text.position_line(kernel, kernel.warps_at[0])}" in lines


# -- the hang view ---------------------------------------------------------------------------
def test_where_warps_stand_has_function_offset_source_and_instruction():
    report = crashlab.inspect(HANG)
    spin, wait = report.kernels
    for kernel, marker in ((spin, markers()["hang.sm_90.cubin:spin"]),
                           (wait, markers()["tp_ranks.sm_90.cubin:tp-rank1"])):
        first = kernel.warps_at[0]
        assert first.function == kernel.name
        assert first.function_offset == marker.function_offset
        assert [(Path(s.file).name, s.line) for s in first.source] == [(marker.source, marker.line)]
        assert first.instruction == marker.instruction
    # the JSON is additive: a report of before these fields still validates
    data = json.loads(report.model_dump_json())
    for kernel in data["kernels"]:
        for position in kernel["warps_at"]:
            del position["function"], position["source"], position["instruction"]
    assert crashlab.TriageReport.model_validate(data).kernels[0].warps_at[0].source == []


def test_without_sass_warps_stand_at_a_function_offset_and_line_with_no_instruction():
    spin = crashlab.inspect(HANG, sass=False).kernels[0]
    assert spin.warps_at[0].function == spin.name and spin.warps_at[0].function_offset == 0x30
    assert spin.warps_at[0].instruction is None
    assert spin.warps_at[0].source == crashlab.inspect(HANG).kernels[0].warps_at[0].source != []


def test_the_hang_view_in_terminal_and_markdown():
    report = crashlab.inspect(HANG)
    spin = report.kernels[0]
    pc, source = spin.warps_at[0].pc, spin.warps_at[0].source[0]
    phrase = f"grid 1: 12 warps at +0x30 ({pc}), {source.file}:6"
    wide = terminal_view(report, 160)
    assert f"  {phrase}" in wide
    at = wide.index(f"  {phrase}")
    assert wide[at + 1].strip() == "LDG.E.STRONG.SYS R0, desc[UR4][R6.64]"
    assert f"  {phrase}" in terminal_view(report, 80)  # the repository-relative path fits
    assert f"  grid 1: 12 warps at +0x30 ({pc}), hang.cu:6" in terminal_view(report, 64)
    body = markdown.render(report)
    assert f"{phrase}: LDG.E.STRONG.SYS R0, desc[UR4][R6.64]" in _rendered_text(body)


def test_a_device_function_where_warps_stand_is_named(build):
    report = crashlab.inspect(build(scenarios.device_function()).path)
    inside = [p for p in report.kernels[0].warps_at if p.function != report.kernels[0].name]
    assert inside and inside[0].function == "scatter_row(float*, int const*, int, float)"
    phrase = text.position_line(report.kernels[0], inside[0])
    assert f"at scatter_row(float*, int const*, int, float) +{inside[0].function_offset:#x} " \
           f"({inside[0].pc})" in phrase
    assert phrase in "\n".join(terminal_view(report, 160))


# -- one rule for both views -------------------------------------------------------------------
def test_both_views_print_the_same_phrase_for_the_same_fact(build):
    for report in (crashlab.inspect(build(scenarios.device_function()).path), crashlab.inspect(MOE),
                   crashlab.inspect(HANG)):
        seen_terminal = "\n".join(terminal_view(report, 160))
        seen_markdown = _rendered_text(markdown.render(report))
        facts = [text.position_line(k, p, devices=len(report.devices))
                 for k in report.kernels for p in k.warps_at]
        for fault in report.faults:
            facts += [text.source_chain(fault.sass.source), text.function_line(fault)]
            facts += [text.frame_line(frame) for frame in fault.backtrace]
        assert facts
        for fact in facts:
            assert fact in seen_terminal, fact
            assert fact in seen_markdown, fact


def test_code_addresses_and_sources_follow_one_rule():
    class Line:
        def __init__(self, file, line):
            self.file, self.line = file, line

    assert text.code_address(0x30, "0x7fff3a000030") == "+0x30 (0x7fff3a000030)"
    assert text.code_address(0x30, "0x7fff3a000030", "helper(int)") == "helper(int) +0x30 (0x7fff3a000030)"
    assert text.code_address(None, "0x7fff3a000030") == "0x7fff3a000030"
    chain = [Line("/opt/cuda/include/atomic.hpp", 107), Line("kernels/moe.cu", 24)]
    assert text.source_chain(chain) == "/opt/cuda/include/atomic.hpp:107 <- kernels/moe.cu:24"
    assert text.source_chain(chain, room=60) == text.source_chain(chain)
    assert text.source_chain(chain, room=40) == text.short_source(chain) == "atomic.hpp:107 <- moe.cu:24"


def test_sizes_are_in_human_units_beside_the_bytes():
    """inspect's dump line and its Markdown File row: ``131.8 kB (131,776 bytes)``, readable at a
    glance and exact beside ``ls -l``."""
    from crashlab.textsize import with_bytes

    path = MOE
    size = with_bytes(path.stat().st_size)
    assert size.endswith(f"({path.stat().st_size:,} bytes)")
    shown = run_cli("inspect", path, "--no-sass").stdout.decode()
    body = run_cli("inspect", path, "--no-sass", "--markdown").stdout.decode()
    assert f": {size}, " in " ".join(shown.split()) and f"`, {size} |" in body
