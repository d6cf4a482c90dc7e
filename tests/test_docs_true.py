"""What the front page and the manual state, held to the code: README's table of what works names
every verb and links pages that exist, README's worked example is what inspect prints on that
real dump, the manual's home is a map of every page, CONTRIBUTING names every unit of the layer
order, the exit codes each verb's help names are the command-line page's, inspect's page says
which lines fit 80 columns, and no docstring cites a tracker's issue number or a file outside the
repository."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from crashlab.cli import VERBS
from tests.architecture import LAYERS, PACKAGE
from tests.conftest import ROOT, run_cli

README = (ROOT / "README.md").read_text(encoding="utf-8")
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    return text[start:following if following >= 0 else len(text)]


def _fenced_after(text: str, heading: str) -> list[str]:
    section = _section(text, heading)
    return section.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()


def test_readmes_table_of_what_works_names_every_verb_and_links_pages_that_exist():
    table = _section(README, "## What works")
    named = set(re.findall(r"`([a-z][a-z-]*)`", "\n".join(
        line.split("|")[1] for line in table.splitlines() if line.startswith("| `"))))
    assert set(VERBS) - named == set(), "verbs README's table leaves out"
    links = re.findall(r"\]\((docs/[^)#]+)", table)
    assert links and all((ROOT / link).is_file() for link in links), links


def test_readmes_worked_example_is_what_inspect_prints_on_that_dump():
    """Each line of the excerpt is in the output, in order, and lines leave out what lies
    between them only where ``...`` says so; compared with spaces made one, so a terminal's
    wrapping does not matter."""
    [command, *shown] = _fenced_after(README, "## A real dump, explained")
    assert command.startswith("$ crashlab inspect ")
    [core] = ROOT.glob(command.split()[-1])
    done = run_cli("inspect", core)
    assert done.returncode == 0, done.stderr
    printed = " ".join(done.stdout.decode().split())
    assert printed.startswith(" ".join(shown[0].split()))
    at, left_out = 0, False
    excerpt = [line for line in shown if line.strip() != "..."]
    assert len(excerpt) >= 12
    for line in shown:
        if line.strip() == "...":
            left_out = True
            continue
        line = " ".join(line.split())
        found = printed.find(line, at)
        assert found >= 0, f"not printed (or not in this order): {line}"
        skipped = printed[at:found].strip()
        assert left_out or not skipped, f"left out before {line!r} with no '...': {skipped[:200]}"
        at, left_out = found + len(line), False


def test_the_manuals_home_is_a_map_of_every_page_in_the_navigation():
    nav = re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    pages = [page for page in nav if page != "index.md"]
    assert pages and [page for page in pages if f"]({page})" not in home] == []
    assert "What works today" not in home  # README's, not copied here to drift


def test_contributing_names_every_unit_of_the_layer_order():
    layout = _section(CONTRIBUTING, "## Layout")
    order = _section(CONTRIBUTING, "## The layer order")
    packages = [unit for unit in LAYERS if (PACKAGE / unit).is_dir()]
    assert [unit for unit in packages if f"`{unit}/`" not in layout] == []
    assert [unit for unit in LAYERS if f"`{unit}`" not in order] == []


#: an issue of this project's tracker (an outside one's, "cmark-gfm issue 181", names its project)
_OWN_ISSUE = re.compile(r"\b[Ii]ssue \d+")
_OUTSIDE = "shared/" + "reference"


def test_no_source_cites_an_issue_number_or_a_file_outside_the_repository():
    found = []
    for folder in ("crashlab", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _OUTSIDE in line or (_OWN_ISSUE.search(line) and "cmark-gfm issue" not in line
                                        and "markup issue" not in line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_report_help_and_the_index_agree_on_where_the_index_is():
    """report --help sends the reader to --db, whose help names the default."""
    text = " ".join(run_cli("report", "--help").stdout.decode().split())
    assert "(--db)" in text and "XDG_DATA_HOME" in text


#: The H200 session's pytest logs (fixtures/gpu/PROVENANCE.md), the tests of each run after the
#: last: a test's outcome is that of the last run that ran it.
GPU_RUN_LOGS = [ROOT / "fixtures/gpu/h200-runs" / name for name in
                ("pytest-run3.log", "pytest-run4-replay.log", "pytest-run5-params.log")]


def test_readmes_gpu_test_figures_are_those_of_the_h200_logs():
    """README's "the N `gpu` tests ran there: P pass, S skips" is what the H200's own pytest logs
    say (each test's last outcome); each of them is still a gpu test of the suite (which may
    have more, written since, that README says have not run on a GPU)."""
    said = re.search(r"the (\d+) `gpu` tests ran there .*?: (\d+) pass, (\d+) skips?", README,
                     re.DOTALL)
    assert said, "README no longer states the gpu tests' figures"
    outcome: dict[str, str] = {}
    for log in GPU_RUN_LOGS:
        for test, result in re.findall(r"^(tests/.+?) (PASSED|FAILED|SKIPPED|ERROR) ",
                                       log.read_text(encoding="utf-8"), re.MULTILINE):
            outcome[test] = result
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p",
         "no:cacheprovider", "tests"], cwd=ROOT, capture_output=True, text=True, check=False)
    marked = {line for line in collected.stdout.splitlines() if line.startswith("tests/")}
    assert set(outcome) <= marked, "gpu tests the H200 logs name that the suite no longer has"
    counts = [len(outcome), list(outcome.values()).count("PASSED"),
              list(outcome.values()).count("SKIPPED")]
    assert [int(figure) for figure in said.groups()] == counts


def _exit_codes_of(verb: str) -> str | None:
    """The sentences of a verb's help that name its exit codes (from "Exit" to the end of that
    paragraph), spaces made one; None where its help names none."""
    import click

    from crashlab.cli import main

    command = main.get_command(click.Context(main), verb)
    for paragraph in re.split(r"\n\s*\n", command.help or ""):
        said = " ".join(paragraph.split())
        found = re.search(r"Exit (codes:|\d).*", said)
        if found:
            return found.group(0)
    return None


def test_every_verbs_exit_codes_are_those_the_command_line_page_lists():
    """docs/command-line.md lists each verb whose help names its codes, in its help's words,
    and no other."""
    page = (DOCS / "command-line.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([a-z-]+)` \| (Exit .*) \|$", page, re.MULTILINE))
    said = {verb: codes for verb in VERBS if (codes := _exit_codes_of(verb)) is not None}
    assert said and listed == said


def test_the_general_exit_codes_name_doctors_which_read_the_other_way_round():
    """doctor exits 1 on findings, as a linter does, while every other verb's 1 is "found
    nothing": README, crashlab --help and the command-line page say so where they give the
    general codes."""
    doctor = _exit_codes_of("doctor")
    assert doctor and "0 no finding, 1 findings" in doctor
    main_help = " ".join(run_cli("--help").stdout.decode().split())
    readme = " ".join(_section(README, "Exit codes (every command)").split())
    page = " ".join((DOCS / "command-line.md").read_text(encoding="utf-8").split())
    for where, text in (("crashlab --help", main_help), ("README", readme),
                        ("docs/command-line.md", page)):
        general = re.search(r"Exit codes.*?\.(\s|$)", text).group(0)  # the general codes' sentence
        assert "doctor" in general and "0 no finding, 1 findings" in general, (where, general)


def test_inspects_page_says_which_lines_fit_80_columns():
    """In a real 80-column pane the first line of inspect's view of a real dump (the whole
    summary, one line for grep and head -1) is wider than the pane, and every other line fits:
    the page claims that, not that every line fits."""
    from rich.cells import cell_len

    from tests import tmux_terminal

    if tmux_terminal.available() is not None:
        pytest.skip(tmux_terminal.available())
    [dump] = (ROOT / "fixtures/gpu/h200/dynamic_shared.explain").glob("core.*.nvcudmp")
    shown = tmux_terminal.run_in_pane(["inspect", dump.relative_to(ROOT)], 80, ROOT)
    assert [n for n, line in enumerate(shown.lines) if cell_len(line) > 80] == [0]
    page = " ".join((DOCS / "inspect.md").read_text(encoding="utf-8").split())
    assert "In an 80-column terminal every line of the terminal view but the first" in page
    assert "every line of the terminal view fits" not in page
