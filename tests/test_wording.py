"""Small wording the views print: counts agree with their nouns, a note says what it means, a
help text names today's defaults and says its exit codes in words, and Markdown breaks only
what GitHub could turn into a mention or a link."""

from __future__ import annotations

import ast
import functools
import json
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


# -- the "why" of a real H200 fault, as the terminal shows it --------------------------------

H200 = ROOT / "fixtures" / "gpu" / "h200"


@functools.cache
def _real(case: str) -> tuple[dict, str]:
    """A real dump's JSON report and its terminal view (spaces made one, the box's sides
    left out)."""
    [dump] = (H200 / case).glob("core.*.nvcudmp")
    report = json.loads(run_cli("inspect", dump, "--json").stdout)
    return report, " ".join(run_cli("inspect", dump).stdout.decode().replace("│", " ").split())


def test_a_load_reads_from_memory_and_a_store_writes_to_it():
    _, flash = _real("torch_flash_oob.sglang")
    assert "access load of 16 bytes from global memory" in flash
    assert "[R216+0x4000]: store to shared memory at 0x4400" in flash
    assert "to global memory" not in flash.split("access ", 1)[1][:60]
    _, dynamic = _real("dynamic_shared.explain")
    assert "access store of 4 bytes to shared memory" in dynamic


def test_a_lane_that_breaks_no_bound_is_the_explained_lane_not_the_culprit():
    flash_report, flash = _real("torch_flash_oob.sglang")
    assert flash_report["faults"][0]["explanation"]["breaks_bound"] is False
    assert "explained lane 0: thread (0,0,0) block (0,0,4)" in flash
    assert "culprit lane" not in flash and "none breaks a bound" not in flash
    _, dynamic = _real("dynamic_shared.explain")  # lane 1 does break the bound
    assert "culprit lane 1: thread (1,0,0)" in dynamic


def test_a_loop_variable_names_each_step_once():
    _, flash = _real("torch_flash_oob.sglang")
    assert "steps by 1." in flash
    assert not re.search(r"steps by (\S+) or \1\b", flash)


def test_a_root_in_a_struct_parameter_names_the_field_its_value_is_read_from():
    """flash_fwd_kernel takes a 472-byte Flash_fwd_params by value: a root reading one of its
    fields names the field's offset, and its value is the parameter buffer's bytes there (the
    SASS reads c[0x0][0x210+offset])."""
    report, flash = _real("torch_flash_oob.sglang")
    fault = report["faults"][0]
    buffer = bytes.fromhex(fault["params"]["hex"])
    roots = [r for r in fault["explanation"]["roots"] if r["kind"] == "param"]
    assert len(roots) >= 4
    for root in roots:
        field = re.fullmatch(r"param 0 \(pytorch_flash::Flash_fwd_params\)(?: \+(0x[0-9a-f]+))?",
                             root["name"])
        assert field, root["name"]
        offset = int(field[1] or "0", 16)
        read = {int.from_bytes(buffer[offset:offset + n], "little") for n in (4, 8)}
        assert int(root["value"], 16) in read, (root, offset)
    assert "param 0 (pytorch_flash::Flash_fwd_params) +0x38 = 0x40 (parameter buffer)" in flash


def test_a_kernel_with_only_dynamic_shared_memory_is_not_said_to_declare_0_bytes():
    _, dynamic = _real("dynamic_shared.explain")
    assert "0x0 bytes of static shared memory" not in dynamic
    assert "past the kernel's static shared memory (it declares none)" in dynamic


def test_no_bound_candidate_is_the_addresss_own_input_nor_offered_for_a_misaligned_address():
    dynamic_report, dynamic = _real("dynamic_shared.explain")
    assert any(r["name"] == "param 1 (int)" for r in dynamic_report["faults"][0]["explanation"]["roots"])
    assert dynamic_report["faults"][0]["explanation"]["compare_with"] == [] and "compare " not in dynamic
    misaligned, _ = _real("misaligned_argument.explain")
    explanation = misaligned["faults"][0]["explanation"]
    assert explanation["verdict"]["kind"] == "misaligned" and explanation["compare_with"] == []


def test_a_hangs_spread_says_the_warps_sampled():
    _, hang = _real("hang.explain")
    assert "each of the 16 warps sampled polls that address" in hang


def test_the_crash_page_shows_the_explained_lane_of_a_fault_no_lane_explains(tmp_path):
    [dump] = (H200 / "torch_flash_oob.sglang").glob("core.*.nvcudmp")
    address = str(tmp_path / "index.sqlite")
    assert run_cli("inspect", dump, "--record", "--db", address).returncode == 0
    with Index(address) as index:
        client = Client(WebView(index, {"localhost"}))
        page = client.get("/crash/1", headers={"Host": "localhost:80"},
                          environ_overrides={"SERVER_PORT": "80"})
    assert page.status_code == 200, page.text
    lanes = page.text.split('<table id="lanes">', 1)[1].split("</table>", 1)[0]
    assert "<th>explained</th><td>lane 0: thread (0,0,0) block (0,0,4)" in lanes, lanes


def test_an_unknown_owner_is_said_once_and_why_in_a_whole_sentence():
    report, dynamic = _real("dynamic_shared.explain")
    assert report["faults"][0]["owner"]["artifact"] == "unknown"
    assert "owner unknown module image built by" in dynamic
    assert "unknown (version unknown)" not in dynamic
    assert ("no known library prefix in the kernel's name nor in any other function name its "
            "module image holds") in dynamic
    assert "module image's" not in dynamic
