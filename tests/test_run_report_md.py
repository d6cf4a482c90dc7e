"""serve's report.md from real inputs: the stderr logs of a real SGLang 0.5.23 server crashed three
ways (fixtures/logs, with provenance), the real sample of a rank-prefixed torch traceback, real
crash-dump pickles, synthetic coredumps triaged by the real pipeline; rendered as GitHub does
(CommonMark with tables) and read back: line numbers against the log file, headings, tables,
what is open and what is folded, the title, the log's tail, replay lines, masking.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from crashlab.privacy.redact import MASK, Redactor
from crashlab.report.model import Source, Tool
from crashlab.report.run import NO_EXCEPTION_LINE, ExitStatus, FileRecord, Finding, RunReport
from crashlab.report.run_views import TITLE_CHARS, markdown, summary_lines
from crashlab.supervise import files, incident, manifest
from crashlab.supervise.incident import TAIL_LINE_CHARS
from crashlab.supervise.logscan import StreamScanner
from tests import cyclic_pickles, scenarios

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "fixtures" / "logs"
EXCEPTION_LOG = LOGS / "sglang_0.5.23_scheduler_exception.stderr.log"
SEGV_LOG = LOGS / "sglang_0.5.23_detokenizer_sigsegv.stderr.log"
SIGKILL_LOG = LOGS / "sglang_0.5.23_scheduler_sigkill.stderr.log"
TORCH_SAMPLE = LOGS / "sglang_cuda_graph_capture_traceback.log"
REAL_LOGS = (EXCEPTION_LOG, SEGV_LOG, SIGKILL_LOG, TORCH_SAMPLE)
REAL_DUMP = ROOT / "fixtures" / "sglang_dumps" / "real" / "crash_dump_real_0.5.23.pkl"
GFM = MarkdownIt("commonmark").enable("table")


def scan(data: bytes, stream: str = "stderr") -> list[Finding]:
    found: list[Finding] = []
    scanner = StreamScanner(stream, found.append)
    scanner.feed(data)
    scanner.close()
    return found


def incarnation(findings: list[Finding], **fields) -> manifest.Incarnation:
    return manifest.Incarnation(number=1, directory="incarnation-1", status="crashed",
                                started_at="2026-11-23T20:05:31.968+00:00",
                                ended_at="2026-11-23T20:08:11.748+00:00", health=manifest.Health(url=None),
                                kernel_log="not watched", findings=findings,
                                exit=ExitStatus(signal=9, signal_name="SIGKILL"), **fields)


def report_of(run_dir: Path, findings: list[Finding], dumps=(), request_dumps=(),
              redact=str, **fields) -> RunReport:
    """A RunReport as serve builds it, from the real incident triage."""
    record = incarnation(findings, **fields)
    built = incident.build(run_dir, record, "crash", list(dumps), list(request_dumps),
                           debugger=False, redact=redact)
    return RunReport(tool=Tool(version="t"), status="crash", summary=built.summary,
                     source=Source(path=str(run_dir), size_bytes=1, kind="run"),
                     command=["python", "-m", "sglang.launch_server"], incidents=[built])


def headings(body: str) -> list[int]:
    return [int(token.tag[1]) for token in GFM.parse(body) if token.type == "heading_open"]


def table_widths(body: str) -> list[int]:
    """Columns of each table, as a GFM renderer lays it out."""
    widths, columns = [], None
    for token in GFM.parse(body):
        if token.type == "thead_open":
            columns = 0
        elif token.type == "th_open" and columns is not None:
            columns += 1
        elif token.type == "thead_close":
            widths.append(columns)
            columns = None
    return widths


def entry_lines(body: str) -> list[str]:
    """The first line of each log-finding entry."""
    return [line for line in body.splitlines() if re.match(r"^- `\d\d:\d\d:\d\d\.\d{3}` ", line)]


def fault_dumps(build, run_dir: Path) -> list:
    path = build(scenarios.fault(), "core.rank0.nvcudmp").path
    record = FileRecord(path=path.name, kind="coredump", size_bytes=path.stat().st_size,
                        sha256=files.sha256(path))
    return incident.triage_dumps(run_dir, [record], debugger=True)


# -- findings name the lines they quote -------------------------------------------------------

@pytest.mark.parametrize("log", REAL_LOGS, ids=lambda p: p.name)
def test_every_finding_names_the_line_it_quotes_in_the_log_file(log):
    data = log.read_bytes()
    lines = [line.decode().rstrip("\r") for line in data.split(b"\n")]  # as sed -n Np counts them
    findings = scan(data)
    assert findings
    for finding in findings:
        if finding.kind != "traceback":
            assert lines[finding.line - 1] == finding.text, finding
            continue
        assert "Traceback (most recent call last)" in lines[finding.line - 1] \
            or lines[finding.line - 1].lstrip("[rank0]: ").startswith('File "'), finding
        if not finding.text.startswith(NO_EXCEPTION_LINE):
            assert lines[finding.end_line - 1].endswith(finding.text), finding


def test_a_carriage_return_inside_a_line_does_not_shift_the_numbers():
    """Line 37 of the real log holds a progress bar's two redraws: Python's splitlines counts it
    twice, the log file (and every editor, grep -n and sed) once."""
    data = EXCEPTION_LOG.read_bytes()
    assert data.split(b"\n")[36].count(b"\r") == 2
    assert data.decode().splitlines()[74] != data.decode().split("\n")[74]
    body = markdown(report_of(Path("/runs/r"), scan(data)))
    [traceback] = [line for line in entry_lines(body) if "traceback" in line]
    assert "scheduler-exception, traceback, stderr lines 75-123: `IndexError: index 5000" in traceback
    [crash] = [line for line in entry_lines(body) if "sglang-crash" in line]
    assert "stderr lines 125-127: `SIGQUIT received." in crash


def test_a_raise_statement_a_traceback_quotes_is_not_a_finding():
    raising = 'raise RuntimeError("CUDA error: an illegal memory access was encountered")'
    log = ("Traceback (most recent call last):\n"
           '  File "/env/torch/cuda/__init__.py", line 300, in _lazy_init\n'
           f"    {raising}\n"
           "RuntimeError: CUDA error: an illegal memory access was encountered\n"
           + "a quiet line\n" * 6
           + f"[rank0]:     {raising}\n")  # a source line quoted by itself, past any traceback
    findings = scan(log.encode())
    assert [(f.kind, f.line, f.end_line) for f in findings] == [("traceback", 1, 4),
                                                                ("cuda-error", 4, None)]
    [entry] = entry_lines(markdown(report_of(Path("/runs/r"), findings)))
    assert "traceback, cuda-error, stderr lines 1-4: `RuntimeError: CUDA error: an illegal" in entry


# -- folding ----------------------------------------------------------------------------------

def _ranks_log(ranks: int) -> bytes:
    """The real rank-0 traceback sample, printed by ``ranks`` ranks whose lines interleave, each
    ending in the CUDA error (the sample is an excerpt without its exception line)."""
    sample = [line.split("]:", 1)[1] for line in TORCH_SAMPLE.read_text().splitlines()]
    sample.append(" RuntimeError: CUDA error: an illegal memory access was encountered")
    return "".join(f"[rank{rank}]:{line}\n" for line in sample for rank in range(ranks)).encode()


def test_the_same_traceback_from_seven_ranks_is_one_entry_with_a_count():
    findings = scan(_ranks_log(7))
    assert sum(f.kind == "traceback" for f in findings) == 7
    body = markdown(report_of(Path("/runs/r"), findings))
    [entry] = entry_lines(body)
    assert "traceback, cuda-error \\[rank0\\], stderr lines 1-" in entry
    assert entry.endswith("(same, ×7 (ranks 0-6))")
    frames = [line for line in TORCH_SAMPLE.read_text().splitlines() if 'File "' in line]
    assert body.count('File "') == min(len(frames), 12)  # the frames once, innermost 12
    assert "F.linear(x, layer.weight, bias)" in body


def test_findings_a_few_lines_apart_share_one_block_and_identical_lines_are_folded():
    log = b"".join([b"[2026-11-23 20:08:05] Decode batch, #running-req: 1\n"] * 4
                   + [b"CUDA error: an illegal memory access was encountered\n", b"between\n",
                      b"CUDA error: an illegal memory access was encountered\n", b"after\n"])
    body = markdown(report_of(Path("/runs/r"), scan(log)))
    [entry] = entry_lines(body)
    assert "cuda-error, stderr lines 5, 7: `CUDA error: an illegal memory access" in entry
    block = body.split(entry, 1)[1].split("  ```")[1].splitlines()[1:]
    assert block == ["      [2026-11-23 20:08:05] Decode batch, #running-req: 1",
                     "      ... the line above 3 more times",
                     "  >>> CUDA error: an illegal memory access was encountered",
                     "      between",
                     "  >>> CUDA error: an illegal memory access was encountered",
                     "      after"]


def test_the_first_three_entries_are_open_the_rest_folded_after_the_coredump_triage(build, tmp_path):
    findings = scan(EXCEPTION_LOG.read_bytes()) + scan(SEGV_LOG.read_bytes(), "stdout")
    body = markdown(report_of(tmp_path, findings, fault_dumps(build, tmp_path)))
    entries = entry_lines(body)
    assert len(entries) == 5
    folded = body.index("<details><summary>2 more finding entries</summary>")
    assert [body.index(e) < folded for e in entries] == [True] * 3 + [False] * 2
    assert body.index("**Coredumps**") < body.index("Triage of `core.rank0.nvcudmp`") \
        < body.index("**Log findings**")
    times = [re.match(r"- `([^`]+)`", e)[1] for e in entries]
    assert times == sorted(times)


# -- layout -----------------------------------------------------------------------------------

def test_headings_nest_under_the_title_and_there_is_one_footer(build, tmp_path, monkeypatch):
    monkeypatch.setenv("CRASHLAB_CUDA_GDB", str(tmp_path / "no-cuda-gdb"))  # the debugger's heading too
    body = markdown(report_of(tmp_path, scan(EXCEPTION_LOG.read_bytes()), fault_dumps(build, tmp_path)))
    levels = headings(body)
    assert levels[0] == 3 and 3 not in levels[1:]
    assert all(b <= a + 1 for a, b in zip(levels, levels[1:], strict=False)), levels
    # the fault and the debugger's view are h5 under the incarnation's h4, the dump's title a
    # bold line: GitHub renders h6 small and grey, as text
    assert max(levels) == 5 and levels.count(5) >= 2, levels
    assert re.search(r"^\*\*crashlab: ", body, re.MULTILINE)
    assert body.count("<sub>") == 1 and body.rstrip().splitlines()[-1].startswith("<sub>crashlab t,")


def test_the_run_reports_own_tables_have_two_columns_and_coredumps_are_a_list(build, tmp_path):
    hang = build(scenarios.hang(), "core.rank1.nvcudmp").path
    record = FileRecord(path=hang.name, kind="coredump", size_bytes=hang.stat().st_size,
                        sha256=files.sha256(hang))
    dumps = incident.triage_dumps(tmp_path, [record], debugger=False)
    body = markdown(report_of(tmp_path, scan(SEGV_LOG.read_bytes()), dumps,
                              processes=[_process()]))
    assert table_widths(body) == [2]
    [listed] = [line for line in body.splitlines() if line.startswith("- **COLLATERAL** ")]
    assert "`core.rank1.nvcudmp`" in listed and "no exception in this dump" in listed
    assert "- **scheduler TP0** pid 12 (parent 10): killed by SIGSEGV; `sglang::scheduler_TP0`" in body


def _process():
    from crashlab.report.run import ProcessRecord

    return ProcessRecord(pid=12, ppid=10, role="scheduler", ranks="TP0", started_at="t",
                         cmdline=" sglang::scheduler_TP0" + " " * 100,  # padded, as SGLang's title is
                         exit=ExitStatus(signal=11, signal_name="SIGSEGV"))


def test_the_title_is_one_line_cut_at_a_word_with_the_summary_below_it():
    findings = scan(EXCEPTION_LOG.read_bytes())
    body = markdown(report_of(Path("/runs/r"), findings))
    summary = ("Scheduler hit an exception: IndexError: index 5000 is out of bounds for dimension 0 "
               "with size 1000; server killed by SIGKILL")
    first, _, second, *_ = body.splitlines()
    assert first.startswith("### ") and len(first) - 4 <= TITLE_CHARS
    assert first == "### crashlab serve: Scheduler hit an exception: IndexError: index 5000 is out " \
                    "of bounds for dimension 0 with size 1000…"
    assert second == summary
    short = markdown(report_of(Path("/runs/r"), scan(b"Segmentation fault\n")))
    assert short.splitlines()[:3] == ["### crashlab serve: Segmentation fault; server killed by SIGKILL",
                                      "", "Command: `python -m sglang.launch_server`"]


# -- when no pattern matched: the end of the log ---------------------------------------------

def test_no_pattern_matched_gives_the_end_of_stderr_masked(tmp_path):
    secret = "sk-live-0123456789abcdefghijXXXX"
    logs = tmp_path / "incarnation-1"
    logs.mkdir()
    lines = [f"ordinary line {n}" for n in range(1, 101)]
    lines[89] = "connecting to the store with password=hunter2-do-not-leak"
    lines[94] = "\rLoading  50%\rLoading 100%"
    lines[98] = f"the key was {secret} all along"
    lines[96] = "x" * (TAIL_LINE_CHARS - 8) + f" key {secret} and more"  # the cut falls in it
    (logs / "stderr.log").write_text("\n".join(lines))  # no final newline: still a line
    (logs / "stdout.log").write_text("")
    redact = Redactor.for_launch(["sglang", "--api-key", secret], {}).text
    report = report_of(tmp_path, [], redact=redact)
    tail = report.incidents[0].log_tail
    assert (tail.stream, tail.first_line, len(tail.lines)) == ("stderr", 61, 40)
    assert tail.lines[-1] == "ordinary line 100"
    assert tail.lines[29] == f"connecting to the store with password={MASK}"
    assert tail.lines[34] == "Loading 100%"  # what the terminal showed last
    assert tail.lines[38] == f"the key was {MASK} all along"
    assert tail.lines[36] == lines[96].replace(secret, MASK)[:TAIL_LINE_CHARS] + "…"
    assert "sk-" not in tail.lines[36]
    body = markdown(report)
    assert "**End of stderr** (lines 61-100; no fault pattern matched in the logs)" in body
    assert "```\nordinary line 61\n" in body and secret not in body and "hunter2" not in body


def test_an_empty_stderr_gives_the_end_of_stdout(tmp_path):
    logs = tmp_path / "incarnation-1"
    logs.mkdir()
    (logs / "stderr.log").write_text("")
    (logs / "stdout.log").write_text("starting\nready\n")
    tail = report_of(tmp_path, []).incidents[0].log_tail
    assert (tail.stream, tail.first_line, tail.lines) == ("stdout", 1, ["starting", "ready"])


# -- replay lines -----------------------------------------------------------------------------

def _request_dump(run_dir: Path, name: str, content: bytes) -> FileRecord:
    path = run_dir / "incarnation-1" / "requests" / "vm" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return FileRecord(path=str(path.relative_to(run_dir)), kind="request-dump",
                      size_bytes=len(content), sha256=files.sha256(path))


def test_only_a_request_dump_holding_requests_gets_a_replay_line(tmp_path):
    empty = _request_dump(tmp_path, "crash_dump_empty.pkl", pickle.dumps(
        {"server_args": None, "requests": [], "launch_command": "python -m sglang.launch_server"},
        protocol=4))  # what SGLang's writer makes of no request
    real = _request_dump(tmp_path, "crash_dump_real.pkl", REAL_DUMP.read_bytes())
    broken = _request_dump(tmp_path, "crash_dump_cut.pkl", REAL_DUMP.read_bytes()[:300])
    report = report_of(tmp_path, scan(SIGKILL_LOG.read_bytes()), request_dumps=[empty, real, broken])
    [built] = report.incidents
    assert [r.requests for r in built.request_dumps] == [0, 17, None]
    assert built.replay_commands == [f"crashlab replay {tmp_path / real.path}"]
    assert f"request dump {empty.path} holds no request: nothing to replay" in built.notes
    assert any(n.startswith(f"request dump {broken.path} cannot be replayed: ") for n in built.notes)
    body = markdown(report)
    assert body.count("crashlab replay ") == 1 and "(61 bytes, 0 requests)" not in body
    assert f"`{empty.path}` ({empty.size_bytes} bytes, 0 requests)" in body
    replays = [line for line in summary_lines(report) if "replay" in line]
    assert replays == [f"  replay: crashlab replay {tmp_path / real.path}"]


def test_a_coredump_kept_as_a_request_dump_is_noted_with_the_verb_that_reads_it(tmp_path):
    """The reader refuses it saying what it is (a kind); the run report's note adds the verb, as
    the command line does."""
    core = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
    misplaced = _request_dump(tmp_path, "crash_dump_misnamed.pkl", core.read_bytes())
    report = report_of(tmp_path, scan(SIGKILL_LOG.read_bytes()), request_dumps=[misplaced])
    [note] = [n for n in report.incidents[0].notes if misplaced.path in n]
    assert note.endswith(f"a CUDA coredump, not an SGLang crash dump: use crashlab inspect "
                         f"{tmp_path / misplaced.path}")


def test_a_request_dump_that_holds_itself_is_a_note_and_the_crash_is_still_signed(tmp_path):
    """serve counts a request dump's requests (crashlab.replay.load) while it writes the run's
    report: one whose pickle makes a list contain itself is a note saying so, and the crash
    keeps its triage and its signature, as with any other unreadable dump."""
    looped = _request_dump(tmp_path, "crash_dump_looped.pkl",
                           cyclic_pickles.dump_with(("list", ["stop", ("back", 0)])))
    report = report_of(tmp_path, scan(SIGKILL_LOG.read_bytes()), request_dumps=[looped])
    [built] = report.incidents
    assert [r.requests for r in built.request_dumps] == [None] and not built.replay_commands
    [note] = [n for n in built.notes if looped.path in n]
    assert note.startswith(f"request dump {looped.path} cannot be replayed: ")
    assert "a list that contains itself" in note
    assert built.signature is not None and built.signature.hash


def test_the_kernel_log_watchs_xid_lines_are_decoded_in_the_incident(tmp_path):
    """The real lines an H200's /dev/kmsg gave serve for one fault on two SMs
    (fixtures/gpu/h200-runs/pytest-run1.log): decoded into the incident, and every ESR word the
    same on both SMs, so none of them tells the lines apart."""
    real = (ROOT / "fixtures" / "logs" / "xid" / "kmsg.log").read_text().splitlines()[:3]
    h200 = (ROOT / "fixtures" / "gpu" / "h200-runs" / "pytest-run1.log").read_text()
    second_sm = re.findall(r"NVRM: Xid \(PCI:0000:00:06\): 13, Graphics Exception: ESR [^']*", h200)
    lines = real + second_sm[-1:]
    findings = [Finding(kind="xid", text=text, stream="kmsg", line=number,
                        time="2026-11-23T20:08:00+00:00") for number, text in enumerate(lines, 1)]
    report = report_of(tmp_path, findings)
    log = report.incidents[0].kernel_log
    assert log is not None and [event.kind for event in log.xids] == [
        "sm-exception", "sm-exception", "esr", "esr"]
    assert log.constant_esr_words == ["0x…730=0x40010", "0x…734=0x24", "0x…728=0x1f81fb60",
                                      "0x…72c=0x1174"]
    body = markdown(report)
    assert "Invalid Address Space on GPC 0, TPC 8, SM 0" in body
    assert "the same on every ESR line" in body
