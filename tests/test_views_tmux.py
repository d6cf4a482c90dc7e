"""inspect's terminal view in a real terminal (a tmux pane) 80 and 160 columns wide: what a
person sees there is whole, fits the width, and keeps the one-line summary grep-able."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

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
#: doctor asks --python for its sys.path under this timeout: a Python start on a loaded machine
#: takes longer than the default 2 s, and one that does not answer is refused.
SLOW_MACHINE = {"CRASHLAB_TOOL_TIMEOUT": "30"}
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


# -- the crash index's views: list, list --incidents, show, gc ---------------------------------

LONG_TITLE = ("AttributeError: 'NoneType' object has no attribute 'shape' in "
              "sglang.srt.layers.moe.fused_moe_triton.fused_moe.invoke_fused_moe_kernel at "
              "fused_moe.py:1234")
INDEX_VIEWS = {"list": ["list"], "incidents": ["list", "--incidents"], "crash": ["show", "1"],
               "signature": ["show", "abcdef"], "gc": ["gc", "--keep", "0", "--dry-run"]}


@pytest.fixture(scope="module")
def crash_index(tmp_path_factory) -> tuple[str, str, str]:
    """An index of long names: a dump inspected by hand deep in a folder, and two servers of
    one deployment whose runs sit in long paths, with a long title; every text the views print
    of them, and the dump's one-line summary."""
    from crashlab.index import Index
    from tests.index_fixtures import crash, signature

    deep = tmp_path_factory.mktemp("views") / "a_rather_long_folder_name" / "another_one_below_it"
    deep.mkdir(parents=True)
    address = str(deep.parent / "index.sqlite")
    dump = deep / "core_1754_node_12345_moe_align_block_size.nvcudmp"
    dump.write_bytes((ROOT / "fixtures/synthetic/moe_align_out_of_range.nvcudmp").read_bytes())
    assert run_cli("inspect", dump, "--no-sass", "--record", "--db", address).returncode == 0
    texts = [str(dump), LONG_TITLE]
    with Index(address) as index:
        for number, role in enumerate(["prefill", "decode"]):
            run = deep / f"run-2026-11-23T20-15-07-{role}-server-of-the-deployment"
            run.mkdir()
            (run / "core.nvcudmp").write_bytes(b"x" * 20_000)
            index.record(crash(f"{role}-run", signature("abcdef012345", LONG_TITLE),
                               10_000.0 + 30 * number, host="gpu-node-0042.cluster.internal",
                               run_dir=str(run), deployment="pd-east-1", server_role=role,
                               rank="DP0 TP3", label="FAULT", files=[(run / "core.nvcudmp", 20_000)]))
            texts.append(str(run))
    listed = json.loads(run_cli("list", "--incidents", "--json", "--db", address).stdout)
    texts += [note for incident in listed["incidents"] for note in incident["notes"]]
    return address, "\n".join(texts), _report(str(dump))["summary"]


@pytest.mark.parametrize("view", INDEX_VIEWS)
def test_the_index_views_fit_80_columns_and_never_break_a_word(crash_index, view):
    address, texts, summary = crash_index
    shown = tmux_terminal.run_in_pane([*INDEX_VIEWS[view], "--db", address], 80, ROOT)
    assert shown.exit_code == 0, shown.lines
    assert shown.lines[0].startswith("index: /")
    # show's report of a dump is inspect's view, whose summary is one line for grep
    too_wide = [line for line in shown.lines if cell_len(line) > 80 and line != summary]
    assert not too_wide, f"{len(too_wide)} line(s) wider than 80 columns: {too_wide[:3]}"
    # a word cut in two ends one line and starts the next: together they are in a text printed
    broken = [(line, below) for line, below in zip(shown.lines, shown.lines[1:], strict=False)
              if (tail := WORD_END.search(line)) and (head := WORD_START.match(below.lstrip()))
              and tail[0] + head[0] in texts]
    assert not broken, f"a word broken across lines in {view}: {broken[:3]}"


WORD_END, WORD_START = re.compile(r"[\w-]+$"), re.compile(r"[\w-]+")


# replay's views and inspect --debugger's, in the same panes: every line fits, no word is cut.

REPLAY_DUMP = ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.23.pkl"
#: A pattern longer than 80 columns with the expected crash's prefix: its words must stay whole.
LONG_PATTERN = ("illegal memory access in moe_align_block_size_kernel while fused_moe_triton "
                "dispatched the expert_parallel_group")


def _lines_fit(lines: list[str], columns: int) -> None:
    too_wide = [line for line in lines if cell_len(line) > columns]
    assert not too_wide, f"{len(too_wide)} line(s) wider than {columns} columns: {too_wide[:3]}"


def _words_whole(lines: list[str], *texts: str) -> None:
    shown = set(IDENTIFIER.findall("\n".join(lines)))
    cut = [word for text in texts for word in IDENTIFIER.findall(text) if word not in shown]
    assert not cut, f"cut in the view: {cut[:5]}"


@pytest.mark.parametrize("columns", [80, 160])
def test_replay_list_fits_the_terminal(columns):
    listing = json.loads(run_cli("replay", REPLAY_DUMP, "--list", "--json").stdout)
    shown = tmux_terminal.run_in_pane(["replay", REPLAY_DUMP, "--list"], columns, ROOT)
    assert shown.exit_code == 0
    _lines_fit(shown.lines, columns)
    prompts = [r["text"] for r in listing["requests"]  # as typed, short enough to be shown whole
               if r["input_ids"] is None and isinstance(r["text"], str) and len(r["text"]) <= 40]
    _words_whole(shown.lines, listing["path"], listing["launch_command"],
                 listing["server_args"]["model_path"], *prompts)
    assert f"({listing['size_bytes']:,} bytes)" in " ".join(shown.lines) or \
        f"{listing['size_bytes']} bytes" in " ".join(shown.lines)


@pytest.fixture(scope="module")
def replay_server(tmp_path_factory):
    from tests.replay_support import standin

    with standin(tmp_path_factory.mktemp("standin"), "--diverge-on", "The capital") as server:
        yield server.url


@pytest.mark.parametrize("columns", [80, 160])
def test_replay_result_fits_the_terminal(replay_server, columns):
    from tests.replay_support import FAST_WATCH

    shown = tmux_terminal.run_in_pane(["replay", REPLAY_DUMP, "--url", replay_server, *FAST_WATCH,
                                       "--expect", LONG_PATTERN], columns, ROOT)
    assert shown.exit_code == 1  # no crash: the stand-in only diverges
    assert shown.lines[0].startswith("reproduced 0/1: attempt 1 no crash")  # the verdict first
    _lines_fit(shown.lines, columns)
    _words_whole(shown.lines, LONG_PATTERN, "trace_decode_token_ids unexpected keyword argument")
    assert any("output_ids differ" in line for line in shown.lines)  # the divergence table


@pytest.mark.parametrize("columns", [80, 160])
def test_debugger_agreement_is_a_line_per_field(real_cuda_gdb, monkeypatch, columns):
    monkeypatch.setenv("CRASHLAB_CUDA_GDB", real_cuda_gdb)
    dump = "fixtures/synthetic/moe_align_out_of_range.nvcudmp"
    shown = tmux_terminal.run_in_pane(["inspect", dump, "--debugger"], columns, ROOT)
    report = json.loads(run_cli("inspect", dump, "--json", "--debugger",
                                env={"CRASHLAB_CUDA_GDB": real_cuda_gdb}).stdout)
    assert shown.exit_code == 0 and report["debugger"]["status"] == "ok"
    _lines_fit(shown.lines[1:], columns)
    verdicts = {"agree": "agrees", "disagree": "differs: ours", "unknown": "not compared"}
    fields = shown.lines[shown.lines.index("  fault 1:") + 1:]
    for agreement in report["debugger"]["faults"][0]["agreement"]:
        row = [line.split() for line in fields if line.split()[:1] == [agreement["field"]]]
        assert row and " ".join(row[0][1:]).startswith(verdicts[agreement["verdict"]]), agreement
        if agreement["note"]:
            _words_whole(shown.lines, agreement["note"])


# -- one wrapper for every view, stderr included: what 80 columns must never break ---------------

H200 = ROOT / "fixtures" / "gpu" / "h200"
#: a real hang: 16 warps polling a flag (its waits block: a class line, its evidence under it)
HANG = (H200 / "hang.explain" / "core.1193.nvcudmp").relative_to(ROOT)
VERBS = ("inspect", "replay", "serve", "report", "bisect", "debug", "env", "doctor", "list",
         "show", "gc", "schema", "dump-now", "ui")


def _numbers_whole(lines: list[str]) -> None:
    """No number broken at its thousands comma (``334,`` ending one line, ``387`` the next) nor
    a dim3 at its commas."""
    broken = [(line, below) for line, below in zip(lines, lines[1:], strict=False)
              if re.search(r"\d,$", line) and re.match(r"\s*\d", below)]
    assert not broken, f"a number broken at its comma: {broken[:3]}"


def _names_whole(lines: list[str], *paths: str) -> None:
    """Each name of each path (what lies between its slashes) whole on one line: a path may
    break after a ``/``, never inside a name."""
    cut = [name for path in paths for name in path.split("/")
           if name and not any(name in line for line in lines)]
    assert not cut, f"names cut in the view: {cut[:5]}"


def _said(lines: list[str]) -> list[str]:
    """crashlab's lines on stderr among what the pane shows: each ``crashlab: `` line and the
    lines that continue it (indented by two spaces)."""
    said, continuing = [], False
    for line in lines:
        if line.startswith("crashlab: "):
            said.append(line)
            continuing = True
        elif continuing and re.match(r"  \S", line):
            said.append(line)
        else:
            continuing = False
    return said


def test_a_hangs_wait_block_stays_indented_under_where_warps_stand():
    """The real hang's waits at 80 columns: every line of the block is indented, and what
    continues the polling-memory class line or its evidence stands under them, never at
    column 0."""
    shown = tmux_terminal.run_in_pane(["inspect", HANG], 80, ROOT)
    assert shown.exit_code == 1  # a hang: no exception, nothing found
    _lines_fit(shown.lines[1:], 80)
    start = shown.lines.index("where warps stand") + 1
    end = next(n for n, line in enumerate(shown.lines) if line.startswith(str(HANG)))
    block = shown.lines[start:end]
    assert any(line.startswith("    polling-memory: ") for line in block), block
    indents = [len(line) - len(line.lstrip()) for line in block]
    assert min(indents) >= 2, block
    waits = next(n for n, line in enumerate(block) if line.startswith("    polling-memory: "))
    assert min(indents[waits + 1:]) >= 6, block[waits:]  # the class's lines, under it


@pytest.mark.parametrize("case", ["misaligned_argument.explain", "hang.explain"])
def test_a_real_dumps_footer_keeps_its_numbers_whole(case):
    """The dump line under inspect's view (``334.4 kB (334,387 bytes), 257 sections``): at 80
    columns it wraps between words, its byte count whole, its lines after the first indented."""
    [dump] = (H200 / case).glob("core.*.nvcudmp")
    dump = dump.relative_to(ROOT)
    shown = tmux_terminal.run_in_pane(["inspect", dump], 80, ROOT)
    _lines_fit(shown.lines[1:], 80)
    _numbers_whole(shown.lines)
    size = rf"\({(ROOT / dump).stat().st_size:,}( |$)"  # the byte count whole
    assert any(re.search(size, line) for line in shown.lines), size
    footer = next(n for n, line in enumerate(shown.lines) if line.startswith(str(dump)))
    rest = shown.lines[footer + 1:]
    assert rest and all(line.startswith("  ") for line in rest), rest


def test_the_debugger_view_keeps_unavailable_whole(real_cuda_gdb, monkeypatch):
    """cuda-gdb prints a predicate as ``<unavailable>``: the agreement's note quotes it, and at
    80 columns it stays one word (not ``<`` ending a line)."""
    monkeypatch.setenv("CRASHLAB_CUDA_GDB", real_cuda_gdb)
    dump = "fixtures/synthetic/moe_align_out_of_range.nvcudmp"
    report = json.loads(run_cli("inspect", dump, "--json", "--debugger",
                                env={"CRASHLAB_CUDA_GDB": real_cuda_gdb}).stdout)
    notes = [a["note"] for a in report["debugger"]["faults"][0]["agreement"] if a["note"]]
    assert any("<unavailable>" in note for note in notes), notes
    shown = tmux_terminal.run_in_pane(["inspect", dump, "--debugger"], 80, ROOT)
    _lines_fit(shown.lines[1:], 80)
    assert any("<unavailable>" in line for line in shown.lines)
    assert not [line for line in shown.lines if re.search(r"(^|\W)<$", line)]
    _numbers_whole(shown.lines)


def test_replay_list_keeps_the_dumps_size_whole():
    """The listing's summary line of a real 39,658-byte dump, in a pane as wide as the line up
    to the byte count's comma (what a path of that length gives at 80 columns): the number is
    never broken there; the line breaks before it."""
    dump = (ROOT / "fixtures" / "sglang_dumps" / "real" / "crash_dump_real_0.5.23.pkl").relative_to(ROOT)
    size = f"({(ROOT / dump).stat().st_size:,}"
    piped = run_cli("replay", dump, "--list").stdout.decode().splitlines()
    summary = next(line for line in piped if line.startswith(f"{dump}: "))  # one line in a pipe
    columns = summary.index(size) + len(size.split(",")[0]) + 1  # "(39," ends the line
    shown = tmux_terminal.run_in_pane(["replay", dump, "--list"], columns, ROOT)
    assert shown.exit_code == 0, shown.lines
    _lines_fit(shown.lines, columns)
    _numbers_whole(shown.lines)
    assert any(re.search(rf"{re.escape(size)}( |$)", line) for line in shown.lines)


REAL_DUMPS = ROOT / "fixtures" / "sglang_dumps" / "real"


def _listing_in_pane(dump: Path, columns: int) -> tuple[list[str], list[str], list[str]]:
    """(the heading and rows, the footer's lines, the rids --json lists) of ``replay --list``
    of a real dump in a pane COLUMNS wide."""
    listing = json.loads(run_cli("replay", dump, "--list", "--json").stdout)
    shown = tmux_terminal.run_in_pane(["replay", dump.relative_to(ROOT), "--list"], columns, ROOT)
    assert shown.exit_code == 0, shown.lines
    _lines_fit(shown.lines, columns)
    footer = next(n for n, line in enumerate(shown.lines) if line.startswith(f"{dump.relative_to(ROOT)}: "))
    end = next((n for n in range(footer + 1, len(shown.lines)) if not shown.lines[n].startswith("  ")),
               len(shown.lines))
    return shown.lines[:footer], shown.lines[footer:end], [str(r["rid"]) for r in listing["requests"]]


@pytest.mark.parametrize("columns", [80, 160])
def test_replay_list_tells_every_rid_apart_and_heads_the_states_number(columns):
    """SGLang 0.5.23's real dump holds r05-parallel_0.warmup, .s0, .s1 and .s2 (a parallel
    sampling request): each row's rid is the rid whole, or its start and its end around "…",
    so no two rows show the same rid; the state column's heading names its number (the tokens
    generated) and the footer says what +t and state hold, in words the wrapper keeps whole,
    its lines after the first indented as inspect's footer is."""
    rows, footer, rids = _listing_in_pane(REAL_DUMPS / "crash_dump_real_0.5.23.pkl", columns)
    heading, *rows = rows
    assert "state tok" in heading, heading
    cells = [row.split()[3] for row in rows if row[:1].isdigit()]  # a row, not a prompt's next line
    assert len(cells) == len(rids) and len(set(cells)) == len(cells), cells
    for cell, rid in zip(cells, rids, strict=True):
        start, _, end = cell.partition("…")
        assert cell == rid or (rid.startswith(start) and rid.endswith(end) and end), (cell, rid)
    assert "r05-parallel_0.s0" in cells and "r05-parallel_0.s2" in cells
    said = " ".join(line.strip() for line in footer)
    assert "17 requests, 3 in flight at the crash" in said, footer
    assert "+t: seconds after the first" in said and "state: how each ended, and the tokens it generated" in said
    assert all(line.startswith("  ") for line in footer[1:]) and not any(
        line.rstrip().endswith(("(+t", "+t")) for line in footer), footer


def test_replay_list_of_a_request_dump_says_no_crash_and_what_was_unfinished():
    """A real /configure_logging request dump of SGLang 0.5.23 was written without a crash: its
    footer counts the requests unfinished when SGLang wrote it, never "in flight at the crash"."""
    _, footer, _ = _listing_in_pane(REAL_DUMPS / "request_dump_real_0.5.23.pkl", 80)
    said = " ".join(line.strip() for line in footer)
    assert "15 requests, 0 unfinished when SGLang wrote it (a request dump: no crash)" in said, footer
    assert "in flight" not in said


def test_doctor_breaks_a_path_between_its_names(tmp_path):
    """doctor's messages name the interpreter, here by a path longer than the message column:
    at 80 columns it breaks after a ``/``, never inside a name."""
    python = tmp_path / "a-virtual-environment-for-the-server" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    shown = tmux_terminal.run_in_pane(["doctor", "--python", python, "--runs-dir", tmp_path], 80,
                                      ROOT, environ=SLOW_MACHINE)
    checks = json.loads(run_cli("doctor", "--json", "--python", python, "--runs-dir", tmp_path,
                                env=SLOW_MACHINE).stdout)
    _lines_fit(shown.lines, 80)
    paths = {word.rstrip(",;:.)") for check in checks["checks"]
             for word in (check["message"] + " " + (check["fix"] or "")).split()
             if word.lstrip("(").startswith("/")}
    assert str(python) in {p.lstrip("(") for p in paths}
    _names_whole(shown.lines, *(p.lstrip("(") for p in paths))


def test_env_breaks_a_path_between_its_names(tmp_path):
    """env's ``key: value`` lines name the interpreter by its path: in a pane narrower than
    the line, it breaks after a ``/``, never inside a name, and the lines after the first are
    indented under the key."""
    python = tmp_path / "a-virtual-environment-for-the-server" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    shown = tmux_terminal.run_in_pane(["env", "--python", python, "--timeout", "30"], 60, ROOT)
    assert shown.exit_code == 0, shown.lines
    _lines_fit(shown.lines, 60)
    _names_whole(shown.lines, str(python))
    start = next(n for n, line in enumerate(shown.lines) if line.startswith("Python executable:"))
    assert shown.lines[start + 1].startswith("  ") and not shown.lines[start + 1].startswith("   ")


@pytest.mark.parametrize("verb", ("", *VERBS))
def test_every_verbs_help_fits_80_columns(verb):
    """Each verb's --help (and crashlab's own) in a real 80-column terminal: its examples
    (bisect's, replay's, ...) included, no line is wider than the pane, and none ends inside a
    hyphenated name or option (``--restart-`` / ``cmd``, ``nvidia-`` / ``cuda-nvdisasm``)."""
    shown = tmux_terminal.run_in_pane([verb, "--help"] if verb else ["--help"], 80, ROOT)
    assert shown.exit_code == 0
    assert verb != "bisect" or any(line.strip() == "Examples:" for line in shown.lines)
    _lines_fit(shown.lines, 80)
    cut = [(line, below) for line, below in zip(shown.lines, shown.lines[1:], strict=False)
           if re.search(r"\w-$", line) and re.match(r"\s*\w", below)]
    assert not cut, f"a name broken at its hyphen: {cut[:3]}"


def test_serves_lines_on_stderr_fold_between_names(tmp_path):
    """serve's one-line messages (its run directory, the crash line, the report's place) on a
    terminal: folded to 80 columns, a long path after a ``/`` and a Python module path at its
    dots, never inside a name; into a pipe each is one line."""
    runs = tmp_path / "runs-of-the-inference-servers-on-this-node" / "the-deployment-called-pd-east-1"
    crash = ("RuntimeError: CUDA error: an illegal memory access was encountered in "
             "sglang.srt.layers.moe.fused_moe_triton.fused_moe.invoke_fused_moe_kernel")
    program = f"import os, time; time.sleep(0.3); print({crash!r}, flush=True); os.abort()"
    shown = tmux_terminal.run_in_pane(["serve", "--runs-dir", runs, "--no-debugger", "--",
                                       sys.executable, "-c", program], 80, ROOT)
    assert shown.exit_code == 0, shown.lines  # a crash caught
    said = _said(shown.lines)
    _lines_fit(said, 80)
    [run] = runs.iterdir()
    _names_whole(said, str(run / "report.md"))
    module = "sglang.srt.layers.moe.fused_moe_triton.fused_moe.invoke_fused_moe_kernel"
    assert not [name for name in module.split(".") if not any(name in line for line in said)]
    assert any("an illegal memory access" in line for line in said)


def test_reports_lines_on_stderr_fold_between_names(tmp_path):
    """crashlab report's title, body and bundle lines on a terminal: folded to 80 columns, the
    out folder's long path after a ``/``, never inside a name."""
    out = tmp_path / "reports-for-the-upstream-issue-tracker" / "moe-align-out-of-range-on-h100"
    core = "fixtures/synthetic/moe_align_out_of_range.nvcudmp"
    shown = tmux_terminal.run_in_pane(["report", core, "--out", out], 80, ROOT)
    assert shown.exit_code == 0, shown.lines
    said = _said(shown.lines)
    _lines_fit(said, 80)
    [body] = out.glob("crashlab-report-*.md")
    assert any(line.startswith("crashlab: title: ") for line in said)
    _names_whole(said, str(body))


def test_a_sass_line_too_wide_continues_under_its_instruction():
    """PyTorch's flash kernel's LDGSTS lines are wider than 80 columns with their address: each
    breaks between its operands, its next line under the instruction, never at column 0; the
    signature line continues indented too."""
    dump = (H200 / "torch_flash_oob.sglang" / "core.1693.nvcudmp").relative_to(ROOT)
    shown = tmux_terminal.run_in_pane(["inspect", dump], 80, ROOT)
    assert shown.exit_code == 0, shown.lines
    _lines_fit(shown.lines[1:], 80)
    faulting = next(n for n, line in enumerate(shown.lines) if line.startswith(" *>  0x"))
    column = shown.lines[faulting].index("LDGSTS")
    assert shown.lines[faulting].endswith("LDGSTS.E.BYPASS.LTC128B.128 [R216+0x4000],")
    assert shown.lines[faulting + 1] == " " * column + "desc[UR16][R20.64]"
    signature = next(n for n, line in enumerate(shown.lines) if line.startswith("signature "))
    assert shown.lines[signature + 1].startswith("  LDGSTS.E.BYPASS.LTC128B.128")
    assert not [line for line in shown.lines[1:] if line.startswith(("desc[", "LDGSTS"))]


@pytest.mark.parametrize("dump", ["tp_ranks.explain/core.1972.nvcudmp",
                                  "triton_oob.explain/core.1110.nvcudmp",
                                  "cluster.explain/core.1154.nvcudmp"])
def test_a_word_stays_with_the_number_it_names(dump):
    """Real dumps whose fault places run long at 80 columns (``SMs 124, 126, 128, 130 warp 6
    lane 0``, ``SM 127 warp 3 lane 0``): a line never ends in ``lane`` with its number on the
    next."""
    path = (H200 / dump).relative_to(ROOT)
    shown = tmux_terminal.run_in_pane(["inspect", path], 80, ROOT)
    _lines_fit(shown.lines[1:], 80)
    split = [(line, below) for line, below in zip(shown.lines[1:], shown.lines[2:], strict=False)
             if re.search(r"[A-Za-z][\s│]*$", line) and re.match(r"[\s│]*\d", below)]
    assert not split, f"a word parted from its number: {split[:3]}"


def test_every_fault_groups_box_is_shown_not_only_the_first():
    """The real cluster dump has two fault groups (an invalid address space on SMs 124-126, an
    illegal address on SM 127): at 80 columns the second has its own box, with its exception,
    place, block and cluster, as the Markdown view's "Fault 2" has; no line says "32/1"."""
    dump = (H200 / "cluster.explain" / "core.1154.nvcudmp").relative_to(ROOT)
    report = json.loads(run_cli("inspect", dump, "--json").stdout)
    second = report["faults"][1]
    shown = tmux_terminal.run_in_pane(["inspect", dump], 80, ROOT)
    _lines_fit(shown.lines[1:], 80)
    box = next(n for n, line in enumerate(shown.lines) if line.startswith("╭─ fault 2 of 2 "))
    text = " ".join(" ".join(line.strip("│ ") for line in shown.lines[box:box + 12]).split())
    assert f"exception {second['exception']['display']}" in text
    assert "where device 0 (NVIDIA H200, sm_90) SM 127 warp 3 lane 0" in text
    assert "block (3,0,0) thread (96,0,0) cluster (1,0,0) of (2,1,1)" in text
    assert not [line for line in shown.lines if "lanes/warps" in line]


def test_the_debugger_backtrace_says_it_stands_past_the_error_pc(real_cuda_gdb, monkeypatch):
    """The real dynamic_shared dump: the warp faulted at +0xc0 (dynamic_shared.cu:7) and stands
    at +0xf0 (line 9). 'source agrees' compares the error PC's line, and cuda-gdb's backtrace
    just under it shows line 9: the heading above the frames says which PC each is at."""
    monkeypatch.setenv("CRASHLAB_CUDA_GDB", real_cuda_gdb)
    dump = (H200 / "dynamic_shared.explain" / "core.1103.nvcudmp").relative_to(ROOT)
    shown = tmux_terminal.run_in_pane(["inspect", dump, "--debugger"], 80, ROOT)
    _lines_fit(shown.lines[1:], 80)
    top = next(n for n, line in enumerate(shown.lines) if line.startswith("    #0 "))
    assert shown.lines[top + 1].endswith("dynamic_shared.cu:9")
    source = next(n for n, line in enumerate(shown.lines) if line.split()[:2] == ["source", "agrees"])
    heading = " ".join(" ".join(shown.lines[source + 1:top]).split())
    assert heading == ("cuda-gdb's backtrace, at the focus's current PC, past the error PC (whose "
                       "line, dynamic_shared.cu:7, is the one 'source' compares):"), heading
