"""The command line as a whole: usage errors, help, start-up imports and the hints between verbs,
each through the real ``crashlab`` command in its own process."""

from __future__ import annotations

import gzip
import json
import shlex
import sys

import click
import pytest

from crashlab.cli import main
from crashlab.cli.schema import SCHEMAS
from crashlab.replay.result import DumpListing
from crashlab.report.schema import JSON_SCHEMA_DIALECT
from tests.conftest import ROOT, imported_modules, run_cli

CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
DUMP = ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.23.pkl"
#: What --help must not import: the report models, the ELF reader, the renderer, the debugger
#: driver, the HTTP client, the process watcher.
HEAVY = ("pydantic", "elftools", "rich", "pexpect", "requests", "psutil", "crashlab.coredump",
         "crashlab.report", "crashlab.replay", "crashlab.supervise", "crashlab.gdb")


def _one_line(done, code: int, *fragments: str) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crashlab: "), lines
    assert all(fragment in lines[0] for fragment in fragments), lines
    return lines[0]


def _options(command: click.Command, path: str = "crashlab"):
    for param in command.params:
        if isinstance(param, click.Option):
            yield f"{path} {param.opts[0]}", param
    for name, sub in getattr(command, "commands", {}).items():
        yield from _options(sub, f"{path} {name}")


def test_every_option_of_every_verb_has_help_text():
    options = list(_options(main))
    assert len(options) > 40  # the walk reached the verbs' options, not only the group's
    assert [where for where, option in options if not (option.help or "").strip()] == []


@pytest.mark.parametrize("args", [["--help"], ["inspect", "--help"], ["replay", "--help"],
                                  ["serve", "--help"], ["schema", "--help"],
                                  ["doctor", "--help"], ["list", "--help"], ["show", "--help"],
                                  ["gc", "--help"], []])
def test_help_does_not_import_the_inspect_stack(args):
    imported = imported_modules(*args)
    assert "crashlab.cli" in imported and "click" in imported
    assert sorted(m for m in imported if m.split(".")[0] in HEAVY or m.startswith(HEAVY)) == []


def test_the_import_probe_sees_the_stack_when_a_verb_runs():
    imported = imported_modules("inspect", str(CORE), "--no-sass", "--json")
    assert {"pydantic", "click", "crashlab.coredump.core", "crashlab.report.model"} <= imported


@pytest.mark.parametrize("view", ["--json", "--list"])
def test_a_dumps_listing_imports_neither_http_nor_the_report_models(view):
    """A listing replays nothing: requests (and the ssl it loads), process watching, the
    TriageReport models and their views stay out of its process, about 16 MB of a large dump's
    peak (benchmarks/bench_load.py). Replaying imports them."""
    dump = str(ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.12.pkl")
    imported = imported_modules("replay", dump, view)
    assert "crashlab.replay.loader" in imported
    unwanted = {"requests", "urllib3", "ssl", "psutil", "crashlab.replay.runner",
                "crashlab.replay.oracle", "crashlab.report.model", "crashlab.report.terminal",
                "rich.progress"}
    assert sorted(imported & unwanted) == []
    replaying = imported_modules("replay", dump, "--url", "http://127.0.0.1:9", "--timeout", "1",
                          "--health-timeout", "1")
    assert {"requests", "crashlab.replay.runner", "crashlab.replay.oracle"} <= replaying


@pytest.mark.parametrize("args, fragment", [
    (["frobnicate"], "No such command 'frobnicate'"),
    (["--bogus"], "No such option '--bogus'"),
    (["--bogus", "inspect", str(CORE)], "No such option '--bogus'"),
])
def test_top_level_usage_errors_are_one_line_and_exit_2(args, fragment):
    line = _one_line(run_cli(*args), 2, fragment)
    assert "Usage:" not in line


def test_no_command_prints_the_help_on_stdout_and_exits_2():
    done = run_cli()
    assert done.returncode == 2 and done.stderr == b""
    out = done.stdout.decode()
    assert "Commands:" in out and "inspect" in out and "exits 2" in out


def test_a_mistyped_serve_option_is_refused_with_a_suggestion(tmp_path):
    runs = tmp_path / "runs"
    for args in (["--user-dump", "--", "true"], ["--quiet", "--user-dump", "true"]):
        _one_line(run_cli("serve", "--runs-dir", runs, *args), 2,
                  "serve: No such option '--user-dump'", "'--user-dumps'?")
    _one_line(run_cli("serve", "--runs-dir", runs, "--restrat", "on-crash", "--", "true"), 2,
              "No such option '--restrat'", "'--restart'")
    assert not runs.exists()  # nothing was run


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A real serve run whose command carries options serve also has (they are the command's)."""
    runs = tmp_path_factory.mktemp("served") / "runs"
    script = "import sys; print(' '.join(sys.argv[1:]))"
    with_dashes = run_cli("serve", "--quiet", "--runs-dir", runs, "--", sys.executable, "-c",
                          script, "--user-dump", "--quiet", "--runs-dir", "elsewhere")
    bare = run_cli("serve", "--quiet", "--runs-dir", runs, sys.executable, "-c", script,
                   "--grace", "oops", "--", "--user-dump")
    return runs, with_dashes, bare


def test_everything_after_the_command_word_or_dashes_is_passed_through(served):
    runs, with_dashes, bare = served
    assert with_dashes.returncode == 1 and bare.returncode == 1, (with_dashes.stderr, bare.stderr)
    logs = sorted((run / "incarnation-1" / "stdout.log").read_text() for run in runs.iterdir())
    assert logs == sorted(["--user-dump --quiet --runs-dir elsewhere\n",
                           "--grace oops -- --user-dump\n"])


def test_inspect_given_a_run_directory_names_its_report(served):
    runs, _, _ = served
    run = next(runs.iterdir())
    _one_line(run_cli("inspect", run), 2, "crashlab serve run directory", str(run / "report.md"),
              "crashlab inspect")
    _one_line(run_cli("inspect", runs), 2, "is a directory, not a coredump file")


def test_inspect_or_debug_given_a_crash_dump_names_replay():
    _one_line(run_cli("inspect", DUMP), 2, "an SGLang crash dump", f"use crashlab replay {DUMP}")
    _one_line(run_cli("debug", DUMP, "--print"), 2, f"use crashlab replay {DUMP}")


def test_replay_given_a_coredump_names_inspect(tmp_path):
    packed = tmp_path / "core.nvcudmp.gz"
    packed.write_bytes(gzip.compress(CORE.read_bytes()))
    for core in (CORE, packed):
        for extra in ([], ["--json"], ["--url", "http://127.0.0.1:9"]):
            _one_line(run_cli("replay", core, *extra), 2, "a CUDA coredump",
                      f"use crashlab inspect {core}")
    other_gzip = tmp_path / "notes.gz"
    other_gzip.write_bytes(gzip.compress(b"\x7fELF not a core"))
    _one_line(run_cli("replay", other_gzip), 2, "gzip-compressed; gunzip it first")


def test_replay_list_json_is_the_versioned_listing():
    listed = run_cli("replay", DUMP, "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["schema_version"] == 1 and data["tool"]["name"] == "crashlab"
    assert listed.stdout == run_cli("replay", DUMP, "--json").stdout  # --list is the default
    listing = DumpListing.model_validate(data)  # the printed JSON is what the schema describes
    assert len(listing.requests) == len(data["requests"]) > 0
    assert any(request.input_ids_count for request in listing.requests)
    _one_line(run_cli("replay", DUMP, "--list", "--url", "http://127.0.0.1:9"), 2, "--list")


@pytest.mark.parametrize("which", sorted(SCHEMAS))
def test_every_schema_names_its_dialect_and_itself(which):
    done = run_cli("schema", which)
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    assert schema["$schema"] == JSON_SCHEMA_DIALECT
    assert schema["$id"] == f"urn:crashlab:schema:{which}:v1"
    assert "schema_version" in schema["properties"]
    # a signature is embedded in reports, which name their tool; it carries its rules' version
    assert ("version" if which == "signature" else "tool") in schema["properties"]


def test_the_listing_schema_describes_the_cut_requests():
    schema = json.loads(run_cli("schema", "listing").stdout)
    request = schema["$defs"]["ListedRequest"]["properties"]
    assert "input_ids_count" in request and "output_ids_count" in schema["$defs"]["ListedOutput"][
        "properties"]


def test_debug_print_works_without_cuda_gdb(no_cuda_gdb):
    done = run_cli("debug", CORE, "--print", **no_cuda_gdb)
    assert done.returncode == 0, done.stderr
    argv = shlex.split(done.stdout.decode())
    assert argv[:4] == ["cuda-gdb", "-q", "-ex", f"target cudacore {CORE}"]
    assert argv[5].startswith("cuda device ")
    _one_line(done, 0, "cuda-gdb not found", "printed with 'cuda-gdb'")


def test_debug_checks_the_core_before_the_tool(tmp_path, no_cuda_gdb):
    not_a_core = tmp_path / "notes.txt"
    not_a_core.write_text("hello\n")
    for args in ([tmp_path / "missing.nvcudmp"], [not_a_core], [CORE, "--host-core", not_a_core]):
        _one_line(run_cli("debug", *args, **no_cuda_gdb), 2)
        _one_line(run_cli("debug", *args, "--print", **no_cuda_gdb), 2)
    _one_line(run_cli("debug", CORE, **no_cuda_gdb), 3, "cuda-gdb not found")


def _verbs_help_texts() -> dict[str, str]:
    texts = {"crashlab": run_cli("--help").stdout.decode()}
    texts.update({verb: run_cli(verb, "--help").stdout.decode() for verb in main.commands})
    return texts


def _cut(line: str) -> bool:
    """click's cut: "...", right after a word; not the usage's ``[ARGS]...`` nor an example's
    `` ...`` standing for arguments."""
    line = line.strip()
    return line.endswith("...") and not line.startswith("Usage:") and not line.endswith(" ...")


def test_no_help_text_is_cut_short():
    """click ends a verb's line in crashlab --help with "..." past 45 characters: every line is
    whole, and so is every verb's own help."""
    texts = _verbs_help_texts()
    cut = {where: [line for line in text.splitlines() if _cut(line)] for where, text in texts.items()}
    assert {where: lines for where, lines in cut.items() if lines} == {}
    listed = " ".join(texts["crashlab"].split("Commands:", 1)[1].split())
    assert all(f" {verb} " in f" {listed}" for verb in main.commands)
    # a first sentence past 45 characters, there whole
    assert "Run a server under watch; when it crashes, keep every artifact and triage it." in listed


def test_schema_help_names_every_schema_it_accepts():
    text = " ".join(run_cli("schema", "--help").stdout.decode().split("WHICH is", 1)[1].split())
    assert [key for key in SCHEMAS if f" {key} (" not in text] == []


@pytest.mark.parametrize("option", ["--out", "-o", "--output"])
def test_report_writes_where_out_or_its_aliases_say(tmp_path, option):
    """report and replay name the place they write --out (-o); --output, replay's former name,
    works on both, unlisted."""
    folder = tmp_path / "issue"
    done = run_cli("report", CORE, option, folder, "--db", tmp_path / "index.sqlite")
    assert done.returncode == 0, done.stderr
    assert sorted(path.suffix for path in folder.iterdir()) == [".gz", ".md"]
    shown = run_cli("report", "--help").stdout + run_cli("replay", "--help").stdout
    assert b"--output" not in shown and b"-o, --out" in shown
