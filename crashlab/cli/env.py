"""crashlab env and crashlab doctor: the machine a crash happens on, described and checked."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import EXIT_FOUND, EXIT_NOTHING, BadInput
from ..guard import GuardedCommand
from .options import POSITIVE, json_option, markdown_option, python_option, runs_dir_option


@click.command(cls=GuardedCommand)
@json_option("Print the Environment as JSON (schema: crashlab schema environment).")
@markdown_option("Print a fenced block of check_env-style lines for an issue body.")
@python_option("The interpreter whose packages to report (the server's, e.g. a venv's "
               "bin/python) [default: crashlab's own].")
@click.option("--timeout", type=POSITIVE, show_default="CRASHLAB_TOOL_TIMEOUT, else 2",
              help="Seconds each tool (nvidia-smi, nvcc, the interpreter) may take; they run at once.")
def env(as_json: bool, as_markdown: bool, python: str | None, timeout: float | None) -> None:
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
    from ..env.capture import capture_of

    if as_json and as_markdown:
        raise BadInput("choose one of --json and --markdown")
    from ..stdout import echo

    environment = capture_of(python, timeout=timeout)
    if as_json:  # rich is not needed for JSON
        echo(environment.model_dump_json(indent=2))
        return
    from ..console import ViewConsole
    from ..env import views

    if as_markdown:
        echo(views.markdown(environment), nl=False)
    else:
        views.render(environment, ViewConsole())


@click.command(cls=GuardedCommand)
@json_option("Print the results as JSON (schema: crashlab schema doctor).")
@runs_dir_option("The runs directory crashlab serve will use: its free space is checked "
                 "against the GPUs' memory.")
@python_option("The interpreter that runs the server (e.g. a venv's bin/python), whose "
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
      crashlab doctor --python /opt/venvs/sglang/bin/python \\
          --runs-dir /data/crashlab-runs
      crashlab doctor --json | jq '.checks[] | select(.status == "finding")'
    """
    from ..env.doctor import machine_for, run_checks
    from ..stdout import echo

    report = run_checks(machine_for(runs_dir, python, cmake_cache))
    if as_json:
        echo(report.model_dump_json(indent=2))
    else:
        from ..console import ViewConsole
        from ..env.doctor_view import render

        render(report, ViewConsole())
    sys.exit(EXIT_NOTHING if report.findings else EXIT_FOUND)
