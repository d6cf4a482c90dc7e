"""The ``crashlab`` command: parse options, call the API, render. No triage logic lives here."""

from __future__ import annotations

import json
import os
import sys

import click
from rich.console import Console

from . import __version__
from .api import inspect as inspect_core
from .errors import CrashlabError
from .report import markdown, terminal
from .report.model import json_schema

EXIT_FOUND, EXIT_NOTHING, EXIT_BAD_INPUT = 0, 1, 2


def _fail(message: str, code: int) -> None:
    click.echo(f"crashlab: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crashlab")
def main() -> None:
    """Crash forensics for GPU LLM serving: read CUDA coredumps without a GPU.

    Exit codes: 0 found what was looked for (a fault), 1 found nothing (a dump without an
    exception), 2 bad input or usage, 3 a missing tool or service.
    """


@main.command()
@click.argument("core", type=click.Path(dir_okay=True, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema: crashlab schema).")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print a GitHub issue body (at most 65,536 characters).")
@click.option("--no-sass", is_flag=True, help="Skip disassembly (nvdisasm is not run).")
@click.option("--context", type=click.IntRange(0, 200), default=8, show_default=True,
              help="SASS instructions shown on each side of the faulting one.")
def inspect(core: str, as_json: bool, as_markdown: bool, no_sass: bool, context: int) -> None:
    """Explain a CUDA GPU coredump: faulting kernel, exception, block, thread, PC, SASS, source.

    CORE is a .nvcudmp file, gzip-compressed or not, or - for standard input. No GPU and no
    cuda-gdb are needed; SASS needs nvdisasm (pip install 'crashlab[sass]').

    \b
    Examples:
      crashlab inspect core_1754_node_12345.nvcudmp
      crashlab inspect core.nvcudmp.gz --markdown > issue.md
      crashlab inspect core.nvcudmp --json | jq '.faults[0].kernel'
    """
    if as_json and as_markdown:
        _fail("choose one of --json and --markdown", EXIT_BAD_INPUT)
    try:
        report = inspect_core(core, sass=not no_sass, context=context)
    except CrashlabError as exc:
        _fail(str(exc), exc.exit_code)
    except MemoryError:
        _fail(f"{core}: ran out of memory reading it", EXIT_BAD_INPUT)
    except Exception as exc:  # the last guard: a stranger's file must never produce a traceback
        if os.environ.get("CRASHLAB_DEBUG"):
            raise
        _fail(f"{core}: could not be read ({type(exc).__name__}: {exc}); this is a crashlab bug, "
              "please report it (CRASHLAB_DEBUG=1 shows the traceback)", EXIT_BAD_INPUT)
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    elif as_markdown:
        click.echo(markdown.render(report), nl=False)
    else:
        terminal.render(report, Console(highlight=False))
    sys.exit(EXIT_FOUND if report.found else EXIT_NOTHING)


@main.command()
def schema() -> None:
    """Print the JSON Schema of the report that --json emits."""
    click.echo(json.dumps(json_schema(), indent=2))


# --- crashlab serve, crashlab dump-now (issue 6) --------------------------------------------

from pathlib import Path  # noqa: E402
import signal  # noqa: E402

from .report.run_views import summary_lines  # noqa: E402
from .supervise import CoredumpMode, ServeOptions, Supervisor, dump_now  # noqa: E402


def _say(message: str) -> None:
    click.echo(f"crashlab: {message}", err=True)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("crashlab-runs"),
              show_default=True, help="Where run directories are made (<time>-<host>-<pid>).")
@click.option("--coredump", type=click.Choice([m.value for m in CoredumpMode]),
              default="lightweight", show_default=True,
              help="GPU coredumps on a device exception: lightweight skips memory and "
                   "non-relocated images; full keeps everything (huge); off.")
@click.option("--user-dumps", is_flag=True,
              help="Enable user-triggered coredumps, so that crashlab dump-now can dump a hang.")
@click.option("--health-url", help="Polled while the server runs [default: from the "
                                   "command's --host/--port; SGLang: 127.0.0.1:30000].")
@click.option("--health-interval", type=click.FloatRange(min=0.05), default=10.0, show_default=True)
@click.option("--health-timeout", type=click.FloatRange(min=0.05), default=30.0, show_default=True)
@click.option("--dump-timeout", type=click.FloatRange(min=0), default=600.0, show_default=True,
              help="Longest wait for a coredump in flight before killing anything.")
@click.option("--grace", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds between the stop signal and SIGKILL.")
@click.option("--restart", type=click.Choice(["never", "on-crash"]), default="never",
              show_default=True)
@click.option("--max-restarts", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--restart-delay", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Delay before the first restart; it doubles with each one.")
@click.option("--quiet", is_flag=True, help="Do not echo the server's output (it is still logged).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def serve(runs_dir, coredump, user_dumps, health_url, health_interval, health_timeout,
          dump_timeout, grace, restart, max_restarts, restart_delay, quiet, command) -> None:
    """Run a server under watch; when it crashes, keep every artifact and triage it.

    Prefix the usual launch command. The run directory gets the server's logs, its GPU
    coredumps, SGLang's request dump (--crash-dump-folder is added), a manifest.json kept up to
    date, and after a crash report.md and report.json. Ctrl-C stops the server (its whole
    process group), after any coredump in flight is written.

    Exit codes: 0 a crash (or a dump) was caught and triaged; 1 the server exited cleanly or
    was stopped, nothing to report; 2 bad command line; 3 environment problem.

    \b
    Examples:
      crashlab serve -- python -m sglang.launch_server --model-path Qwen/Qwen3-0.6B
      crashlab serve --user-dumps --restart on-crash -- python -m sglang.launch_server ...
      crashlab serve --coredump full -- ./my_cuda_program
    """
    options = ServeOptions(
        command=list(command), runs_dir=runs_dir, coredump=CoredumpMode(coredump),
        user_dumps=user_dumps, health_url=health_url, health_interval=health_interval,
        health_timeout=health_timeout, dump_timeout=dump_timeout, grace=grace, restart=restart,
        max_restarts=max_restarts, restart_delay=restart_delay, echo=not quiet)
    try:
        supervisor = Supervisor(options, _say)
        _say(f"run directory: {supervisor.run_dir}")
        # Ctrl-C, SIGTERM and a closing terminal (unless nohup) stop the server as they would
        # have without crashlab in between: forwarded to its whole process group
        stops = [signal.SIGINT, signal.SIGTERM]
        if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
            stops.append(signal.SIGHUP)
        for signum in stops:
            signal.signal(signum, lambda number, _frame: supervisor.request_stop(number))
        outcome = supervisor.run()
    except CrashlabError as exc:
        _fail(str(exc), exc.exit_code)
    if outcome.report is not None:
        for line in summary_lines(outcome.report):
            _say(line)
    else:
        _say(f"{outcome.result}: nothing to triage (manifest: {outcome.run_dir}/manifest.json)")
    sys.exit(outcome.exit_code)


@main.command(name="dump-now")
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--timeout", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="How long to wait for the dumps to be collected.")
def dump_now_command(run: Path, timeout: float) -> None:
    """Make a running server's GPUs write coredumps now (a hang), through the driver's pipes.

    RUN is the run directory of a crashlab serve --user-dumps that is still running. Exit
    codes: 0 dumps collected; 1 triggered but none collected in time; 2 not such a run;
    3 no live pipe (the server has not initialised CUDA, or has ended).
    """
    try:
        result = dump_now(run, timeout)
    except CrashlabError as exc:
        _fail(str(exc), exc.exit_code)
    _say(f"triggered {len(result.triggered)} pipe(s)")
    for record in result.collected:
        _say(f"collected {run / record.path} ({record.size_bytes} bytes); "
             f"crashlab inspect {run / record.path}")
    if not result.collected:
        _say(f"no dump was collected within {timeout:g} s")
    sys.exit(EXIT_FOUND if result.collected else EXIT_NOTHING)


if __name__ == "__main__":  # pragma: no cover
    main()
