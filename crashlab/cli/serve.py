"""crashlab serve: run a server under watch and triage its crash."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..guard import GuardedCommand, say
from .options import POSITIVE, db_option, incident_window_option, runs_dir_option

#: crashlab.supervise.CoredumpMode's values, spelled out so that --help need not import it.
COREDUMP_MODES = ("lightweight", "full", "off")


def _label(value: str | None) -> str | None:
    """A label, not the next option or ``--`` taken as one (``--deployment -- python ...``)."""
    if value is not None and not value.strip():
        raise click.BadParameter("a deployment label cannot be empty")
    if value is not None and value.startswith("-"):
        raise click.BadParameter(f"{value!r} is not a deployment label (is the label missing?)")
    return value


def _crash_loop(value: str) -> tuple[int, float]:
    """``N/M``: N restarts (a positive whole number) within M minutes (a positive number)."""
    restarts, _, minutes = value.partition("/")
    try:
        parsed = int(restarts), float(minutes)
    except ValueError:
        parsed = (0, 0.0)
    if parsed[0] < 1 or not 0 < parsed[1] < float("inf"):
        raise click.BadParameter(f"{value!r} is not N/M: N restarts (1 or more) within M "
                                 "minutes (more than 0), e.g. 3/10")
    return parsed


# The launch command is the first word that is not one of serve's options (or what follows --):
# from there on nothing is parsed, while a mistyped option before it is refused like anywhere else.
@click.command(cls=GuardedCommand, context_settings={"allow_interspersed_args": False})
@runs_dir_option("Where run directories are made (<time>-<host>-<pid>).")
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
@click.option("--restart", type=click.Choice(["never", "on-crash", "always"]), default="never",
              show_default=True,
              help="Start a new incarnation of the server after a crash. on-crash follows the "
                   "crash's advice: no restart onto a GPU it drains, nor after a crash loop or a "
                   "fatal crash; always restarts onto a drained GPU too.")
@click.option("--max-restarts", type=click.IntRange(min=0), default=3, show_default=True,
              help="At most this many restarts with --restart.")
@click.option("--crash-loop", metavar="N/M", default="3/10", show_default=True,
              callback=lambda _c, _p, value: _crash_loop(value),
              help="A crash after N restarts within M minutes is a crash loop: no more restarts.")
@click.option("--restart-delay", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Delay before the first restart; it doubles with each one.")
@click.option("--quiet", is_flag=True, help="Do not echo the server's output (it is still logged).")
@click.option("--no-debugger", is_flag=True,
              help="Do not add cuda-gdb's view to the dumps' reports (it is added where cuda-gdb "
                   "exists).")
@click.option("--deployment", metavar="LABEL", callback=lambda _c, _p, value: _label(value),
              help="The deployment this server belongs to, e.g. the prefill and decode servers "
                   "of one PD-disaggregated SGLang: their crashes are grouped into incidents.")
@incident_window_option
@db_option
@click.option("--hang-after", type=POSITIVE, metavar="SECONDS",
              help="Capture a hang once /health, having answered, has not answered for this "
                   "long: host samples of every rank, then a GPU dump of every process (with "
                   "--user-dumps; it ends them), as crashlab dump-now does [default: never].")
@click.option("--hang-samples", type=click.IntRange(min=1, max=100), default=3, show_default=True,
              help="With --hang-after: host samples of every rank.")
@click.option("--hang-interval", type=click.FloatRange(min=0), default=5.0, show_default=True,
              metavar="SECONDS", help="With --hang-after: seconds between samples.")
@click.option("--no-gpu-dump", is_flag=True,
              help="With --hang-after: host samples only, no GPU dump; the server keeps running.")
@click.option("--attach", is_flag=True,
              help="With --hang-after: also attach cuda-gdb to every rank in every sample (its "
                   "kernels and warps' PCs, without ending it). Intrusive: needs ptrace, and each "
                   "process, GPU work included, is stopped while it is read.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def serve(**options: Any) -> None:
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
      crashlab serve -- python -m sglang.launch_server \\
          --model-path Qwen/Qwen3-0.6B
      crashlab serve --user-dumps --restart on-crash -- \\
          python -m sglang.launch_server ...
      crashlab serve --coredump full -- ./my_cuda_program
      crashlab serve --deployment pd-1 -- python -m sglang.launch_server \\
          --disaggregation-mode prefill ...
      crashlab serve --user-dumps --hang-after 120 -- \\
          python -m sglang.launch_server ...
    """
    from ..supervise.command import run
    from ..supervise.options import ServeOptions

    sys.exit(run(ServeOptions.from_command_line(**options), say))
