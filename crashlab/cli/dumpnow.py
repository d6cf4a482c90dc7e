"""crashlab dump-now: make a running server's GPUs write coredumps (a hang)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..guard import GuardedCommand, say


@click.command(name="dump-now", cls=GuardedCommand, subject="run")
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--timeout", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="How long to wait for the dumps to be collected.")
def dump_now(run: Path, timeout: float) -> None:
    """Make a running server's GPUs write coredumps now (a hang), through the driver's pipes.

    RUN is the run directory of a crashlab serve --user-dumps that is still running. Exit
    codes: 0 dumps collected; 1 triggered but none collected in time; 2 RUN is not such a run directory;
    3 no live pipe (the server has not initialised CUDA, or has ended).
    """
    from ..supervise.command import dump_now_said

    sys.exit(dump_now_said(run, timeout, say))
