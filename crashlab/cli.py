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
