"""crashlab inspect: read a CUDA coredump natively and print its report."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_FOUND, EXIT_NOTHING, BadInput
from ..guard import GuardedCommand, say
from .options import db_option, json_option, markdown_option


def _named(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A host name or label, not the next option taken as one (``--host --copy``), nor empty."""
    if value is not None and not value.strip():
        raise click.BadParameter("cannot be empty")
    if value is not None and value.startswith("-"):
        raise click.BadParameter(f"{value!r} is not a name (is the name missing?)")
    return value


@click.command(cls=GuardedCommand, subject="core")
@click.argument("core", type=click.Path(dir_okay=True, allow_dash=True))
@json_option("Print the JSON report (schema: crashlab schema).")
@markdown_option("Print a GitHub issue body (at most 65,536 characters).")
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
@click.option("--host", metavar="NAME", callback=_named,
              help="With --record: the host the dump crashed on (a dump copied off node7: "
                   "--host node7). A dump in a serve run directory takes the run's host; "
                   "otherwise, without --host, the host is recorded as unknown, never this "
                   "machine.")
@click.option("--deployment", metavar="LABEL", callback=_named,
              help="With --record: the deployment the crashed server belonged to (as serve "
                   "--deployment names it).")
@db_option
def inspect(core: str, as_json: bool, as_markdown: bool, no_sass: bool, no_explain: bool,
            context: int, debugger: bool, record: bool, copy: bool, host: str | None,
            deployment: str | None, db: str | None) -> None:
    """Explain a CUDA GPU coredump: faulting kernel, exception, block, thread, PC, SASS, source.

    CORE is a .nvcudmp file, gzip-compressed or not, or - for standard input. No GPU and no
    cuda-gdb are needed; SASS needs nvdisasm (pip install nvidia-cuda-nvdisasm).

    \b
    Examples:
      crashlab inspect core_1754_node_12345.nvcudmp
      crashlab inspect core.nvcudmp.gz --markdown > issue.md
      crashlab inspect core.nvcudmp --json | jq '.faults[0].kernel'
      crashlab inspect core.nvcudmp --debugger
      crashlab inspect core.nvcudmp --record \\
          --db postgresql://crashlab@db.internal/crashes
      crashlab inspect /scratch/core.nvcudmp --record --copy
      crashlab inspect core-from-node7.nvcudmp --record --host node7
    """
    from ..api import inspect as inspect_core
    from ..stdout import echo

    if as_json and as_markdown:
        raise BadInput("choose one of --json and --markdown")
    for given, name in ((db, "--db"), (copy, "--copy"), (host, "--host"),
                        (deployment, "--deployment")):
        if given and not record:
            raise BadInput(f"{name} is for --record: add --record to record the crash")
    where = None
    if record and core != "-":  # a --host the dump's run contradicts is refused before reading
        from pathlib import Path

        from ..index.capture import origin

        where = origin(Path(core), host, deployment)
    report = inspect_core(core, sass=not no_sass, context=context, debugger=debugger,
                          explain=not no_explain)
    if report.debugger is not None and report.debugger.status in ("unavailable", "failed"):
        say(f"--debugger: {report.debugger.reason}; the native report stands")
    if record:
        from ..index.recording import record_core

        record_core(core, report, db, copy, say, where)
    if as_json:
        echo(report.model_dump_json(indent=2))
    elif as_markdown:
        from ..report import markdown

        echo(markdown.render(report), nl=False)
    else:
        from ..console import ViewConsole
        from ..report import terminal

        terminal.render(report, ViewConsole())
    sys.exit(EXIT_FOUND if report.found else EXIT_NOTHING)
