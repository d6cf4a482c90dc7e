"""crashlab debug: cuda-gdb on a coredump, its focus on the fault."""

from __future__ import annotations

import click

from ..errors import EnvironmentProblem
from ..guard import GuardedCommand, say


@click.command(cls=GuardedCommand, subject="core")
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
    from ..api import inspect as inspect_core
    from ..gdb.debug import command_line, exec_debugger, printable
    from ..gdb.driver import find_cuda_gdb

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
