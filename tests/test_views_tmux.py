"""inspect's terminal view in a real terminal (a tmux pane) 80 and 160 columns wide: what a
person sees there is whole, fits the width, and keeps the one-line summary grep-able."""

from __future__ import annotations

import json
import re

import pytest
from rich.cells import cell_len

from crashlab.report.text import readable_name
from tests import tmux_terminal
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.skipif(tmux_terminal.available() is not None,
                                reason=tmux_terminal.available() or "")

#: name -> exit code; "cutlass" is a dump built here around a production CUTLASS cubin whose
#: kernel name demangles to thousands of characters (tests/test_production_cubins.py).
EXAMPLES = {"moe_align_out_of_range": 0, "hang_no_exception": 1, "cutlass": 0}
CUTLASS = "cutlass_mxfp8_grouped_gemm.sm_100.cubin"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def _report(dump: str) -> dict:
    return json.loads(run_cli("inspect", dump, "--json").stdout)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, str]:
    from tests.test_production_cubins import fault_dump, site

    cutlass = tmp_path_factory.mktemp("production") / "grouped_gemm.nvcudmp"
    fault_dump(CUTLASS, site(CUTLASS, "kernel"), cutlass)
    bundled = {name: f"fixtures/synthetic/{name}.nvcudmp" for name in EXAMPLES if name != "cutlass"}
    return {**bundled, "cutlass": str(cutlass)}


@pytest.fixture(scope="module", params=[(d, c) for d in EXAMPLES for c in (80, 160)],
                ids=lambda p: f"{p[0]}-{p[1]}")
def screen(request, dumps):
    name, columns = request.param
    return name, dumps[name], columns, tmux_terminal.run_in_pane(["inspect", dumps[name]], columns, ROOT)


def test_exit_code_is_the_one_documented(screen):
    name, _, _, shown = screen
    assert shown.exit_code == EXAMPLES[name]


def test_first_line_is_the_whole_summary(screen):
    _, dump, _, shown = screen
    assert shown.lines[0] == _report(dump)["summary"]


def test_every_other_line_fits_the_terminal(screen):
    _, _, columns, shown = screen
    too_wide = [line for line in shown.lines[1:] if cell_len(line) > columns]
    assert not too_wide, f"{len(too_wide)} line(s) wider than {columns} columns: {too_wide[:3]}"


def test_kernel_names_are_never_sliced(screen):
    """Every identifier of every resident kernel's name, as the views shorten it, appears whole on
    some line."""
    _, dump, _, shown = screen
    text = "\n".join(shown.lines[1:])
    for kernel in _report(dump)["kernels"]:
        for identifier in IDENTIFIER.findall(readable_name(kernel["name"])):
            assert identifier in text, f"{identifier!r} of {kernel['name']!r} is cut in the view"


def test_no_line_holds_a_piece_of_a_kernel_name(screen):
    """A word on screen cut out of a kernel's identifier mid-part (``moe_ali``, ``gn_bloc``) means
    the name was sliced; whole parts such as ``block`` of ``moe_align_block_size`` or ``Warp`` of
    ``TmaWarpSpecialized`` are words of their own."""
    _, dump, _, shown = screen
    identifiers = {i for k in _report(dump)["kernels"] for i in IDENTIFIER.findall(k["name"])}
    for line in shown.lines[1:]:
        for word in IDENTIFIER.findall(line):
            sliced = [i for i in identifiers if word in i and not _whole_parts(word, i)]
            assert not sliced, f"{word!r} is a slice of {sliced[0]!r}: {line!r}"


def _whole_parts(word: str, identifier: str) -> bool:
    """Whether ``word`` occurs in ``identifier`` as whole parts (split at ``_`` and camelCase)."""
    parts = list(re.finditer(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", identifier))
    bounds = {m.start() for m in parts} | {m.end() for m in parts}
    return any(start in bounds and start + len(word) in bounds
               for start in range(len(identifier)) if identifier.startswith(word, start))


def test_faulting_instruction_is_on_one_line(screen):
    _, dump, _, shown = screen
    faults = _report(dump)["faults"]
    if not faults:
        pytest.skip("a dump without a fault has no faulting instruction")
    faulting = next(i for i in faults[0]["sass"]["instructions"] if i["faulting"])
    assert any(faulting["text"] in line for line in shown.lines)
