"""The 'why' block (Fault.explanation) in inspect's terminal and Markdown views.

The explanation is built here, as the explainer would fill it, on the report of the bundled
SYNTHETIC moe_align dump (a real nvcc-built cubin inside): the MoE story (an ATOMS
past the kernel's static shared memory, its index loaded from parameter 0). The views must put
it under the SASS window, every part of it (instruction, space, bytes, address, verdict with its
basis, formula, roots with provenance, stops, candidates, story), within 80 columns; and show a
``mismatch`` as one, in words, with no verdict, root or story offered as a cause. On a real
H200 dump whose slice runs long (PyTorch's flash kernel) the views cap what repeats.
"""

from __future__ import annotations

import pytest

import crashlab
from crashlab.report import markdown, text, why
from crashlab.report.model import Explanation, Root, Verdict
from crashlab.report.run_views import markdown as run_markdown
from tests.conftest import ROOT
from tests.test_views_hostile import _rendered_text, _squeezed, run_report, triage_report  # noqa: F401 (fixtures)
from tests.test_views_layout import MOE, assert_reads_at_80, terminal_view

BASIS = ("past the 0x1000 bytes .nv.shared._Z20moe_align_block_sizePKiPii declares, after the "
         "0x400 bytes sm_90 reserves")
STORY = ["The ATOMS at shared address 0x2c40 is past the 0x1000 bytes the kernel declares.",
         "Its index 1999 was loaded by LDG at +0x1d0 from parameter 0 at element 288."]


@pytest.fixture(scope="module")
def moe():
    return crashlab.inspect(MOE)


def _explained(report, trust: str = "consistent") -> crashlab.TriageReport:
    fault = report.faults[0]
    at = next(ins for ins in fault.sass.instructions if ins.faulting)
    explanation = Explanation(
        instruction=at.text, pc=at.address, access="atomic", space="shared", access_bytes=4,
        address="0x2c40", address_provenance="recomputed", operand="[R0+URZ]",
        verdict=Verdict(kind="out-of-bounds", basis=BASIS),
        roots=[Root(kind="param", name="param 0 (int const*)", param_ordinal=0,
                    value="0x7fff00001000", provenance="parameter buffer"),
               Root(kind="load", name="LDG at +0x1d0", value="0x7cf", provenance="dump",
                    detail="element 288 of param 0"),
               Root(kind="special", name="threadIdx.x", value="0x20", provenance="launch")],
        stops=["R7 came from another lane (SHFL): not followed"], trust=trust,
        formula="address = arg0[i]*4 + 0x400", story=STORY, compare_with=["#2 int = 1024"])
    return report.model_copy(update={"faults": [fault.model_copy(update={"explanation": explanation})]})


def _block(lines: list[str], first: str, last: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith(last))
    return lines[start:end]


def test_the_terminal_shows_the_why_under_the_sass_window_at_80_columns(moe):
    report = _explained(moe)
    lines = terminal_view(report, 80)
    assert_reads_at_80(report)
    sass_at = next(i for i, line in enumerate(lines) if line.startswith("SASS ("))
    block = _block(lines, "why: explained from the dump", "registers of lane")
    assert lines.index(block[0]) > sass_at
    shown = _squeezed("\n".join(block))
    explanation = report.faults[0].explanation
    for label, value in [("at", text.instruction(explanation.instruction)),
                         ("access", "atomic of 4 bytes on shared memory"),
                         ("address", "0x2c40 (recomputed), operand [R0+URZ]"),
                         ("verdict", f"out-of-bounds: {BASIS}"),
                         ("formula", "address = arg0[i]*4 + 0x400"),
                         ("root", "param 0 (int const*) = 0x7fff00001000 (parameter buffer)"),
                         ("root", "LDG at +0x1d0 = 0x7cf (dump): element 288 of param 0"),
                         ("root", "threadIdx.x = 0x20 (launch)"),
                         ("stop", explanation.stops[0]),
                         ("compare", "#2 int = 1024 (a candidate, not asserted as the bound)"),
                         ("story", " ".join(STORY))]:
        assert _squeezed(label + value) in shown, (label, value)
    assert max(map(len, block)) <= 80


def test_markdown_shows_the_why_under_the_sass_window(moe):
    report = _explained(moe)
    body = markdown.render(report)
    assert body.index("<summary>SASS around the faulting PC") < body.index("**why: explained from the dump**")
    assert body.index("**why: explained from the dump**") < body.index("<summary>Registers of lane")
    seen = _squeezed(_rendered_text(body))
    for line in why.lines(report.faults[0].explanation):
        assert _squeezed(f"{line.label}: {line.text}") in seen, line
    assert "- formula: `address = arg0[i]*4 + 0x400`" in body.splitlines()


def test_a_mismatch_is_shown_as_one_and_offers_no_cause(moe):
    """The pattern registers of a synthetic dump contradict the slice: the views say so and
    leave out the verdict, the roots, the formula, the candidates and the story."""
    report = _explained(moe, trust="mismatch")
    terminal_out = "\n".join(terminal_view(report, 80))
    body = markdown.render(report)
    seen = _rendered_text(body)
    assert_reads_at_80(report)
    for out in (terminal_out, seen):
        squeezed = _squeezed(out)
        assert _squeezed("why: MISMATCH") in squeezed
        assert _squeezed(why.MISMATCH) in squeezed
        assert _squeezed("address 0x2c40 (recomputed)") in _squeezed(out.replace(":", ""))
        assert _squeezed(report.faults[0].explanation.stops[0]) in squeezed
        for cause in (BASIS, STORY[1], "0x7fff00001000 (parameter buffer)", "arg0[i]*4",
                      "a candidate", "out-of-bounds"):
            assert _squeezed(cause) not in squeezed, cause


def test_no_explanation_no_block():
    """--no-explain (explain=False): no explanation, and no block in either view."""
    moe = crashlab.inspect(MOE, explain=False)
    assert moe.faults[0].explanation is None
    assert not [line for line in terminal_view(moe, 80) if line.startswith("why")]
    assert "**why" not in markdown.render(moe)


def test_an_address_the_dump_cannot_give_is_said_undetermined(moe):
    report = _explained(moe)
    explanation = report.faults[0].explanation.model_copy(update={
        "address": None, "address_provenance": None, "operand": None, "access_bytes": None,
        "verdict": Verdict(kind="undetermined", basis="the dump holds no register R0 for lane 0")})
    assert why.address_line(explanation) == "undetermined"
    assert why.access_line(explanation) == "atomic on shared memory"
    fault = report.faults[0].model_copy(update={"explanation": explanation})
    lines = terminal_view(report.model_copy(update={"faults": [fault]}), 80)
    assert _squeezed("verdictundetermined: the dump holds no register R0 for lane 0") in _squeezed(
        "\n".join(lines))


def test_serves_report_md_carries_the_why_of_each_dump(run_report):  # noqa: F811 (the fixture)
    """serve's report.md (and so `crashlab report`'s body) embeds each dump's Markdown view:
    the why block comes with it, under the dump's SASS window."""
    body = run_markdown(run_report)
    explanation = run_report.incidents[0].dumps[0].report.faults[0].explanation
    assert body.index("SASS around the faulting PC") < body.index("**why: explained from the dump**")
    seen = _squeezed(_rendered_text(body))
    for line in why.lines(explanation):
        if not line.code:
            assert _squeezed(f"{line.label}: {line.text}") in seen, line


# -- a real H200 dump whose slice runs long: the views cap what repeats ----------------------

FLASH = next((ROOT / "fixtures/gpu/h200/torch_flash_oob.sglang").glob("core.*.nvcudmp"))


@pytest.fixture(scope="module")
def flash():
    return crashlab.inspect(FLASH)


def test_a_long_slices_why_is_capped_in_the_views_and_whole_in_the_json(flash):
    """PyTorch's flash kernel, read with skip_global_memory: a formula of over a thousand
    characters, a dozen roots and some thirty stops. The terminal (80 columns) and Markdown views
    show the first of each and say how many more the JSON report holds; the JSON has them all."""
    explanation = flash.faults[0].explanation
    stops, roots = len(explanation.stops), len(explanation.roots)
    assert stops > why.MAX_REPEATED + 10 and roots > why.MAX_REPEATED
    assert len(explanation.formula) > why.MAX_FORMULA
    lines = terminal_view(flash, 80)
    block = _block(lines, "why: explained from the dump", "registers of lane")
    assert len(block) <= 60, len(block)
    shown = _squeezed("\n".join(block))
    body = _squeezed(_rendered_text(markdown.render(flash)))
    for seen in (shown, body):
        assert _squeezed(f"... {stops - why.MAX_REPEATED} more in the JSON report") in seen
        assert _squeezed(f"... {roots - why.MAX_REPEATED} more in the JSON report") in seen
        assert _squeezed(f"({len(explanation.formula):,} characters in all, whole in the JSON "
                         "report)") in seen
        assert _squeezed(explanation.stops[why.MAX_REPEATED - 1]) in seen
        assert _squeezed(explanation.stops[why.MAX_REPEATED]) not in seen
    assert sum(1 for line in block if line.startswith("  stop ")) == why.MAX_REPEATED + 1
