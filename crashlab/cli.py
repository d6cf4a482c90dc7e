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
PIPED_WIDTH = 140


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
@click.option("--debugger", is_flag=True,
              help="Add cuda-gdb's view of each fault and whether it agrees with crashlab's. "
                   "Without cuda-gdb the report is the same, its debugger section says why it is "
                   "empty, and the exit code does not change.")
def inspect(core: str, as_json: bool, as_markdown: bool, no_sass: bool, context: int,
            debugger: bool) -> None:
    """Explain a CUDA GPU coredump: faulting kernel, exception, block, thread, PC, SASS, source.

    CORE is a .nvcudmp file, gzip-compressed or not, or - for standard input. No GPU and no
    cuda-gdb are needed; SASS needs nvdisasm (pip install 'crashlab[sass]').

    \b
    Examples:
      crashlab inspect core_1754_node_12345.nvcudmp
      crashlab inspect core.nvcudmp.gz --markdown > issue.md
      crashlab inspect core.nvcudmp --json | jq '.faults[0].kernel'
      crashlab inspect core.nvcudmp --debugger
    """
    if as_json and as_markdown:
        _fail("choose one of --json and --markdown", EXIT_BAD_INPUT)
    try:
        report = inspect_core(core, sass=not no_sass, context=context, debugger=debugger)
    except CrashlabError as exc:
        _fail(str(exc), exc.exit_code)
    except MemoryError:
        _fail(f"{core}: ran out of memory reading it", EXIT_BAD_INPUT)
    except Exception as exc:  # the last guard: a stranger's file must never produce a traceback
        if os.environ.get("CRASHLAB_DEBUG"):
            raise
        _fail(f"{core}: could not be read ({type(exc).__name__}: {exc}); this is a crashlab bug, "
              "please report it (CRASHLAB_DEBUG=1 shows the traceback)", EXIT_BAD_INPUT)
    if report.debugger is not None and report.debugger.status in ("unavailable", "failed"):
        click.echo(f"crashlab: --debugger: {report.debugger.reason}; the native report stands",
                   err=True)
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    elif as_markdown:
        click.echo(markdown.render(report), nl=False)
    else:
        # Piped into a file, rich would wrap at 80 columns; SASS lines read better unwrapped.
        width = None if sys.stdout.isatty() else PIPED_WIDTH
        terminal.render(report, Console(highlight=False, width=width))
    sys.exit(EXIT_FOUND if report.found else EXIT_NOTHING)


@main.command()
def schema() -> None:
    """Print the JSON Schema of the report that --json emits."""
    click.echo(json.dumps(json_schema(), indent=2))


# -- crashlab debug (cuda-gdb issue) ---------------------------------------------------------
EXIT_NO_TOOL = 3


@main.command()
@click.argument("core", type=click.Path(dir_okay=False))
@click.option("--host-core", type=click.Path(dir_okay=False), help="The host (CPU) core of the same crash.")
@click.option("--exe", type=click.Path(dir_okay=False), help="The executable that crashed (needed with --host-core).")
@click.option("--print", "print_only", is_flag=True, help="Print the debugger command line instead of running it.")
def debug(core: str, host_core: str | None, exe: str | None, print_only: bool) -> None:
    """Open cuda-gdb on a CUDA coredump, its focus already on the first fault.

    Like coredumpctl debug: the terminal becomes cuda-gdb's (found on PATH, under CUDA_HOME, or
    at CRASHLAB_CUDA_GDB). Exit 3 when there is no cuda-gdb.

    \b
    Examples:
      crashlab debug core_1754_node_12345.nvcudmp
      crashlab debug core.nvcudmp --exe ./server --host-core core.12345
    """
    from .gdb.debug import command_line, exec_debugger, printable
    from .gdb.driver import find_cuda_gdb

    try:
        report = inspect_core(core, sass=False)
        program, why = find_cuda_gdb()
        if program is None:
            _fail(why, EXIT_NO_TOOL)
        argv = command_line(program, core, report, host_core=host_core, exe=exe)
    except CrashlabError as exc:
        _fail(str(exc), exc.exit_code)
    if print_only:
        click.echo(printable(argv))
        return
    try:
        exec_debugger(argv)
    except OSError as exc:
        _fail(f"could not run {argv[0]}: {exc}", EXIT_NO_TOOL)


if __name__ == "__main__":  # pragma: no cover
    main()


# -- crashlab replay (issue 5) ----------------------------------------------------------------
from pathlib import Path  # noqa: E402

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn  # noqa: E402

from . import replay as replay_api  # noqa: E402
from .replay import views as replay_views  # noqa: E402
from .replay.minimize import Budget  # noqa: E402
from .replay.oracle import FAULT_PATTERNS  # noqa: E402
from .replay.runner import Target, Watch  # noqa: E402
from .replay.runner import minimize as minimize_dump  # noqa: E402
from .replay.runner import replay as replay_dump  # noqa: E402
from .replay.send import Plan  # noqa: E402


class _OneLineUsageError(click.UsageError):
    def show(self, file=None) -> None:
        click.echo(f"crashlab replay: {self.format_message()}", err=True)


class _ReplayCommand(click.Command):
    """Bad options get one line on stderr (exit 2), not click's usage block."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as problem:
            raise _OneLineUsageError(problem.format_message(), ctx) from None


_POSITIVE = click.FloatRange(min=0, min_open=True)


def _guarded(subject: str, action):
    """``action()``; a failure is one line on stderr with its exit code, never a traceback."""
    try:
        return action()
    except CrashlabError as exc:
        _fail(str(exc), exc.exit_code)
    except MemoryError:
        _fail(f"{subject}: ran out of memory", EXIT_BAD_INPUT)
    except Exception as exc:  # the last guard: a stranger's file must never produce a traceback
        if os.environ.get("CRASHLAB_DEBUG"):
            raise
        _fail(f"{subject}: {type(exc).__name__}: {exc}; this is a crashlab bug, please report "
              "it (CRASHLAB_DEBUG=1 shows the traceback)", EXIT_BAD_INPUT)


def _wide_console() -> Console:
    """The terminal's width, or 160 columns into a pipe or file (rich would assume 80)."""
    console = Console(highlight=False)
    return console if console.is_terminal else Console(highlight=False, width=160)


@main.command(cls=_ReplayCommand)
@click.argument("dump", type=click.Path())
@click.option("--list", "as_list", is_flag=True, help="List the requests (the default without --url).")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: the dump's records, or with --url the replay result.")
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
@click.option("--minimize", "do_minimize", is_flag=True,
              help="Shrink the dump to a minimal reproducing set (needs --restart-cmd).")
@click.option("--budget", default="50", show_default=True,
              help="--minimize trials (40) or wall time (30m).")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Where --minimize writes the minimal dump [default: DUMP with .min.pkl].")
def replay(dump, as_list, as_json, url, speed, max_rate, concurrency, timeout, repeat, watch_cores,
           watch_log, fault_pattern, pid, health_interval, health_timeout, settle, restart_cmd,
           start_timeout, do_minimize, budget, output):
    """Load an SGLang crash dump safely, replay it against a server, minimise it.

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
    """
    if as_list and as_json:
        _fail("replay: choose one of --list and --json", EXIT_BAD_INPUT)
    if url is None and (do_minimize or restart_cmd):
        _fail("replay: --minimize and --restart-cmd need --url", EXIT_BAD_INPUT)
    if do_minimize and not restart_cmd:
        _fail("replay: --minimize needs --restart-cmd (each trial starts a fresh server)",
              EXIT_BAD_INPUT)
    trials = _guarded("replay", lambda: Budget.parse(budget))
    plan = _guarded("replay", lambda: Plan.choose(speed=speed, max_rate=max_rate,
                                                  concurrency=concurrency, timeout=timeout))
    watch = _guarded("replay", lambda: Watch(
        pid=pid, cores=watch_cores, log=watch_log, patterns=FAULT_PATTERNS + tuple(fault_pattern),
        health_interval=health_interval, health_timeout=health_timeout, settle=settle))
    target = Target(url=url, restart_cmd=restart_cmd, start_timeout=start_timeout) if url else None
    loaded = _guarded(dump, lambda: replay_api.load(dump))
    if url is None:
        if as_json:
            click.echo(json.dumps(replay_views.dump_json(loaded), indent=2))
        else:
            replay_views.render_dump(loaded, _wide_console())
        sys.exit(EXIT_FOUND)
    if not loaded.requests:
        _fail(f"{dump}: holds no requests to replay", EXIT_BAD_INPUT)
    err = Console(stderr=True, highlight=False)
    if do_minimize:
        out = output or str(Path(dump).with_suffix("")) + ".min.pkl"
        result = _guarded(dump, lambda: minimize_dump(
            loaded, target, plan, watch, trials, out, repeat,
            on_trial=lambda number, size, crashed: err.print(
                f"trial {number}: {size} requests -> {'crashed' if crashed else 'no crash'}")))
    else:
        progress = Progress("replay", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=err, transient=True, disable=not err.is_terminal)
        with progress:
            task = progress.add_task("replay", total=len(loaded.requests))
            result = _guarded(dump, lambda: replay_dump(
                loaded, target, plan, watch, repeat,
                progress=lambda done, total: progress.update(task, completed=done)))
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        replay_views.render_result(result, _wide_console())
    found = bool(result.minimization.minimal) if result.minimization else result.reproduced
    sys.exit(EXIT_FOUND if found else EXIT_NOTHING)
