"""crashlab dump-now: capture a hung server now: host samples of every rank, then its GPU dumps."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..guard import GuardedCommand, say
from .options import POSITIVE, runs_dir_option


@click.command(name="dump-now", cls=GuardedCommand, subject="runs")
@click.argument("runs", nargs=-1, metavar="[RUN]...", type=click.Path(path_type=Path))
@click.option("--deployment", metavar="LABEL",
              help="Every live run of this serve --deployment in --runs-dir, instead of RUN.")
@runs_dir_option("Where --deployment's runs are.")
@click.option("--samples", type=click.IntRange(min=1, max=100), default=3, show_default=True,
              help="Host samples of every rank, --interval apart, before the GPU dumps.")
@click.option("--interval", type=click.FloatRange(min=0), default=5.0, show_default=True,
              metavar="SECONDS", help="From the start of one sample to the start of the next.")
@click.option("--no-gpu-dump", is_flag=True,
              help="Host samples only: no GPU dump, the server keeps running and its pipes "
                   "stay for a later dump.")
@click.option("--no-py-spy", is_flag=True, help="Do not attach py-spy to the ranks.")
@click.option("--attach", is_flag=True,
              help="Also attach cuda-gdb to every rank in every sample (its kernels and warps' "
                   "PCs, without ending it). Intrusive: needs ptrace, and each process, GPU work "
                   "included, is stopped while it is read (at most --source-timeout).")
@click.option("--source-timeout", type=POSITIVE, default=10.0, show_default=True,
              metavar="SECONDS", help="Longest wait for one source (py-spy, a Flight Recorder "
                                      "dump, RAS, NVML) in one sample.")
@click.option("--timeout", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="How long to wait for the GPU dumps to be collected.")
def dump_now(runs: tuple[Path, ...], deployment: str | None, runs_dir: Path, samples: int,
             interval: float, no_gpu_dump: bool, no_py_spy: bool, attach: bool,
             source_timeout: float,
             timeout: float) -> None:
    """Capture a hung server now: host samples of every rank, then one GPU dump of each process.

    RUN is the run directory of a crashlab serve that is still running (several may be given,
    or --deployment). Each capture goes to RUN/captures/<time>/ and the run's manifest: SAMPLES
    host samples of every rank INTERVAL seconds apart (py-spy dump --native, a Flight Recorder
    dump through PyTorch's pipe, an NCCL RAS status query, the GPUs' activity from NVML), then,
    with serve --user-dumps, one GPU coredump of every process through the driver's pipe.

    A GPU DUMP ENDS THE PROCESS IT DUMPS: the driver aborts each process right after its dump
    (SIGABRT), and with skip_abort it lives but its pipe is gone. One GPU dump per process;
    --no-gpu-dump keeps the server running.

    Exit codes: 0 dumps collected (with --no-gpu-dump: a source gave something); 1 triggered but
    none collected in time (nothing at all); 2 RUN is not such a run directory, or one without
    --user-dumps and no --no-gpu-dump; 3 no live pipe (the server has not initialised CUDA, or
    has ended).

    \b
    Examples:
      crashlab dump-now crashlab-runs/20261121-101500-node7-4242
      crashlab dump-now --no-gpu-dump --samples 5 --interval 2 RUN
      crashlab dump-now --no-gpu-dump --attach RUN
      crashlab dump-now --deployment pd-1 --runs-dir crashlab-runs
    """
    from ..supervise.command import dump_now_said
    from ..supervise.hangcapture import CaptureOptions

    options = CaptureOptions(samples=samples, interval=interval, gpu_dump=not no_gpu_dump,
                             py_spy=not no_py_spy, attach=attach, source_timeout=source_timeout,
                             dump_timeout=timeout)
    sys.exit(dump_now_said(list(runs), deployment, runs_dir, options, say))
