"""The ``crashlab`` command: click's declarations of the verbs, each calling the API and a view.
No triage logic lives here.

Every verb runs inside one guard (crashlab.guard): bad input is one line on stderr and exit 2
(usage errors included), a missing tool or service exit 3, never a traceback.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import click

from .version import __version__
from .errors import EXIT_BAD_INPUT, EXIT_FOUND, EXIT_NOTHING, BadInput, EnvironmentProblem
from .guard import GuardedGroup, fail, say
from .incidents.window import DEFAULT_WINDOW as DEFAULT_INCIDENT_WINDOW

# The modules behind each command (rich included) are imported inside it: --help should not pay
# for pydantic, pyelftools and rich, inspect for pexpect, requests and the supervisor, nor replay
# for the coredump reader and its report (tests/test_cli.py holds --help to it).

#: crashlab.supervise.CoredumpMode's values, spelled out so that --help need not import it.
COREDUMP_MODES = ("lightweight", "full", "off")
_POSITIVE = click.FloatRange(min=0, min_open=True)


def _db_option(command):
    """--db: where the crash index is (crashlab.index.location), the same on every verb."""
    return click.option(
        "--db", metavar="FILE|URL",
        help="The crash index: a SQLite file, or postgresql://user@host/db for a fleet "
             "[default: env CRASHLAB_DB, else crashlab/index.sqlite in "
             "${XDG_DATA_HOME:-~/.local/share}, or an older crashlab's index beside the runs "
             "directory while it is there].")(command)


def _incident_window_option(command):
    """--incident-window: serve records it; list --incidents and show group with it."""
    return click.option(
        "--incident-window", type=click.FloatRange(min=0), default=DEFAULT_INCIDENT_WINDOW,
        show_default=True, metavar="SECONDS",
        help="Crashes of a deployment's servers (or, without --deployment, of one host) "
             "within this many seconds of an incident's first failure join it.")(command)


def _runs_dir_option(command):
    return click.option("--runs-dir", type=click.Path(path_type=Path),
                        default=Path("crashlab-runs"), show_default=True,
                        help="The runs directory; an index an older crashlab made beside "
                             "it (crashlab-index.sqlite) is used while it is there.")(command)


@click.group(cls=GuardedGroup, invoke_without_command=True, no_args_is_help=False,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crashlab", help="Print crashlab's version.")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Crash forensics for GPU LLM serving: read CUDA coredumps without a GPU, replay SGLang
    crash dumps, supervise a server and triage its crash.

    Exit codes: 0 found what was looked for (a fault, a reproduction, a crash caught), 1 found
    nothing, 2 bad input or usage, 3 a missing tool or service. crashlab with no command prints
    this help on standard output and exits 2: a command line without a verb is incomplete.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(EXIT_BAD_INPUT)


@main.command(subject="core")
@click.argument("core", type=click.Path(dir_okay=True, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema: crashlab schema).")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print a GitHub issue body (at most 65,536 characters).")
@click.option("--no-sass", is_flag=True, help="Skip disassembly (nvdisasm is not run).")
@click.option("--no-explain", is_flag=True,
              help="Skip the explanation of each fault (its address, bound and roots).")
@click.option("--context", type=click.IntRange(0, 200), default=8, show_default=True,
              help="SASS instructions shown on each side of the faulting one.")
@click.option("--debugger", is_flag=True,
              help="Add cuda-gdb's view of each fault and whether it agrees with crashlab's. "
                   "Without cuda-gdb the report is the same, its debugger section says why it is "
                   "empty, and the exit code does not change.")
@click.option("--record", is_flag=True,
              help="Also record the crash in the crash index (see crashlab list), by reference: "
                   "the dump stays yours, and crashlab gc never deletes it (past the retention "
                   "the index forgets it).")
@click.option("--copy", is_flag=True,
              help="With --record: the index keeps a copy of the dump in its own folder "
                   "(crashlab-copies beside the index file); gc may delete that copy, never "
                   "the original.")
@_db_option
def inspect(core: str, as_json: bool, as_markdown: bool, no_sass: bool, no_explain: bool,
            context: int, debugger: bool, record: bool, copy: bool, db: str | None) -> None:
    """Explain a CUDA GPU coredump: faulting kernel, exception, block, thread, PC, SASS, source.

    CORE is a .nvcudmp file, gzip-compressed or not, or - for standard input. No GPU and no
    cuda-gdb are needed; SASS needs nvdisasm (pip install nvidia-cuda-nvdisasm).

    \b
    Examples:
      crashlab inspect core_1754_node_12345.nvcudmp
      crashlab inspect core.nvcudmp.gz --markdown > issue.md
      crashlab inspect core.nvcudmp --json | jq '.faults[0].kernel'
      crashlab inspect core.nvcudmp --debugger
      crashlab inspect core.nvcudmp --record --db postgresql://crashlab@db.internal/crashes
      crashlab inspect /scratch/core.nvcudmp --record --copy
    """
    from .api import inspect as inspect_core
    from .console import ViewConsole
    from .report import markdown, terminal

    if as_json and as_markdown:
        raise BadInput("choose one of --json and --markdown")
    for given, name in ((db, "--db"), (copy, "--copy")):
        if given and not record:
            raise BadInput(f"{name} is for --record: add --record to record the crash")
    report = inspect_core(core, sass=not no_sass, context=context, debugger=debugger,
                          explain=not no_explain)
    if report.debugger is not None and report.debugger.status in ("unavailable", "failed"):
        say(f"--debugger: {report.debugger.reason}; the native report stands")
    if record:
        _record_core(core, report, db, copy)
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    elif as_markdown:
        click.echo(markdown.render(report), nl=False)
    else:
        terminal.render(report, ViewConsole())
    sys.exit(EXIT_FOUND if report.found else EXIT_NOTHING)


def _record_core(core: str, report, db: str | None, copy: bool) -> None:
    """Record the dump by reference, or (COPY) the copy the index takes of it; a copy taken for
    a crash recorded before (or not recorded at all) is not left behind."""
    from .index import capture, copies
    from .index.location import resolve
    from .index.recording import record_all

    if core == "-":
        say("warning: --record: a dump read from standard input is not recorded (no file to keep)")
        return
    address = resolve(db, Path("crashlab-runs"), say)
    kept, made = copies.take(Path(core), address) if copy else (None, False)
    new = record_all(lambda: [capture.from_coredump(Path(core), report, "inspect", kept)],
                     address, Path("crashlab-runs"), say, announce=say)
    if made and not new:
        copies.drop(kept)
        say("--copy: no copy kept (the crash was recorded before, or not at all)")


#: crashlab schema WHICH -> the model of that JSON, imported only when asked for.
SCHEMAS = {"triage": "crashlab.report.model:TriageReport", "run": "crashlab.report.run:RunReport",
           "replay": "crashlab.replay.result:ReplayResult",
           "listing": "crashlab.replay.result:DumpListing",
           "environment": "crashlab.env.model:Environment",
           "doctor": "crashlab.env.doctor:DoctorReport",
           "report-bundle": "crashlab.issue.model:IssueReport",
           "signature": "crashlab.report.signature:CrashSignature",
           "crash-list": "crashlab.index.records:CrashList",
           "crash-show": "crashlab.index.records:Shown",
           "crash-gc": "crashlab.index.records:Collection",
           "incident-list": "crashlab.index.records:IncidentList"}


#: What each schema describes, for schema --help; a key of SCHEMAS without one is still listed.
SCHEMA_ABOUT = {"triage": "what inspect --json prints; the default", "run": "serve's report.json",
                "replay": "what replay --json prints with --url",
                "listing": "what replay --json prints without --url: the dump's requests",
                "environment": "what env --json prints; serve's environment.json",
                "doctor": "what doctor --json prints",
                "report-bundle": "what report --json prints; report.json in its bundle",
                "signature": "the crash signature the reports carry and the crash index keeps",
                "crash-list": "what list --json prints", "crash-show": "what show --json prints",
                "crash-gc": "what gc --json prints",
                "incident-list": "what list --incidents --json prints"}


def _schema_help() -> str:
    """schema's help, its WHICH made from SCHEMAS so that a schema added there is listed."""
    which = "; ".join(f"{key} ({SCHEMA_ABOUT[key]})" if key in SCHEMA_ABOUT else key
                      for key in SCHEMAS)
    return f"Print the JSON Schema of a report.\n\nWHICH is one of: {which}."


@main.command(help=_schema_help())
@click.argument("which", type=click.Choice(list(SCHEMAS)), default="triage")
def schema(which: str) -> None:
    from .report.schema import json_schema

    module, name = SCHEMAS[which].split(":")
    click.echo(json.dumps(json_schema(getattr(importlib.import_module(module), name), which),
                          indent=2))


@main.command(subject="core")
@click.argument("core", type=click.Path(dir_okay=False))
@click.option("--host-core", type=click.Path(dir_okay=False), help="The host (CPU) core of the same crash.")
@click.option("--exe", type=click.Path(dir_okay=False), help="The executable that crashed (needed with --host-core).")
@click.option("--print", "print_only", is_flag=True,
              help="Print the debugger command line instead of running it (also without cuda-gdb).")
def debug(core: str, host_core: str | None, exe: str | None, print_only: bool) -> None:
    """Open cuda-gdb on a CUDA coredump, its focus already on the first fault.

    Like coredumpctl debug: the terminal becomes cuda-gdb's (found on PATH, under CUDA_HOME, or
    at CRASHLAB_CUDA_GDB). Exit 3 when there is no cuda-gdb.

    \b
    Examples:
      crashlab debug core_1754_node_12345.nvcudmp
      crashlab debug core.nvcudmp --exe ./server --host-core core.12345
    """
    from .api import inspect as inspect_core
    from .gdb.debug import command_line, exec_debugger, printable
    from .gdb.driver import find_cuda_gdb

    # the user's files are checked before the tool: bad input is exit 2 with or without it
    report = inspect_core(core, sass=False)
    program, why = find_cuda_gdb()
    argv = command_line(program or "cuda-gdb", core, report, host_core=host_core, exe=exe)
    if print_only:
        click.echo(printable(argv))
        if program is None:
            say(f"{why}; printed with 'cuda-gdb' as its name")
        return
    if program is None:
        raise EnvironmentProblem(why)
    try:
        exec_debugger(argv)
    except OSError as exc:
        raise EnvironmentProblem(f"could not run {argv[0]}: {exc}") from None


@main.command(subject="dump")
@click.argument("dump", type=click.Path())
@click.option("--list", "as_list", is_flag=True,
              help="List the requests, replay nothing (the default without --url); with --json "
                   "as JSON (schema: crashlab schema listing).")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: the dump's requests, or with --url the replay result (schema: "
                   "crashlab schema listing / replay).")
@click.option("--url", help="Server to replay against, e.g. http://127.0.0.1:30000.")
@click.option("--speed", type=_POSITIVE, default=1.0, show_default=True,
              help="Divide the recorded arrival gaps by this.")
@click.option("--max-rate", type=_POSITIVE, help="Ignore recorded times: send at this many requests/s.")
@click.option("--concurrency", type=click.IntRange(min=1),
              help="At most this many requests in flight (alone: as fast as that allows).")
@click.option("--timeout", type=_POSITIVE, default=120.0, show_default=True,
              help="Seconds one request may take.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Replay N times and report k/N reproductions.")
@click.option("--watch-cores", type=click.Path(file_okay=False, path_type=Path),
              help="A new file under this folder counts as a crash (CUDA coredumps).")
@click.option("--watch-log", type=click.Path(dir_okay=False, path_type=Path),
              help="A fault line appended to this log counts as a crash.")
@click.option("--fault-pattern", multiple=True, help="Another regular expression for --watch-log.")
@click.option("--pid", type=int, help="The server's process id: its exit counts as a crash.")
@click.option("--health-interval", type=_POSITIVE, default=1.0, show_default=True,
              help="Seconds between /health checks.")
@click.option("--health-timeout", type=_POSITIVE, default=20.0, show_default=True,
              help="A /health slower than this counts as a crash (SGLang's own limit is 20 s).")
@click.option("--settle", type=click.FloatRange(min=0), default=3.0, show_default=True,
              help="Seconds to keep watching after the last answer.")
@click.option("--restart-cmd", help="Shell command that starts the server; crashlab restarts it "
                                    "before each attempt and stops it at the end.")
@click.option("--start-timeout", type=_POSITIVE, default=600.0, show_default=True,
              help="Seconds --restart-cmd may take to answer /health.")
@click.option("--api-key", envvar="CRASHLAB_API_KEY", metavar="KEY",
              help="The server's --api-key, sent as a bearer token [default: the --api-key of "
                   "--restart-cmd; env CRASHLAB_API_KEY]. Masked in every output.")
@click.option("--minimize", "do_minimize", is_flag=True,
              help="Shrink the dump to a minimal reproducing set (needs --restart-cmd).")
@click.option("--budget", default="50", show_default=True,
              help="--minimize trials (40) or wall time (30m).")
@click.option("--out", "-o", "output", type=click.Path(dir_okay=False),
              help="Where --minimize writes the minimal dump [default: DUMP with .min.pkl].")
@click.option("--output", "output_alias", type=click.Path(dir_okay=False), hidden=True,
              help="--out's former name, kept for scripts that use it.")
@click.option("--late-threshold", type=click.FloatRange(min=0), default=50.0, show_default=True,
              help="Milliseconds: an attempt whose p99 send lateness exceeds this did not keep "
                   "its schedule (said in the result).")
@click.option("--force-decode", type=click.Choice(["auto", "trace", "length", "off"]),
              default="auto", show_default=True,
              help="Generate the recorded number of tokens: trace (the recorded ids, "
                   "trace_decode_token_ids), length (min = max new tokens, ignore_eos), auto (trace "
                   "if the server takes it, else length; off when nothing was recorded).")
@click.option("--expect", multiple=True,
              help="Regular expression the replay's fault lines must match to count as reproduced "
                   "(repeatable; default: the run directory's triage, if the dump is in one).")
@click.option("--expect-kernel", help="The kernel the recorded crash faulted in.")
@click.option("--any-crash", is_flag=True, help="Count any crash as reproduced (no expected crash).")
@click.option("--harden", type=click.Choice(["sanitizer", "sglang", "all"]), is_flag=False,
              flag_value="all", default=None,
              help="Run --restart-cmd under compute-sanitizer (memcheck, coredumps on) and/or "
                   "SGLang's debug switches; --harden alone is all. Put it after DUMP.")
def replay(**options) -> None:
    """Load an SGLang crash dump safely, replay it against a server, minimize it.

    DUMP is a crash_dump_<time>.pkl from SGLang's --crash-dump-folder (0.5.6 to 0.5.23). It is
    read without importing sglang and without running anything it names. Exit codes: 0 the
    crash reproduced (or the dump was listed), 1 it did not, 2 bad input, 3 no server.

    \b
    Examples:
      crashlab replay crash_dump.pkl --list
      crashlab replay crash_dump.pkl --url http://127.0.0.1:30000 --watch-log server.log
      crashlab replay crash_dump.pkl --url http://127.0.0.1:30000 --max-rate 200 --repeat 5 \\
          --restart-cmd "python -m sglang.launch_server --model-path M --port 30000"
      crashlab replay crash_dump.pkl --url http://127.0.0.1:30000 --minimize --budget 30m \\
          --restart-cmd "python -m sglang.launch_server --model-path M --port 30000"
      crashlab replay crash_dump.pkl --harden sanitizer --url http://127.0.0.1:30000 \\
          --expect "illegal memory access" --restart-cmd "python -m sglang.launch_server ..."
    """
    from .replay.command import run
    from .replay.options import ReplayOptions

    alias = options.pop("output_alias")
    sys.exit(run(ReplayOptions.from_command_line(**{**options, "output": options["output"] or alias})))


@main.command()
@click.option("--json", "as_json", is_flag=True,
              help="Print the Environment as JSON (schema: crashlab schema environment).")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print a fenced block of check_env-style lines for an issue body.")
@click.option("--python", "python", metavar="PATH",
              help="The interpreter whose packages to report (the server's, e.g. a venv's "
                   "bin/python) [default: crashlab's own].")
@click.option("--timeout", type=_POSITIVE, default=2.0, show_default=True,
              help="Seconds each tool (nvidia-smi, nvcc, the interpreter) may take; they run at once.")
def env(as_json: bool, as_markdown: bool, python: str | None, timeout: float) -> None:
    """What sglang.check_env reports, taken without touching CUDA: OS, Python, NVIDIA driver and
    GPUs, CUDA toolkit, package versions (from metadata, nothing imported), topology and the
    relevant environment variables, secrets masked.

    A tool that does not answer in time (nvidia-smi on a wedged GPU) is recorded as such and
    the rest is still printed.

    \b
    Examples:
      crashlab env
      crashlab env --python /opt/venvs/sglang/bin/python --markdown
      crashlab env --json | jq .packages
    """
    from .env import capture

    if as_json and as_markdown:
        raise BadInput("choose one of --json and --markdown")
    if python is not None and not Path(python).is_file() and shutil.which(python) is None:
        raise BadInput(f"--python {python}: no such interpreter")
    environment = capture(python=python, timeout=timeout)
    if python and not environment.python.site_paths:
        raise BadInput(f"--python {python}: not a Python interpreter that answers")
    if as_json:  # rich is not needed for JSON
        click.echo(environment.model_dump_json(indent=2))
        return
    from .console import ViewConsole
    from .env import views

    if as_markdown:
        click.echo(views.markdown(environment), nl=False)
    else:
        views.render(environment, ViewConsole())


@main.command()
@click.option("--json", "as_json", is_flag=True,
              help="Print the results as JSON (schema: crashlab schema doctor).")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("crashlab-runs"),
              show_default=True, help="The runs directory crashlab serve will use: its free "
                                      "space is checked against the GPUs' memory.")
@click.option("--python", "python", metavar="PATH",
              help="The interpreter that runs the server (e.g. a venv's bin/python), whose "
                   "packages are checked [default: crashlab's own].")
@click.option("--cmake-cache", type=click.Path(path_type=Path), metavar="FILE",
              help="A source build's CMakeCache.txt, whose CMAKE_CUDA_COMPILER is checked "
                   "against CUDA_HOME.")
def doctor(as_json: bool, runs_dir: Path, python: str | None, cmake_cache: Path | None) -> None:
    """Check this machine before it crashes: builds against another torch, CUDA toolchain
    mismatches, FlashInfer's missing modules and stale JIT cache, and what would stop a crash
    from being captured. Each finding comes with its fix. Nothing opens a GPU or imports torch.

    Exit codes: 0 no finding, 1 findings, 2 bad input.

    \b
    Examples:
      crashlab doctor
      crashlab doctor --python /opt/venvs/sglang/bin/python --runs-dir /data/crashlab-runs
      crashlab doctor --json | jq '.checks[] | select(.status == "finding")'
    """
    from .env.doctor import machine_for, run_checks

    if python is not None and not Path(python).is_file() and shutil.which(python) is None:
        raise BadInput(f"--python {python}: no such interpreter")
    report = run_checks(machine_for(runs_dir, python, cmake_cache))
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        from .console import ViewConsole
        from .env.doctor_view import render

        render(report, ViewConsole())
    sys.exit(EXIT_NOTHING if report.findings else EXIT_FOUND)


@main.command(subject="inputs")
@click.argument("inputs", nargs=-1, type=click.Path())
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the body and the bundle [default: the current folder].")
@click.option("--output", "output_alias", type=click.Path(file_okay=False, path_type=Path),
              hidden=True, help="--out under replay's former name, for scripts that use it.")
@click.option("--max-size", default="25MB", show_default=True,
              help="Largest bundle (GitHub takes attachments up to 25 MB): e.g. 10MB, 500k.")
@click.option("--anonymize", is_flag=True,
              help="Also replace host and user names, home folders, IP addresses, and the "
                   "requests' texts and token ids (lengths, sampling parameters and timing kept).")
@click.option("--this-machine", is_flag=True,
              help="Also describe the machine the report is made on, labelled as such (by "
                   "default the environment is the crashed machine's: the run's and the coredump's).")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON summary instead of the body (schema: crashlab schema report-bundle).")
@click.option("--no-explain", is_flag=True,
              help="Skip the explanation of each coredump's faults.")
@_db_option
def report(inputs: tuple[str, ...], out: Path | None, output_alias: Path | None, max_size: str,
           anonymize: bool, this_machine: bool, as_json: bool, no_explain: bool,
           db: str | None) -> None:
    """Write an upstream issue: a Markdown body and one .tar.gz to attach beside it.

    INPUTS are serve run directories, CUDA coredumps and SGLang request dumps, in any mix. The
    body (at most 65,536 characters) follows SGLang's bug template: what happened, reproduction
    (launch and replay commands), environment, triage, logs. The crashes are recorded in the
    crash index (the one beside the first run's runs directory by default). The bundle holds report.md,
    report.json, the environment, log excerpts, each coredump's triage, and the dumps and request
    pickles that fit under --max-size; the body lists what was left out and where it is.
    Secrets are masked everywhere. The body goes to stdout; the title, the two paths and what
    the triaging machine lacked (no cuda-gdb: not news for upstream) to stderr.

    Exit codes: 0 written, the inputs show a crash; 1 written, they show none (a run that ended
    cleanly); 2 bad input (also a --max-size too small for the report itself); 3 the output
    folder cannot be written.

    \b
    Examples:
      crashlab report crashlab-runs/20261123-201500-node7-4242
      crashlab report core_1754_node_12345.nvcudmp crash_dump_2026-11-23_20-08-06.pkl
      crashlab report RUN --anonymize --max-size 10MB --out /tmp/issue
    """
    from .issue import local
    from .issue.command import ReportOptions, make
    from .textsize import parse_size, with_bytes

    made = make(ReportOptions(inputs=list(inputs), out=out or output_alias, max_bytes=parse_size(max_size),
                              anonymize=anonymize, this_machine=this_machine,
                              explain=not no_explain))
    if as_json:
        click.echo(made.issue.model_dump_json(indent=2))
    else:
        click.echo(made.body, nl=False)
    say(f"title: {made.issue.title}")
    say(f"body: {made.issue.body}")
    say(f"bundle: {made.issue.bundle}: {with_bytes(made.issue.bundle_bytes)}, "
        f"{len(made.issue.left_out)} files left out")
    for reason in made.lacking:
        say(local.message(reason))
    from .index import capture
    from .index.recording import record_all

    runs = [Path(run.path).absolute().parent for run in made.inputs.runs]
    record_all(lambda: capture.from_report_inputs(made.inputs), db,
               runs[0] if runs else Path("crashlab-runs"), say)
    sys.exit(EXIT_FOUND if made.issue.found else EXIT_NOTHING)


def _label(value: str | None) -> str | None:
    """A label, not the next option or ``--`` taken as one (``--deployment -- python ...``)."""
    if value is not None and not value.strip():
        raise click.BadParameter("a deployment label cannot be empty")
    if value is not None and value.startswith("-"):
        raise click.BadParameter(f"{value!r} is not a deployment label (is the label missing?)")
    return value


# The launch command is the first word that is not one of serve's options (or what follows --):
# from there on nothing is parsed, while a mistyped option before it is refused like anywhere else.
@main.command(context_settings={"allow_interspersed_args": False})
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("crashlab-runs"),
              show_default=True, help="Where run directories are made (<time>-<host>-<pid>).")
@click.option("--coredump", type=click.Choice(COREDUMP_MODES),
              default="lightweight", show_default=True,
              help="GPU coredumps on a device exception: lightweight skips memory and "
                   "non-relocated images; full keeps everything (huge); off.")
@click.option("--user-dumps", is_flag=True,
              help="Enable user-triggered coredumps, so that crashlab dump-now can dump a hang.")
@click.option("--health-url", help="Polled while the server runs [default: from the "
                                   "command's --host/--port; SGLang: 127.0.0.1:30000].")
@click.option("--health-interval", type=click.FloatRange(min=0.05), default=10.0, show_default=True,
              help="Seconds between /health checks.")
@click.option("--health-timeout", type=click.FloatRange(min=0.05), default=30.0, show_default=True,
              help="Seconds a /health may take; slower, the server is marked unhealthy (recorded in the manifest).")
@click.option("--dump-timeout", type=click.FloatRange(min=0), default=600.0, show_default=True,
              help="Longest wait for a coredump in flight before killing anything.")
@click.option("--grace", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds between the stop signal and SIGKILL.")
@click.option("--restart", type=click.Choice(["never", "on-crash"]), default="never",
              show_default=True, help="Start a new incarnation of the server after a crash.")
@click.option("--max-restarts", type=click.IntRange(min=0), default=3, show_default=True,
              help="At most this many restarts with --restart on-crash.")
@click.option("--restart-delay", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Delay before the first restart; it doubles with each one.")
@click.option("--quiet", is_flag=True, help="Do not echo the server's output (it is still logged).")
@click.option("--no-debugger", is_flag=True,
              help="Do not add cuda-gdb's view to the dumps' reports (it is added where cuda-gdb "
                   "exists).")
@click.option("--deployment", metavar="LABEL", callback=lambda _c, _p, value: _label(value),
              help="The deployment this server belongs to, e.g. the prefill and decode servers "
                   "of one PD-disaggregated SGLang: their crashes are grouped into incidents.")
@_incident_window_option
@_db_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def serve(runs_dir, coredump, user_dumps, health_url, health_interval, health_timeout,
          dump_timeout, grace, restart, max_restarts, restart_delay, quiet, no_debugger,
          db, deployment, incident_window, command) -> None:
    """Run a server under watch; when it crashes, keep every artifact and triage it.

    Prefix the usual launch command. The run directory gets the server's logs, its GPU
    coredumps, SGLang's request dump (--crash-dump-folder is added), a manifest.json kept up to
    date, and after a crash report.md and report.json; the crashes are recorded in the crash
    index (crashlab list). Ctrl-C stops the server (its whole process group), after any
    coredump in flight is written.

    Exit codes: 0 a crash (or a dump) was caught and triaged; 1 the server exited cleanly or
    was stopped, nothing to report; 2 bad command line; 3 environment problem.

    \b
    Examples:
      crashlab serve -- python -m sglang.launch_server --model-path Qwen/Qwen3-0.6B
      crashlab serve --user-dumps --restart on-crash -- python -m sglang.launch_server ...
      crashlab serve --coredump full -- ./my_cuda_program
      crashlab serve --deployment pd-1 -- python -m sglang.launch_server \\
          --disaggregation-mode prefill ...
    """
    from .report.run_views import report_line
    from .supervise import CoredumpMode, ServeOptions, Supervisor
    from .supervise.stopsignals import forwarded_stops

    options = ServeOptions(
        command=list(command), runs_dir=runs_dir, coredump=CoredumpMode(coredump),
        user_dumps=user_dumps, health_url=health_url, health_interval=health_interval,
        health_timeout=health_timeout, dump_timeout=dump_timeout, grace=grace, restart=restart,
        max_restarts=max_restarts, restart_delay=restart_delay, echo=not quiet,
        debugger=not no_debugger, db=db, deployment=deployment, incident_window=incident_window)
    supervisor = Supervisor(options, say)
    say(f"run directory: {supervisor.run_dir}")
    # Ctrl-C, SIGTERM and a closing terminal (unless nohup) stop the server as they would have
    # without crashlab in between: forwarded to its whole process group
    with forwarded_stops(supervisor.request_stop):
        outcome = supervisor.run()
    if outcome.report is not None:  # each incident's lines were printed when it was triaged
        say(report_line(outcome.report))
    else:
        say(f"{outcome.result}: nothing to triage (manifest: {outcome.run_dir}/manifest.json)")
    sys.exit(outcome.exit_code)


@main.command(name="list")
@click.option("--since", metavar="AGE|DATE", help="Only crashes since then: 2h, 3d, 1w, or an ISO "
                                                  "date or time (UTC unless it says).")
@click.option("--signature", metavar="HASH", help="Only crashes of this signature or coarse key "
                                                  "(a prefix will do).")
@click.option("--host", help="Only crashes on this host.")
@click.option("--limit", type=click.IntRange(min=1),
              help="At most this many (the newest) [default: 50 on the terminal, all with --json].")
@click.option("--incidents", is_flag=True,
              help="Group the crashes into incidents (the ranks of a server, the servers of a "
                   "deployment), newest first, with the driver's Xid lines; --limit counts "
                   "incidents.")
@_incident_window_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the crashes as JSON (schema: crashlab schema crash-list, or "
                   "incident-list with --incidents).")
@_db_option
@_runs_dir_option
def list_command(since, signature, host, limit, incidents, incident_window, as_json, db,
                 runs_dir) -> None:
    """List recorded crashes, newest first, one line each (like coredumpctl list).

    \b
    Examples:
      crashlab list --since 2h
      crashlab list --signature 3fa2c1 --host node7
      crashlab list --incidents --since 1d
      crashlab list --json --db postgresql://crashlab@db.internal/crashes | jq '.crashes[0]'
    """
    if incidents:
        _list_incidents(since, signature, host, limit, incident_window, as_json, db, runs_dir)
        return
    filters, shown_at_most = _list_filters(since, signature, host, limit, as_json)
    with _read_index(db, runs_dir, signature) as index:
        if as_json:
            from .index.streamed import write_crash_list

            write_crash_list(index, filters, sys.stdout.buffer)
            return
        from .index.views import LIST_FIELDS, crash_list

        rows = [row for batch in index.listed(filters, LIST_FIELDS) for row in batch]
    _list_on_terminal(rows, shown_at_most, crash_list, "", index.address)


#: crashlab list on a terminal, without --limit: the newest this many
TERMINAL_LIST_LIMIT = 50


def _list_filters(since, signature, host, limit, as_json):
    """list's filters, and how many of what they find to show: on the terminal, one more than
    shown tells whether there were more."""
    from .index.store import Filters
    from .index.since import parse

    shown_at_most = limit if limit or as_json else TERMINAL_LIST_LIMIT
    return Filters(since=parse(since) if since else None, signature=signature, host=host,
                   limit=shown_at_most if limit or as_json else shown_at_most + 1), shown_at_most


def _read_index(db: str | None, runs_dir: Path, signature: str | None = None):
    """The index list, show and gc read: never created by them (a missing one is exit 1). A
    --signature it does not know found nothing: exit 1 too."""
    from .index.location import resolve
    from .index.store import Index, UnknownSignature

    index = Index(resolve(db, runs_dir, say), create=False)
    try:
        if signature:
            index.signature_key(signature)
    except UnknownSignature as exc:
        index.close()
        fail(str(exc), EXIT_NOTHING)
    except BaseException:
        index.close()
        raise
    return index


def _list_on_terminal(found: list, shown_at_most: int, view, what: str, address: str) -> None:
    from .console import ViewConsole
    from .index.views import heading

    console = ViewConsole()
    heading(address, console)
    view(found[:shown_at_most], console)
    if len(found) > shown_at_most:
        say(f"the newest {shown_at_most} {what}shown; --limit N for more, --json for all")
    sys.exit(EXIT_FOUND if found else EXIT_NOTHING)


def _list_incidents(since, signature, host, limit, window, as_json, db, runs_dir) -> None:
    """crashlab list --incidents: the filtered crashes grouped, a block per incident."""
    from .index.incidents import listing

    filters, shown_at_most = _list_filters(since, signature, host, limit, as_json)
    with _read_index(db, runs_dir, signature) as index:
        found = listing(index, filters, window)
    if as_json:
        click.echo(found.model_dump_json(indent=2))
        return
    from .index.views import incident_list

    _list_on_terminal(found.incidents, shown_at_most, incident_list, "incidents ", found.index)


def _index_result(result, as_json: bool, view) -> None:
    """What show and gc found: its JSON, or its terminal view (rich only then)."""
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    from .console import ViewConsole
    from .index.views import heading

    console = ViewConsole()
    heading(result.index, console)
    view(result, console)


@main.command(subject="crash")
@click.argument("what", metavar="ID|SIGNATURE")
@_incident_window_option
@click.option("--json", "as_json", is_flag=True,
              help="Print it as JSON (its schema: crashlab schema crash-show).")
@_db_option
@_runs_dir_option
def show(what: str, incident_window: float, as_json: bool, db: str | None,
         runs_dir: Path) -> None:
    """Show one recorded crash (its facts, its incident and its report), a signature (how many
    crashes, on which hosts, GPUs, drivers and versions, first and last seen), or a coarse key
    (the signatures under it, which differ only in their site: the same bug where source
    lines moved between releases).

    \b
    Examples:
      crashlab show 42
      crashlab show 3fa2c1d0e9b7
    """
    from .index.commands import show as show_one
    from .index.views import shown

    with _read_index(db, runs_dir) as index:
        found = show_one(index, what, incident_window)
    _index_result(found, as_json, shown)


@main.command()
@click.option("--keep", type=click.IntRange(min=0), default=3, show_default=True,
              help="Coredumps kept per signature (its first ones).")
@click.option("--max-size", metavar="SIZE",
              help="Disk budget for all kept coredumps, e.g. 200GB (each signature's first dump "
                   "is kept before any second one).")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the decisions as JSON (schema: crashlab schema crash-gc).")
@_db_option
@_runs_dir_option
def gc(keep: int, max_size: str | None, dry_run: bool, as_json: bool, db: str | None,
       runs_dir: Path) -> None:
    """Delete the coredumps of known crashes beyond the retention, and mark them gone in the
    index (their crash records stay).

    gc deletes only files crashlab made: those in serve's run directories and the copies
    inspect --record --copy took. A dump recorded by reference (inspect --record, report on
    your own file) is never deleted: past the retention the index forgets it and it stays on
    disk.

    \b
    Examples:
      crashlab gc --dry-run
      crashlab gc --keep 1 --max-size 100GB
    """
    from .index.commands import collect
    from .index.retention import Retention
    from .textsize import parse_size

    policy = Retention(keep_per_signature=keep,
                       max_bytes=parse_size(max_size) if max_size else None)
    from .index.views import collection

    with _read_index(db, runs_dir) as index:
        result = collect(index, policy, dry_run)
    _index_result(result, as_json, collection)


@main.command(name="dump-now", subject="run")
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--timeout", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="How long to wait for the dumps to be collected.")
def dump_now_command(run: Path, timeout: float) -> None:
    """Make a running server's GPUs write coredumps now (a hang), through the driver's pipes.

    RUN is the run directory of a crashlab serve --user-dumps that is still running. Exit
    codes: 0 dumps collected; 1 triggered but none collected in time; 2 not such a run;
    3 no live pipe (the server has not initialised CUDA, or has ended).
    """
    from .textsize import with_bytes
    from .supervise import dump_now

    result = dump_now(run, timeout)
    say(f"triggered {len(result.triggered)} pipe(s)")
    for record in result.collected:
        say(f"collected {run / record.path} ({with_bytes(record.size_bytes)}); "
             f"crashlab inspect {run / record.path}")
    if not result.collected:
        say(f"no dump was collected within {timeout:g} s")
    sys.exit(EXIT_FOUND if result.collected else EXIT_NOTHING)


if __name__ == "__main__":  # pragma: no cover
    main()
