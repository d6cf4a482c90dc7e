"""Small wording the views print: counts agree with their nouns, a note says what it means, a
help text names today's defaults and says its exit codes in words, and Markdown breaks only
what GitHub could turn into a mention or a link."""

from __future__ import annotations

import ast
import re

from werkzeug.test import Client

from crashlab import api
from crashlab.index import Index
from crashlab.notation import counted
from crashlab.report import markdown
from crashlab.report.markdown_escape import inline
from crashlab.signature.gpu import of_triage
from crashlab.ui.app import WebView
from tests.conftest import ROOT, run_cli
from tests.index_fixtures import crash, signature

CORE = ROOT / "fixtures" / "synthetic" / "moe_align_explained.nvcudmp"


def test_counted_agrees_with_its_count():
    assert counted(1, "memory section") == "1 memory section"
    assert counted(4, "memory section") == "4 memory sections"
    assert counted(1, "crash", "crashes") == "1 crash"
    assert counted(1200, "crash", "crashes") == "1,200 crashes"


def test_the_dump_table_says_one_memory_section_not_sections():
    report = api.inspect(CORE, sass=False)
    one = report.model_copy(update={"dump": report.dump.model_copy(update={"memory_sections": 1})})
    [row] = [line for line in markdown.render(one).splitlines() if line.startswith("| Sections |")]
    assert "; 1 memory section," in row, row
    assert "1 memory sections" not in row


def test_a_signature_note_says_the_name_was_normalised_and_by_which_rules():
    report = api.inspect(CORE, sass=False)
    named = report.model_copy(deep=True)
    named.faults[0].kernel.name = "void moe_align_block_size<int>(int const*, int*, long)"
    sig = of_triage(named)
    notes = [note for note in sig.notes if note.startswith("kernel name")]
    assert notes, sig.notes
    assert re.fullmatch(r"kernel name normalised by the rules? [a-z, -]+ \(crashlab's signature "
                        r"rules\)", notes[0]), notes
    assert "parameters" in notes[0]


def test_the_signature_page_counts_one_crash_as_one(tmp_path):
    address = str(tmp_path / "index.sqlite")
    only = signature("a1b2c3d4e5f60718")
    with Index(address) as index:
        index.record(crash("one", only, 100.0))
    with Index(address) as index:
        client = Client(WebView(index, {"localhost"}))
        page = client.get(f"/signature/{only.hash}", headers={"Host": "localhost:80"},
                          environ_overrides={"SERVER_PORT": "80"})
        assert page.status_code == 200, page.text
        assert "What stays and what varies (1 crash)" in page.text
        assert "(1 crashes)" not in page.text


def test_a_sass_guard_is_not_broken_as_a_mention_and_a_name_still_is():
    assert inline("@!P0 BRA 0x120") == "@!P0 BRA 0x120"
    assert "<!-- -->" in inline("@octocat") and "<!-- -->" in inline("ops@example.com")


def test_report_help_names_the_index_default_of_db_not_an_old_one():
    done = run_cli("report", "--help")
    text = " ".join(done.stdout.decode().split())
    assert done.returncode == 0
    assert "beside the first run" not in text and "runs directory by default" not in text
    assert "recorded in the crash index (--db)" in text


def test_dump_now_help_says_its_exit_code_2_in_words():
    text = " ".join(run_cli("dump-now", "--help").stdout.decode().split())
    assert "not such a run;" not in text
    assert "2 RUN is not such a run directory" in text


#: "(s)" or "(es)" glued to a word: a plural that does not know its count ("http(s)" is a scheme).
_HEDGED_PLURAL = re.compile(r"(?<!http)(?<=[A-Za-z])\((?:s|es)\)")


def _output_strings(path) -> list[tuple[int, str]]:
    """Every string literal of a module (f-strings' literal parts too) but its docstrings:
    what it can print, and the words around what it prints."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_no_output_hedges_a_plural_with_s_or_es():
    """"1 crash(es)", "32 lane(s) marked in 1 warp(s)": every count the package writes agrees
    with its noun (notation.counted), in its Python and in the ui's templates."""
    package = ROOT / "crashlab"
    hedged = [f"{path.relative_to(ROOT)}:{line}: {value!r}" for path in package.rglob("*.py")
              for line, value in _output_strings(path) if _HEDGED_PLURAL.search(value)]
    hedged += [f"{path.relative_to(ROOT)}: {found}" for path in package.rglob("*.html")
               for found in _HEDGED_PLURAL.findall(path.read_text(encoding="utf-8"))]
    assert not hedged, hedged


def test_a_real_dumps_spread_counts_its_lanes_and_warps():
    dump = next((ROOT / "fixtures/gpu/h200/dynamic_shared.explain").glob("core.*.nvcudmp"))
    printed = " ".join(run_cli("inspect", dump).stdout.decode().split())
    assert "32 lanes marked in 1 warp;" in printed
