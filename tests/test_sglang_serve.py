"""``crashlab serve`` around a REAL SGLang 0.5.23 server on CPU, crashed three ways through SGLang's
own crash path: a request that raises IndexError in the scheduler, SIGKILL to the scheduler,
SIGSEGV to the detokenizer. One server start per crash kind (tests/real_sglang/fixtures.py).
"""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

import crashlab.replay as replay
from crashlab.report.run import NO_EXCEPTION_LINE
from tests.conftest import run_cli
from tests.real_sglang import server
from tests.real_sglang.fixtures import KINDS, TRAFFIC
from tests.serve_harness import survivors

pytestmark = [pytest.mark.sglang, pytest.mark.xdist_group("sglang")]

#: What each crash's headline must start with.
HEADLINES = {
    "exception": r"Scheduler hit an exception: IndexError: index 5000 is out of bounds for dimension "
                 r"\d+ with size 1000",
    "scheduler-SIGKILL": r"scheduler (?:TP0 )?\(pid \d+\) killed by SIGKILL",
    "detokenizer-SIGSEGV": r"detokenizer \(pid \d+\) killed by SIGSEGV",
}


@pytest.fixture(scope="module", params=list(KINDS))
def run(request, sglang_crash):
    return sglang_crash(request.param)


def test_serve_reports_the_crash_and_exits_0(run):
    assert run.exit_code == 0, run.serve.stderr
    report = run.report
    assert report["status"] == "crash"
    [incident] = report["incidents"]
    assert incident["kind"] == "crash"
    assert run.manifest["outcome"]["result"] == "crash"


def test_the_headline_is_the_exception_or_the_signal(run):
    summary = run.report["incidents"][0]["summary"]
    assert re.match(HEADLINES[run.kind], summary), summary
    assert "Traceback (most recent call last)" not in summary
    assert run.report["summary"] == summary
    if run.kind == "exception":  # SGLang's own end of the tree comes after, as context
        assert summary.endswith("server killed by SIGKILL"), summary


def test_sglangs_processes_are_named_by_role(run):
    processes = run.report["incidents"][0]["processes"]
    roles = {p["role"] for p in processes}
    assert {"server", "scheduler", "detokenizer"} <= roles, processes
    root = next(p for p in processes if p["role"] == "server")
    assert "sglang.launch_server" in root["cmdline"]
    if run.kind != "exception":
        role = run.kind.split("-")[0]
        victim = next(p for p in processes if p["role"] == role)
        assert victim["exit"]["signal_name"] == run.kind.split("-")[1]


def test_the_request_dump_is_collected_and_readable(run):
    path = run.request_dump
    assert path.is_file() and path.stat().st_size > 0
    assert path.is_relative_to(run.serve.incarnation / "requests")
    dump = replay.load(path)
    assert dump.layout.startswith("sglang-0.5.23")
    prompts = [r.text for r in dump.requests]
    assert sum(p is not None and p.startswith(("The quick", "Hello world", "What is", "Count",
                                                "A crash", "SGLang")) for p in prompts) >= TRAFFIC
    in_flight = [r.text for r in dump.in_flight]
    long = "Hello world, this is long"
    assert long in prompts
    # in flight, unless its stream ran to [DONE] before the crash came (a loaded machine)
    assert (long in in_flight) is not run.long_request_finished
    if run.kind == "exception":
        assert "The lazy dog" in in_flight
    listing = run_cli("replay", path, "--list")
    assert listing.returncode == 0, listing.stderr
    assert f"{len(dump.requests)} requests" in listing.stdout.decode()


def test_report_md_tells_the_crash_and_how_to_replay_it(run):
    text = (run.serve.run_dir / "report.md").read_text()
    headline = run.report["incidents"][0]["summary"]
    assert headline in text
    assert f"crashlab replay {run.request_dump}" in text
    if run.kind == "exception":
        assert "IndexError: index 5000" in text and "custom_logit_processor.py" in text


#: An entry of report.md's log findings: its kinds, the lines it names, the line it quotes.
ENTRY = re.compile(r"^- `[^`]*` (?P<kinds>.*?), (?P<stream>stdout|stderr) lines? (?P<first>\d+)"
                   r"(?:-(?P<last>\d+))?[\d, -]*: (?P<fence>`+) ?(?P<quote>.*?) ?(?P=fence)")


def test_report_md_names_the_lines_it_quotes_nests_its_headings_and_has_one_footer(run):
    text = (run.serve.run_dir / "report.md").read_text()
    title = text.splitlines()[0]
    assert title.startswith("### crashlab serve: ") and len(title) <= 4 + 120 + 20  # escapes aside
    levels = [int(t.tag[1]) for t in MarkdownIt("commonmark").enable("table").parse(text)
              if t.type == "heading_open"]
    assert levels[0] == 3 and all(b <= a + 1
                                  for a, b in zip(levels, levels[1:], strict=False)), levels
    assert text.count("<sub>crashlab ") == 1
    entries = [ENTRY.match(line) for line in text.splitlines() if line.startswith("- `")]
    assert entries and all(entries), text
    for entry in entries:
        log = (run.serve.incarnation / f"{entry['stream']}.log").read_bytes().split(b"\n")
        traceback = "traceback" in entry["kinds"] and entry["last"]
        quoted = log[int(entry["last"] if traceback else entry["first"]) - 1].decode()
        if not entry["quote"].startswith(NO_EXCEPTION_LINE):
            assert entry["quote"] in quoted, (entry[0], quoted)


def test_nothing_is_left_running(run):
    assert survivors(run.manifest) == []
    assert all(p["exit"] is not None for p in run.manifest["incarnations"][0]["processes"])


def test_server_info_is_kept_from_a_server_started_with_an_api_key_and_the_key_reaches_no_report(run):
    """SGLang answers /server_info with 401 without the launch's --api-key; its answer carries the
    key among the server arguments, so it must be masked there as everywhere crashlab writes."""
    info = run.serve.incarnation / "server_info.json"
    assert info.exists(), "no server_info.json: /server_info was refused"
    assert '"model_path"' in info.read_text()
    written = [info, run.serve.run_dir / "report.json", run.serve.run_dir / "report.md",
               run.serve.run_dir / "manifest.json", run.serve.incarnation / "launch.json"]
    leaks = [path.name for path in written if server.API_KEY in path.read_text()]
    assert leaks == []
