"""Text from outside crashlab in every view: a dump's, a pickle's or a log's strings are printed
as themselves (never Rich markup, never a terminal control sequence, never a traceback), the
one-line summary stays line 1 whole, no line ends in spaces, and a reader that goes away
(`| head -1`) ends the command quietly with its usual exit code."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import cmarkgfm
import pexpect
import pytest
import requests
from cmarkgfm.cmark import Options
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from pydantic import ValidationError
from rich.console import Console

import crashlab
from crashlab import replay
from crashlab.bisect.model import BisectResult, Commit, Run, Step
from crashlab.console import ViewConsole
from crashlab.escape import escape
from crashlab.issue.bisect_section import BisectShown, section
from crashlab.picklesafe.writer import dumps
from crashlab.replay import views as replay_views
from crashlab.replay.result import ReplayResult
from crashlab.report import markdown, terminal
from crashlab.report.markdown_escape import cell, html, inline, join
from crashlab.report.model import Explanation, Root, Source, Tool, Verdict
from crashlab.report.run import (
    DumpTriage,
    ExitStatus,
    Finding,
    Incident,
    ProcessRecord,
    RunReport,
    TracebackFrame,
)
from crashlab.report.run_views import markdown as run_markdown
from crashlab.report.run_views import title as run_title
from tests import coredump_builder, scenarios
from tests.conftest import ROOT, run_cli
from tests.replay_support import FAST_WATCH, FIXTURES, standin

MARKUP = "[/bold] [red]x[/red] [INST] France [/INST] :thumbs_up: [link=file:///etc/passwd]y[/link]"
#: Every bidirectional control: embeddings, overrides and their end (U+202A-202E), isolates
#: (U+2066-2069), the marks (U+200E, U+200F, U+061C); each reorders the text around it on screen.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
#: C0 and C1 controls and DEL: a terminal acts on them (ESC starts a sequence, 0x9b is CSI).
CONTROLS = "\x01\x07\x08\x0b\x0c\x1b\x7f\x85\x9b\x9d"
#: What a terminal or a page would act on: clear the screen, retitle the window, ring, return,
#: C1's CSI, reverse text (every bidirectional control, then the right-to-left override again).
CONTROL = f"\x1b[2J\x1b]0;owned\x07\r\x9b2J{BIDI}\u202e"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
CUDA_GDB = os.environ.get("CRASHLAB_TEST_CUDA_GDB")


def _plain_lines(out: str) -> None:
    """Nothing that does not print reaches the reader, and no line ends in spaces."""
    assert all(char.isprintable() or char == "\n" for char in out), \
        sorted({repr(c) for c in out if not (c.isprintable() or c == "\n")})
    trailing = [line for line in out.splitlines() if line != line.rstrip()]
    assert not trailing, trailing[:3]


def _squeezed(text: str) -> str:
    """``text`` without the spaces, line breaks and box borders that wrapping puts in."""
    return re.sub(r"[\s\u2500-\u257f]+", "", text)


class _HTMLText(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _rendered_text(body: str) -> str:
    """What a reader sees of a Markdown body (CommonMark with GitHub's tables)."""
    parser = _HTMLText()
    parser.feed(MarkdownIt("commonmark").enable("table").render(body))
    return "".join(parser.parts)


# -- the real CLI on a dump that carries markup and control characters -------------------------
@pytest.fixture(scope="module")
def hostile_core(tmp_path_factory):
    scenario = scenarios.fault()
    device = scenario.spec.devices[0]
    device.name = f"NVIDIA {MARKUP} H100{CONTROL}"
    for grid in device.grids:
        grid.function = f"evil_{MARKUP}{CONTROL}"
    for sm in device.sms:
        if sm.exception_string:
            sm.exception_string = f"driver said {MARKUP}{CONTROL}"
    path = tmp_path_factory.mktemp("hostile") / "core.nvcudmp"
    coredump_builder.write(scenario.spec, path)
    summary = json.loads(run_cli("inspect", path, "--json").stdout)["summary"]
    return path, summary


@pytest.mark.parametrize("view", [[], ["--markdown"], ["--debugger"]], ids=["terminal", "markdown", "debugger"])
def test_inspect_prints_the_dumps_text_as_text(hostile_core, view):
    path, summary = hostile_core
    done = run_cli("inspect", path, *view, env={"CRASHLAB_CUDA_GDB": CUDA_GDB or "/nonexistent"})
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    out = done.stdout.decode()
    _plain_lines(out)
    if view == ["--markdown"]:
        assert out.splitlines()[0] == f"### crashlab: {inline(summary)}"
        seen = _squeezed(_rendered_text(out))
    else:
        assert out.splitlines()[0] == escape(summary)
        seen = _squeezed(out)
    for planted in (f"evil_{MARKUP}{CONTROL}", f"NVIDIA {MARKUP} H100{CONTROL}", f"driver said {MARKUP}{CONTROL}"):
        assert _squeezed(escape(planted)) in seen, planted


def test_the_summary_stays_line_one_whole_in_a_narrow_terminal(hostile_core):
    path, summary = hostile_core
    child = pexpect.spawn(sys.executable, ["-m", "crashlab", "inspect", str(path)],
                          cwd=str(ROOT), env={**os.environ, "COLUMNS": "40", "LINES": "24"},
                          dimensions=(24, 40), encoding="utf-8", timeout=60)
    out = child.read()
    child.close()
    assert child.exitstatus == 0, out
    lines = ANSI.sub("", out).replace("\r\n", "\n").split("\n")
    assert lines[0] == escape(summary) and len(lines[0]) > 40
    assert not [line for line in lines if line != line.rstrip()]


def _piped(reader: str, *args) -> subprocess.CompletedProcess:
    """``python -m crashlab ARGS | READER`` in a real shell; the status is crashlab's."""
    return subprocess.run(["bash", "-c", f'set -o pipefail; "$@" | {reader}', "bash",
                           sys.executable, "-m", "crashlab", *map(str, args)],
                          capture_output=True, cwd=ROOT, timeout=120)


#: A real hang (fixtures/gpu/h200/hang.explain): no exception in it, so inspect exits 1.
HANG = "fixtures/gpu/h200/hang.explain/core.1193.nvcudmp"
PIPED_VIEWS = {
    "terminal": ["inspect", "fixtures/synthetic/moe_align_out_of_range.nvcudmp", "--context", "200"],
    "markdown": ["inspect", "fixtures/synthetic/moe_align_out_of_range.nvcudmp", "--markdown"],
    "json": ["inspect", "fixtures/synthetic/moe_align_out_of_range.nvcudmp", "--json"],
    "replay-list": ["replay", FIXTURES / "crash_dump_0.5.12.pkl", "--list"],
    "hang": ["inspect", HANG],
    "hang-markdown": ["inspect", HANG, "--markdown"],
    "hang-json": ["inspect", HANG, "--json"],
}


@pytest.mark.parametrize("view", PIPED_VIEWS)
@pytest.mark.parametrize("reader", ["head -1", "head -30", "true"])
def test_a_reader_that_goes_away_ends_the_view_quietly(view, reader):
    """`| head -1` keeps line 1, `| head -30` thirty lines; `| true` closes the pipe before the
    first write. Whatever the reader takes, the exit code is the command's own, as a plain run
    gives it (docs/command-line.md: 0 a fault found or a dump listed, 1 a hang's dump with no
    exception), and stderr stays empty."""
    whole = run_cli(*PIPED_VIEWS[view])
    assert whole.returncode in (0, 1), whole.stderr
    done = _piped(reader, *PIPED_VIEWS[view])
    assert done.returncode == whole.returncode, (reader, done.stderr)
    assert done.stderr == b""
    lines = 0 if reader == "true" else int(reader.split("-")[1])
    assert done.stdout.splitlines(keepends=True) == whole.stdout.splitlines(keepends=True)[:lines]


def _inst_dump(path, **state):
    source = replay.load(FIXTURES / "crash_dump_0.5.12.pkl")
    record = source.requests[0]._record
    record[0].state.update({"text": "[INST] France [/INST]", **state})
    path.write_bytes(dumps({"server_args": {"model_path": f"meta-llama/{MARKUP}{CONTROL}", "tp_size": 1},
                            "launch_command": f"python -m sglang.launch_server {MARKUP}",
                            "requests": [record]}))
    return path


def test_replay_lists_a_llama_prompt_as_text(tmp_path):
    path = _inst_dump(tmp_path / "inst.pkl", rid=f"r-{MARKUP}{CONTROL}")
    done = run_cli("replay", path, "--list")
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    _plain_lines(out)
    assert "[INST] France [/INST]" in out
    assert escape(f"meta-llama/{MARKUP}{CONTROL}") in out
    assert f"launched as: python -m sglang.launch_server {MARKUP}" in out


def test_replay_result_prints_the_dumps_text_as_text(tmp_path):
    rid = f"r{MARKUP}{CONTROL}"
    path = _inst_dump(tmp_path / "inst.pkl", rid=rid)
    log = tmp_path / "server.log"
    with standin(tmp_path, "--die-on", "France", "--die-how", "log", "--log", str(log),
                 "--diverge-on", "France") as server:
        done = run_cli("replay", path, "--url", server.url, "--watch-log", log, "--any-crash", *FAST_WATCH)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    _plain_lines(out)
    # the problem table's rid column, on one line: the rid's start and end around an ellipsis
    shown = escape(rid)
    assert re.search(re.escape(shown[:12]) + r"[^\n]*…[^\n]*" + re.escape(shown[-4:]), out), out
    first = out.splitlines()[0]  # the verdict first, as inspect's summary
    assert first.startswith("reproduced 1/1") and "crashed" in first


def test_serve_and_dump_now_messages_escape_what_they_name(tmp_path):
    name = "no-such-server-[bold]x[/bold] [INST]\x1b[2J"
    served = run_cli("serve", "--runs-dir", tmp_path / "runs", "--", str(tmp_path / name))
    assert served.returncode in (2, 3) and b"Traceback" not in served.stderr
    assert b"\x1b" not in served.stderr and escape(name).encode() in served.stderr
    dumped = run_cli("dump-now", tmp_path / name)
    assert dumped.returncode == 2 and b"\x1b" not in dumped.stderr
    assert escape(name).encode() in dumped.stderr


def test_the_install_hint_keeps_its_extra(triage_report, monkeypatch):
    """nvdisasm's absence is explained with a command that has brackets in it."""
    from crashlab.report.model import Sass
    from crashlab.sass import listing

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    monkeypatch.setattr(listing.importlib.util, "find_spec", lambda name: None)
    hint = listing.find_nvdisasm()[1]
    assert hint.endswith("pip install 'nvidia-cuda-nvdisasm' (crashlab's [sass] extra)")
    fault = triage_report.faults[0].model_copy(update={"sass": Sass(unavailable_reason=hint)})
    report = triage_report.model_copy(update={"faults": [fault]})
    console = ViewConsole(file=io.StringIO(), width=400)
    terminal.render(report, console)
    assert f"SASS: unavailable: {hint}" in console.file.getvalue()
    assert f"SASS unavailable: {hint}" in _rendered_text(markdown.render(report))


# -- every view, on report objects whose every string is hostile -------------------------------
PIECES = st.one_of(
    st.sampled_from(["[/bold]", "[red]x[/red]", "[INST] France [/INST]", "[link=file:///x]y[/link]",
                     ":thumbs_up:", "**b**", "_i_", "`c`", "``", "<script>", "&amp;", "| a |", "# h",
                     "- l", "1. o", "> q", "$x$", "~~s~~", "\\", "***", "\n", " "]),
    st.text(st.characters(categories=["Cc", "Cf", "Cs", "Zl", "Zp", "Co"]), min_size=1, max_size=4),
    st.text(st.sampled_from(BIDI + CONTROLS), min_size=1, max_size=4),
    st.binary(min_size=1, max_size=6).map(lambda raw: raw.decode("utf-8", "surrogateescape")),
    st.text(max_size=12),
)
HOSTILE = st.one_of(st.lists(PIECES, min_size=1, max_size=6).map("".join),
                    st.tuples(PIECES, st.integers(50, 400)).map(lambda p: p[0] * p[1]))


def _paths(data, at=()):
    if isinstance(data, str):
        yield at
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, at + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, at + (index,))


def _put(data, at, value):
    for key in at[:-1]:
        data = data[key]
    data[at[-1]] = value


def hostile_copy(model, texts: list[str]):
    """``model`` with every string that its type lets be any string replaced by one of ``texts``."""
    data = model.model_dump()
    original = {}
    for number, at in enumerate(list(_paths(data))):
        original[at] = data
        for key in at:
            original[at] = original[at][key]
        _put(data, at, texts[number % len(texts)])
    for _ in range(20):
        try:
            return type(model).model_validate(data)
        except ValidationError as problem:
            for error in problem.errors():
                loc = _in_data(data, tuple(error["loc"]))
                if error["type"] == "union_tag_invalid":  # a discriminator: its own field
                    loc += (error["ctx"]["discriminator"].strip("'"),)
                # a union of models is tried as each: the errors of the others name no string
                # made hostile (a field they lack), and are left alone
                replaced = [p for p in original if loc[:len(p)] == p]
                if replaced:
                    at = max(replaced, key=len)
                    _put(data, at, original[at])
    raise AssertionError("could not make a valid hostile copy")


def _in_data(data, loc: tuple) -> tuple:
    """An error's LOC as a path into DATA: the name of the union member pydantic tried (a model's
    class name after a field that may be one of several models) left out."""
    path, node = [], data
    for key in loc:
        if isinstance(node, dict) and key in node or isinstance(node, list) and isinstance(key, int):
            path.append(key)
            node = node[key]
    return tuple(path)


@pytest.fixture(scope="module")
def triage_report(tmp_path_factory):
    """The device_function scenario's report, with an explanation, a suspect argument and a
    missing-buffer reason of every kind of string, so that the fuzz reaches each of them."""
    path = tmp_path_factory.mktemp("views") / "core.nvcudmp"
    coredump_builder.write(scenarios.device_function().spec, path)
    report = crashlab.inspect(path, debugger=True, debugger_program=CUDA_GDB)
    fault = report.faults[0]
    fault.explanation = Explanation(
        instruction="ST.E desc[UR4][R8.64], R3", pc=fault.pc, access="store", space="global",
        access_bytes=4, address="0x10", address_provenance="recomputed", operand="[R8.64]",
        verdict=Verdict(kind="not-a-pointer", basis="the basis"),
        roots=[Root(kind="param", name="param 0", value="0x10", provenance="parameter buffer",
                    detail="the detail")],
        stops=["the stop"], trust="consistent", formula="address = arg0 + 0x10",
        story=["the story"], compare_with=["the candidate"])
    if fault.params is not None and fault.params.values:
        fault.params.values[0].suspect = "the suspicion"
    fault.params_missing = "the missing buffer"
    return report


@pytest.fixture(scope="module")
def run_report(triage_report):
    finding = Finding(kind="traceback", text="RuntimeError: CUDA error", stream="stderr", line=3,
                      time="t", rank="TP0", before=["a"], after=["b"],
                      frames=[TracebackFrame(file="f.py", line=1, function="g", code="x()")])
    context = finding.model_copy(update={"frames": []})
    dump = DumpTriage(path="cores/core.nvcudmp", label="FAULT", reasons=["first"], written_at="w",
                      size_bytes=1, sha256="0", summary="s", report=triage_report)
    process = ProcessRecord(pid=1, ppid=0, role="scheduler", ranks="TP0", cmdline="python -m x",
                            started_at="s", exit=ExitStatus(signal=9, signal_name="SIGKILL"))
    incident = Incident(incarnation=1, directory="incarnation-1", kind="crash", started_at="a",
                        ended_at="b", exit=ExitStatus(code=1), stopped_by_crashlab=False,
                        summary="boom", dumps=[dump], findings=[finding, context],
                        replay_commands=["crashlab replay x.pkl"], notes=["n"], processes=[process])
    return RunReport(tool=Tool(version="t"), status="crash", summary="boom",
                     source=Source(path="/r", size_bytes=1, kind="run"), command=["python", "-m", "x"],
                     incidents=[incident], warnings=["w"])


@pytest.fixture(scope="module")
def bisect_result():
    """A bisect's verdict with every outside string a report shows: a first bad commit (subject,
    author date, files), a skip and its reason, a crash line, a note."""
    first = Commit(hash="0" * 40, subject="kernel: a wider tile", author_date="2026-11-27T07:00:00",
                   files=["app.py", "kernels/tile.cu"])
    skipped = Commit(hash="1" * 40, subject="scheduler: an assert", author_date="d", files=["a.py"])
    crash = Run(number=1, verdict="different crash", duration_s=1.0, time_to_failure_s=0.5,
                signature="signature 5a38 | RuntimeError: device-side assert triggered")
    skip = Step(revision=skipped, role="bisect", verdict="skip", reproduced=0, runs=[crash],
                reason="another crash (different crash): RuntimeError: device-side assert")
    bad = Step(revision=first, role="bisect", verdict="bad", reproduced=1, runs=[crash],
               reason="the expected crash reproduced in run 1")
    return BisectResult(tool=Tool(version="t"), repo="/r", good="2" * 40, bad="3" * 40, dump="d.pkl",
                        outcome="found", why="the first bad commit", first_bad=first,
                        expected="CUDA error: an illegal memory access", bad_rate=0.5,
                        runs_for_good=5, confidence=0.95, steps=[skip, bad], skips=[skip],
                        log="/r/steps.jsonl", notes=["the checkout stays"], wall_s=1.0)


def _bisect_body(result: BisectResult) -> str:
    return join(section([BisectShown(result, "/out", "bisect/result.json", "bisect/steps.jsonl")]))


@pytest.fixture(scope="module")
def replay_result(tmp_path_factory):
    where = tmp_path_factory.mktemp("replayed")
    with standin(where, "--diverge-on", "The capital") as server:
        done = run_cli("replay", FIXTURES / "crash_dump_0.5.12.pkl", "--url", server.url, "--json",
                       *FAST_WATCH)
    result = ReplayResult.model_validate_json(done.stdout)
    return result.model_copy(update={"warnings": ["w"], "server_log": "server.log"})


def _terminal_views(render) -> list[str]:
    """The view on crashlab's console and on a plain Rich one (markup on): neither may raise."""
    outputs = []
    for console in (ViewConsole(file=io.StringIO(), width=120),
                    Console(file=io.StringIO(), width=120, color_system=None)):
        render(console)
        outputs.append(console.file.getvalue())
    return outputs


def _shows(out: str, *texts: str) -> None:
    for text in texts:
        assert _squeezed(escape(text)) in _squeezed(out), text


VIEW_SETTINGS = settings(max_examples=25, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
@example(texts=[" x "])
def test_triage_views_show_any_text_as_itself(triage_report, texts):
    report = hostile_copy(triage_report, texts)
    explained = _explained_texts(report.faults[0])
    for number, out in enumerate(_terminal_views(lambda console: terminal.render(report, console))):
        # line 1 is the summary whole; trailing spaces are checked on crashlab's own console only
        assert out.splitlines()[0].rstrip() == escape(report.summary).rstrip()
        _shows(out, *(f"warning: {w}" for w in report.warnings), *explained)
        if number == 0:
            _plain_lines(out)
    body = markdown.render(report)
    _plain_lines(body)
    assert body.splitlines()[0] == f"### crashlab: {inline(report.summary)}".rstrip()
    seen = _rendered_text(body)
    _shows(seen, report.summary)
    if "cut here" not in body:
        _shows(seen, *report.warnings, *explained)


def _explained_texts(fault) -> list[str]:
    """The outside strings of a fault's explanation, suspects and missing-buffer reason that the
    views print as they are (instruction text is named by text.instruction: left out)."""
    e = fault.explanation
    return [e.verdict.basis, *e.stops, *e.story, *e.compare_with, *(r.detail for r in e.roots),
            fault.params_missing, *(p.suspect for p in fault.params.values if p.suspect)]


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
def test_run_report_view_shows_any_text_as_itself(run_report, texts):
    report = hostile_copy(run_report, texts)
    body = run_markdown(report)
    _plain_lines(body)
    assert body.splitlines()[0] == f"### crashlab serve: {inline(run_title(report.summary))}".rstrip()
    seen = _rendered_text(body)
    _shows(seen, report.summary)
    if "cut here" not in body:
        _shows(seen, *report.warnings, *report.incidents[0].notes)


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
@example(texts=["kernel: **wider** <img src=x onerror=alert(1)> [t](https://e.example) \x1b[2J"])
def test_bisect_section_shows_any_text_as_itself(bisect_result, texts):
    """crashlab report's Bisect section: subjects, file names, reasons, crash lines and notes
    render as themselves, in list items and table cells alike."""
    result = hostile_copy(bisect_result, texts)
    assert isinstance(result.first_bad, Commit)
    body = _bisect_body(result)
    _plain_lines(body)
    assert "<img" not in _github_html(body)
    seen = _rendered_text(body)
    _shows(seen, result.why, result.expected, result.first_bad.subject, *result.first_bad.files,
           *(step.reason for step in result.steps), *result.notes)


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
def test_replay_result_view_shows_any_text_as_itself(replay_result, texts):
    result = hostile_copy(replay_result, texts)
    for number, out in enumerate(_terminal_views(lambda console: replay_views.render_result(result, console))):
        _shows(out, *(f"warning: {w}" for w in result.warnings))
        if number == 0:
            _plain_lines(out)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rid=HOSTILE, prompt=HOSTILE, model=HOSTILE)
@example(rid="r", prompt="p", model="")
def test_replay_listing_shows_any_text_as_itself(tmp_path_factory, rid, prompt, model):
    path = tmp_path_factory.mktemp("listed") / "dump.pkl"
    source = replay.load(FIXTURES / "crash_dump_0.5.12.pkl")
    record = source.requests[0]._record
    record[0].state.update({"rid": rid, "text": prompt})
    path.write_bytes(dumps({"server_args": {"model_path": model}, "launch_command": model,
                            "requests": [record]}))
    def render(console):
        lister = replay_views.RequestLister(console)
        lister.summary(replay.load(path, on_request=lister.row))

    for number, out in enumerate(_terminal_views(render)):
        if model.strip():  # an empty launch command has no line of its own
            _shows(out, f"launched as: {model}")
        if number == 0:
            _plain_lines(out)


# -- GitHub's own links: mentions, issue references, emoji, autolinks -------------------------------
#: What GitHub makes a mention, an issue reference or an emoji of in a text node of the rendered
#: HTML (a superset of its patterns: any name after ``@``, any digit after ``#`` or ``GH-``, any
#: shortcode of gemoji's grammar: a letter in it, or one of the four without: 100, 1234, +1, -1).
GITHUB_REFERENCE = re.compile(r"@[A-Za-z0-9]|#\d|(?i:gh)-\d|:(?:[0-9A-Za-z_+-]*[A-Za-z][0-9A-Za-z_+-]*|100|1234|[+-]1):")
GITHUBISH = st.lists(st.one_of(
    st.sampled_from(["@", "octocat", "org/team", "#", "12", "owner/repo#7", "GH-", "gh-3", ":", "tada", "+1",
                     "//", "https", "http://", "ftp", "www.", "WWW.", "example.com", "a.b", "mailto:", "xmpp:",
                     "<", ">", "<https://x.y>", "&#64;", "&commat;", "&", ";", "<!-- -->", " ", "    ", "1.",
                     "1)", "580.65", "-", "=", "+", "_", "*", "`", "|", "\\", "[", "]", "(", ")", "!", "~", "$",
                     ".", "w", "ww"]),
    st.text(max_size=3)), max_size=14).map("".join)


def _github_html(body: str) -> str:
    """The HTML GitHub's renderer (cmark-gfm with GitHub's extensions) makes of ``body``, raw
    HTML kept as GitHub keeps it until its sanitizer and its mention/reference/emoji filters."""
    return cmarkgfm.github_flavored_markdown_to_html(body, options=Options.CMARK_OPT_UNSAFE)


class _GitHubText(HTMLParser):
    """The text nodes of the HTML inside ``within`` (GitHub's filters read them one by one; a
    comment ends one), whether each is in a code span or block, and the links."""

    def __init__(self, within: str):
        super().__init__(convert_charrefs=True)
        self.within, self.open, self.nodes, self.links = within, [], [], []

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)
        if tag == "a":
            self.links.append(dict(attrs))

    def handle_endtag(self, tag):
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]

    def handle_data(self, data):
        if self.within in self.open:
            self.nodes.append((data, bool({"code", "pre"} & set(self.open))))


def _github_sees(body: str, within: str) -> tuple[str, list[str], list[dict]]:
    """(the text a reader sees inside ``within``, text nodes GitHub would link something in, links)."""
    parser = _GitHubText(within)
    parser.feed(_github_html(body))
    linked = [text for text, in_code in parser.nodes if not in_code and GITHUB_REFERENCE.search(text)]
    return "".join(text for text, _ in parser.nodes), linked, parser.links


INLINE_PLACES = {  # where views put running text, and the element it renders in
    "paragraph": (lambda m: m, "p"),
    "list item": (lambda m: f"- {m}", "li"),
    "heading": (lambda m: f"### {m}", "h3"),
    "table cell": (lambda m: f"| v |\n|---|\n| {cell(m)} |", "td"),
}


@pytest.mark.parametrize("place", INLINE_PLACES)
@settings(max_examples=150, deadline=None)
@given(text=GITHUBISH)
def test_running_text_links_nothing_on_github_and_reads_as_itself(place, text):
    wrap, element = INLINE_PLACES[place]
    seen, linked, links = _github_sees(join([wrap(inline(text))]), element)
    assert links == [] and linked == []
    assert seen.rstrip() == escape(text).rstrip()  # views keep no trailing spaces (join)


@settings(max_examples=150, deadline=None)
@given(text=GITHUBISH)
def test_html_text_links_nothing_on_github_and_reads_as_itself(text):
    for body, element in ((f"<sub>crashlab {html(text)}</sub>", "sub"),
                          (f"<details><summary>{html(text)}</summary>\n\nx\n</details>", "summary")):
        seen, linked, links = _github_sees(body, element)
        assert links == [] and linked == []
        assert seen == ("crashlab " if element == "sub" else "") + escape(text)


@pytest.mark.parametrize("text", ["@octocat look", "org/team@octocat", "see #12", "owner/repo#12", "GH-12",
                                  ":tada: :+1:", "https://example.com/a?b=c", "<https://example.com>",
                                  "www.example.com", "ops@example.com", "mailto:ops@example.com",
                                  "xmpp:ops@example.com", "ftp://example.com", "&#64;octocat", "\\@octocat"])
def test_what_github_would_link_is_shown_as_written(text):
    for place, (wrap, element) in INLINE_PLACES.items():
        body = wrap(inline(text))
        assert _github_sees(body, element) == (text, [], []), (place, body)
        raw = _github_sees(wrap(text.replace("<", "\\<")), element)
        assert raw[1] or raw[2], f"{text!r} links nothing on GitHub unescaped: the case tests nothing"


@pytest.mark.parametrize("text, markdown_text", [
    ("580.65 MiB", "580.65 MiB"), ("v1.2.3", "v1.2.3"), ("-1", "-1"), ("a-b", "a-b"),
    ("1. first", "1\\. first"), ("2) second", "2\\) second"), ("- item", "\\- item"), ("---", "\\---"),
])
def test_escaping_is_minimal_where_nothing_starts(text, markdown_text):
    assert inline(text) == markdown_text
    assert _github_sees(f"- {inline(text)}", "li")[0] == text


def test_views_link_no_outside_text_on_github(triage_report, run_report, bisect_result):
    planted = ["@octocat", "#4242", "acme/gpu#4243", ":tada:", "https://example.com/x", "www.example.org",
               "ops@example.net"]
    text = " ".join(planted)
    for body in (markdown.render(hostile_copy(triage_report, [text])), run_markdown(hostile_copy(run_report, [text])),
                 _bisect_body(hostile_copy(bisect_result, [text]))):
        parser = _GitHubText("body")
        parser.feed(f"<body>{_github_html(body)}</body>")
        assert parser.links == []
        outside_code = [t for t, in_code in parser.nodes if not in_code]
        assert text in "".join(t for t, _ in parser.nodes)
        for token in ("@octocat", "#4242", "#4243", ":tada:", "https://", "www.example", "@example"):
            assert not [t for t in outside_code if token in t], token


class _Tags(HTMLParser):
    """Every element a page opens, and its text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.text: list[str] = []
        self.hrefs: list[str | None] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        self.tags.add(tag)
        self.hrefs += [value for name, value in attrs if name == "href"]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _text_of(html_page: str) -> list[str]:
    page = _Tags()
    page.feed(html_page)
    return page.text


#: the elements crashlab ui's templates and charts write: anything else came from outside
UI_ELEMENTS = {"html", "head", "meta", "title", "style", "body", "header", "main", "a", "span",
               "h1", "h2", "h3", "p", "table", "tr", "th", "td", "div", "ul", "li", "pre", "strong",
               "br", "wbr", "svg", "rect", "line", "text", "polyline"}
#: a fix's link that would run in the page if it were an href
SCRIPT_LINK = "javascript:alert(document.domain)"
WEB = "<script>alert(1)</script><img src=x onerror=alert(2)> {{ 7*7 }} {% raw %}\"'&amp;"


def test_every_page_of_crashlab_ui_shows_outside_text_as_itself(tmp_path):
    """Hosts, ranks, titles, summaries and an Xid line made of markup, HTML, control characters
    and every bidirectional control, on the home, signature, crash and incident pages of a real
    crashlab ui: shown as text, what does not print escaped as every view shows it."""
    from tests.ui_fleet import UiServer, seed

    hostile = f"{MARKUP} {WEB} {CONTROL}"
    fleet = seed(str(tmp_path / "index.sqlite"), tmp_path, hostile=hostile)
    report_file = fleet.core_in_run.parent.parent / "report.json"  # its triage's every string too
    report = RunReport.model_validate_json(report_file.read_text(encoding="utf-8"))
    dump = report.incidents[0].dumps[0]
    dump.report = hostile_copy(dump.report, [f"{hostile} triage"])
    owner = dump.report.faults[0].owner
    assert owner is not None and owner.fix is not None
    owner.fix.link = SCRIPT_LINK  # a report from elsewhere: its fix's link is not the table's
    report_file.write_text(report.model_dump_json(), encoding="utf-8")
    server = UiServer(fleet.address)
    try:
        pages = {path: requests.get(server.url + path, timeout=120)
                 for path in ("/?since=all", f"/signature/{fleet.main}", f"/crash/{fleet.fault_id}",
                              f"/crash/{fleet.alone_id}", f"/crash/{fleet.fault_id}/incident")}
    finally:
        server.stop()
    shows = {"/?since=all": ["title"], f"/signature/{fleet.main}": ["title", "host0", "host1",
                                                                      "rank", "summary"],
             f"/crash/{fleet.fault_id}": ["title", "host0", "rank", "summary", "triage"],
             f"/crash/{fleet.alone_id}": ["host2"],
             f"/crash/{fleet.fault_id}/incident": ["host0", "rank", "summary", "xid"]}
    for path, response in pages.items():
        assert response.status_code == 200, path
        page = _Tags()
        page.feed(response.text)
        assert page.tags <= UI_ELEMENTS, (path, page.tags - UI_ELEMENTS)
        text = "".join(page.text)
        for tag in shows[path]:  # {{ 7*7 }} too: never rendered; controls shown escaped
            assert escape(f"{hostile} {tag}") in text, (path, tag)
        # no bidirectional control, C0 or C1 control anywhere in the page: what does not print
        # is shown escaped (\u202e), as on the terminal; only the page's own line breaks remain
        unprintable = {char for char in response.text if not (char.isprintable() or char in "\n\t")}
        assert not unprintable, (path, sorted(map(ascii, unprintable)))
        links = [href for href in page.hrefs if href is not None]
        assert all(href.startswith("/") or href.startswith("http") for href in links), (path, links)
    for path in (f"/signature/{fleet.main}", f"/crash/{fleet.fault_id}"):  # the owner's pages
        assert SCRIPT_LINK in "".join(_text_of(pages[path].text)), path  # shown, as text


@pytest.fixture(scope="module")
def ui_pages(tmp_path_factory):
    """The data of each page of crashlab ui over a real fleet (tests/ui_fleet.py): the crash
    page with its triage and replay lines, the signature page, the incident and its timeline."""
    from crashlab.index import Index
    from crashlab.ui import pages
    from tests.ui_fleet import seed

    folder = tmp_path_factory.mktemp("ui-pages")
    fleet = seed(str(folder / "index.sqlite"), folder)
    with Index(fleet.address) as index:
        crash = pages.crash_page(index, fleet.fault_id)
        signature = pages.signature_page(index, fleet.main)
        incident = pages.incident_page(index, fleet.fault_id)
    assert crash.triage is not None and incident is not None
    return crash, signature, incident


def _hostile_pages(pages_data, texts):
    """Each page's data with every string the models let be any string replaced by TEXTS."""
    from dataclasses import replace

    from crashlab.ui import pages

    crash, signature, incident = pages_data
    crash = replace(crash, shown=hostile_copy(crash.shown, texts),
                    triage=hostile_copy(crash.triage, texts), replay=list(texts))
    signature = replace(signature, signature=hostile_copy(signature.signature, texts),
                        facets=hostile_copy(signature.facets, texts),
                        crashes=[hostile_copy(c, texts) for c in signature.crashes],
                        siblings=[hostile_copy(s, texts) for s in signature.siblings],
                        owner=hostile_copy(signature.owner, texts) if signature.owner else None)
    incident = hostile_copy(incident, texts)
    return {"crash.html": {"page": crash}, "signature.html": {"page": signature},
            "incident.html": {"incident": incident, "crash_id": 1,
                              "timeline": pages.timeline(incident)},
            "missing.html": {"message": texts[0]}}


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
@example(texts=[f"block (41,0,0) {BIDI} thread {CONTROLS}"])
def test_ui_pages_show_any_text_as_itself(ui_pages, texts):
    """The web view's templates, each fed page data whose every outside string is hostile: no
    bidirectional control and no C0 or C1 control reaches the page, whatever field holds it
    (the template layer escapes every value it writes), and each text reads as itself, escaped
    as every view escapes it."""
    from crashlab.ui.app import templates

    environment = templates()
    environment.globals.update(version="t", address="i")
    for name, values in _hostile_pages(ui_pages, texts).items():
        page = environment.get_template(name).render(**values)
        unprintable = {char for char in page if not (char.isprintable() or char in "\n\t")}
        assert not unprintable, (name, sorted(map(ascii, unprintable)))
        tags = _Tags()
        tags.feed(page)
        assert tags.tags <= UI_ELEMENTS, (name, tags.tags - UI_ELEMENTS)
        # one text in every field: each page shows it (a page keeps line breaks and tabs)
        if len(texts) == 1 and "\n" not in texts[0] and "\t" not in texts[0]:
            assert _squeezed(escape(texts[0])) in _squeezed("".join(tags.text)), name


# -- crashlab show SIGNATURE: the facets of a fleet's crashes ---------------------------------------
@pytest.fixture(scope="module")
def signature_shown():
    """A signature's view with a facet of each kind (constant, varying, with unknowns and
    others) and a reading, for hostile_copy to fill with any text."""
    from crashlab.index.records import Facet, Facets, FacetValue, Reading, Shown, Signature

    facets = Facets(crashes=5, fields=[
        Facet(name="kernel", constant=True, known=5, values=[FacetValue(value="k", count=5)]),
        Facet(name="host", constant=False, known=4, others=1,
              values=[FacetValue(value="h1", count=2), FacetValue(value="h2", count=1),
                      FacetValue(value=None, count=1)])],
        readings=[Reading(kind="not-one-device", text="t", evidence=["e1", "e2"])])
    signature = Signature(hash="a1b2c3d4e5f6", version=1, kind="gpu-fault", title="t", search="s",
                          first_seen="2026-01-01T00:00:00+00:00",
                          last_seen="2026-01-01T00:00:00+00:00", count=5, body={})
    return Shown(tool=Tool(version="t"), index="i", kind="signature", signature=signature,
                 facets=facets)


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
def test_signature_facets_show_any_text_as_itself(signature_shown, texts):
    from crashlab.index import markdown as index_markdown
    from crashlab.index import views as index_views

    view = hostile_copy(signature_shown, texts)
    facets = view.facets
    values = [v.value for f in facets.fields for v in f.values if v.value is not None]
    said = [r.text for r in facets.readings] + [e for r in facets.readings for e in r.evidence]
    for number, out in enumerate(_terminal_views(lambda console: index_views.shown(view, console))):
        _shows(out, *values, *said, *(f.name for f in facets.fields))
        if number == 0:
            _plain_lines(out)
    body = index_markdown.shown(view)
    _plain_lines(body)
    seen = _rendered_text(body)
    _shows(seen, view.signature.title, *values, *said, *(f.name for f in facets.fields))


# -- the other verbs' views: doctor, env, bisect, show and list --incidents ------------------------
@pytest.fixture(scope="module")
def doctor_report():
    from crashlab.env.doctor import CheckResult, DoctorReport

    return DoctorReport(tool=Tool(version="t"), python="/opt/venv/bin/python", checks=[
        CheckResult(id="cuda-home", concern="toolchain", status="finding", message="the message",
                    fix="the fix"),
        CheckResult(id="ptrace", concern="capture", status="ok", message="all good")])


@pytest.fixture(scope="module")
def environment_captured():
    from crashlab.env.capture import capture

    return capture(timeout=2.0)


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
@example(texts=[f"/usr/local/{BIDI}cuda{CONTROLS}/bin"])
def test_doctor_and_env_views_show_any_text_as_itself(doctor_report, environment_captured, texts):
    """crashlab doctor's messages and fixes, crashlab env's every value (terminal and Markdown):
    names and paths read from a machine, shown as themselves, what does not print escaped."""
    from crashlab.env import doctor_view
    from crashlab.env import views as env_views

    report = hostile_copy(doctor_report, texts)
    for check, original in zip(report.checks, doctor_report.checks, strict=True):
        check.id = original.id  # crashlab's own names, not the machine's
    said = [text for check in report.checks for text in (check.message, check.fix) if text]
    for number, out in enumerate(_terminal_views(lambda console: doctor_view.render(report, console))):
        _shows(out, *said)
        if number == 0:
            _plain_lines(out)
    environment = hostile_copy(environment_captured, texts)
    for number, out in enumerate(_terminal_views(lambda console: env_views.render(environment, console))):
        if number == 0:
            _plain_lines(out)
    body = env_views.markdown(environment)
    _plain_lines(body)


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
@example(texts=[f"kernel: a wider tile {BIDI} {CONTROLS}"])
def test_bisect_terminal_view_shows_any_text_as_itself(bisect_result, texts):
    """crashlab bisect's step lines and verdict: subjects, file names, reasons and notes."""
    from crashlab.bisect import view as bisect_view

    result = hostile_copy(bisect_result, texts)
    assert isinstance(result.first_bad, Commit)

    def render(console):
        for step in result.steps:
            bisect_view.step_line(step, console)
        bisect_view.verdict(result, console)

    for number, out in enumerate(_terminal_views(render)):
        _shows(out, result.expected, result.first_bad.subject, *result.first_bad.files,
               *(step.reason for step in result.steps), *result.notes)
        if number == 0:
            _plain_lines(out)


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
@example(texts=[f"node7 {BIDI} {CONTROLS}"])
def test_show_and_incident_views_show_any_text_as_itself(ui_pages, texts):
    """crashlab show CRASH (its facts, incident and files) and list --incidents, over a real
    fleet's records: hosts, ranks, summaries, paths and Xid lines."""
    from crashlab.index import views as index_views

    crash_page, _, incident = ui_pages
    shown = hostile_copy(crash_page.shown, texts)
    assert shown.crash is not None and crash_page.shown.report is not None
    # the run's report, as show reads it (a RunReport: its own strings hostile too)
    assert isinstance(crash_page.shown.report, RunReport)
    shown.report = hostile_copy(crash_page.shown.report, texts)
    incident = hostile_copy(incident, texts)
    for number, out in enumerate(_terminal_views(lambda console: index_views.shown(shown, console))):
        _shows(out, *(value for value in (shown.crash.host, shown.crash.summary) if value))
        if number == 0:
            _plain_lines(out)
    for number, out in enumerate(_terminal_views(lambda console: index_views.incident_list([incident], console))):
        _shows(out, *(xid.text for xid in incident.xids))
        if number == 0:
            _plain_lines(out)


@pytest.fixture(scope="module")
def report_facts(triage_report, run_report, bisect_result, signature_shown, environment_captured):
    """Everything crashlab report's body tells: a run, a coredump given directly, the primary
    triage, the environment, a request dump to replay, a member left out, a bisect, the fleet."""
    from crashlab.issue import body
    from crashlab.issue.environment import ReportEnvironment
    from crashlab.issue.model import IssueReport, LeftOut, RequestDumpSummary

    issue = IssueReport(
        tool=Tool(version="t"), title="the title", inputs=["run-1"], found=True, anonymized=False,
        body="body.md", body_chars=0, bundle="bundle.tar.gz", max_bytes=25_000_000,
        compression="gzip", members=[], environment_origin="the origin",
        left_out=[LeftOut(path="cores/big.nvcudmp", kind="coredump", size_bytes=1, reason="too big")],
        request_dumps=[RequestDumpSummary(path="requests/d.pkl", member="requests/d.pkl", requests=2,
                                          in_flight=1, layout="sglang-0.5.23 crash dump",
                                          replay="crashlab replay requests/d.pkl")])
    return body.Facts(title="the title", launch=["python", "-m", "sglang.launch_server"],
                      runs=[run_report], cores=[("core.nvcudmp", triage_report)],
                      primary=triage_report,
                      environment=ReportEnvironment(environment_captured, "the origin"),
                      issue=issue, notes=["a note"], fleet=signature_shown.facets,
                      bisects=[BisectShown(bisect_result, "/out", "bisect/result.json",
                                           "bisect/steps.jsonl")])


@VIEW_SETTINGS
@given(texts=st.lists(HOSTILE, min_size=1, max_size=5))
@example(texts=[f"block (41,0,0) {BIDI} thread {CONTROLS}"])
def test_report_body_shows_any_text_as_itself(report_facts, texts):
    """crashlab report's body, every outside text of every part hostile (the run, the triage,
    the environment, the replay line, what was left out, the bisect, the fleet): nothing that
    does not print reaches the body, and its title and notes read as themselves."""
    from dataclasses import replace

    from crashlab.issue import body
    from crashlab.issue.environment import ReportEnvironment

    facts = report_facts
    environment = hostile_copy(facts.environment.environment, texts)
    hostile = replace(
        facts, title=texts[0], launch=list(texts), runs=[hostile_copy(r, texts) for r in facts.runs],
        cores=[(texts[0], hostile_copy(report, texts)) for _, report in facts.cores],
        primary=hostile_copy(facts.primary, texts), notes=list(texts),
        environment=ReportEnvironment(environment, texts[0]), issue=hostile_copy(facts.issue, texts),
        fleet=hostile_copy(facts.fleet, texts),
        bisects=[replace(b, result=hostile_copy(b.result, texts)) for b in facts.bisects])
    text, _ = body.render(hostile)
    _plain_lines(text)
    seen = _rendered_text(text)
    _shows(seen, hostile.title)
    if "cut here" not in text:
        _shows(seen, *hostile.notes)
