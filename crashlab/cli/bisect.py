"""crashlab bisect: which commit or release brought a crash, judged by replaying its reproducer."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..guard import GuardedCommand
from .options import POSITIVE, json_option, oracle_timing_options, out_option

#: --install's default: the release alone, into its environment (the base supplies the rest)
DEFAULT_INSTALL = "{python} -m pip install --quiet --no-deps --ignore-installed sglang=={version}"


@click.command(cls=GuardedCommand)
@click.option("--good", help="A commit where the crash does not happen.")
@click.option("--bad", help="A commit where it does.")
@click.option("--check-fix", metavar="REV",
              help="Instead of bisecting: does REV (a commit, a branch, a fetched PR ref) fix the "
                   "crash its parent shows? fixed, not fixed, or another crash.")
@click.option("--repo", type=click.Path(file_okay=False), default=".", show_default=True,
              help="The git checkout to bisect (its work tree must be clean).")
@click.option("--dump", required=True, type=click.Path(dir_okay=False),
              help="The reproducer: an SGLang crash dump (a --minimize'd one is faster).")
@click.option("--url", default="http://127.0.0.1:30000", show_default=True,
              help="Where the launched server answers.")
@click.option("--build", help="Shell command run in --repo after each checkout (default: none, "
                              "as an editable install needs; a failed build skips the commit).")
@click.option("--versions", metavar="V1,V2,...",
              help="Bisect releases instead of commits, oldest first: each installed by --install "
                   "into an environment of its own; the launch command names its interpreter "
                   "{python}.")
@click.option("--install", default=DEFAULT_INSTALL, show_default=True,
              help="With --versions: the shell command that installs {version} with {python}.")
@click.option("--base-python", metavar="PYTHON",
              help="With --versions: the interpreter whose packages (the server's dependencies) "
                   "each release's environment shares [default: the one crashlab runs on].")
@click.option("--releases-dir", type=click.Path(file_okay=False),
              help="With --versions: where the environments are kept between bisects "
                   "[default: ~/.cache/crashlab/bisect-releases].")
@click.option("--clear-cache", multiple=True, type=click.Path(file_okay=False),
              help="A folder emptied before each step, e.g. a JIT cache such as "
                   "~/.cache/flashinfer (repeatable).")
@click.option("--repeat", type=click.IntRange(min=1), default=4, show_default=True,
              help="Runs on --bad, to measure how often the crash reproduces: more runs bound "
                   "its rate closer and ask fewer clean runs of a good verdict (4/4: 5, 10/10: 3).")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="How sure a good verdict must be, against the lowest reproduction rate the "
                   "runs on --bad allow at this confidence.")
@click.option("--max-runs", type=click.IntRange(min=1), default=30, show_default=True,
              help="At most this many runs per commit, whatever the confidence asks.")
@click.option("--expect", multiple=True,
              help="Regular expression the crash's fault lines must match to count as bad "
                   "(repeatable; default: the crash --bad shows).")
@click.option("--expect-kernel", help="The kernel the crash faults in.")
@oracle_timing_options
@click.option("--start-timeout", type=POSITIVE, default=600.0, show_default=True,
              help="Seconds the launch command may take to answer /health.")
@out_option("output", click.Path(file_okay=False),
            "The folder of the step log (steps.jsonl) and each step's build and server logs "
            "[default: crashlab-bisect].")
@json_option("Print the verdict as JSON (schema: crashlab schema bisect).")
@click.argument("launch", nargs=-1, required=False)
def bisect(**options: Any) -> None:
    """Find the commit (or release) that brought a crash: check out, build, serve, replay,
    judge, halve.

    Each step replays --dump against the server LAUNCH starts (the words after --) and judges
    by the crash's signature (serve's, else replay's oracle): the crash --bad shows is bad, no
    crash in enough runs is good, another crash is skipped (named, never blamed). Exit codes: 0 the first bad commit
    found, 1 inconclusive, 2 bad input (a dirty work tree included), 3 no server. With
    --check-fix: 0 fixed, 1 not fixed, another crash, or the parent does not crash.

    \b
    Examples:
      crashlab bisect --good v0.5.12 --bad main --repo ~/sglang \\
          --dump crash.min.pkl --build "pip install -e python --no-deps" -- \\
          python -m sglang.launch_server --model-path M --port 30000
      crashlab bisect --check-fix pr-1234 --repo ~/sglang \\
          --dump crash.min.pkl -- \\
          python -m sglang.launch_server --model-path M --port 30000
      crashlab bisect --versions 0.5.20,0.5.21,0.5.22,0.5.23 \\
          --dump crash.min.pkl -- \\
          {python} -m sglang.launch_server --model-path M --port 30000
    """
    from ..bisect.command import run
    from ..bisect.options import BisectOptions

    options["output"] = options["output"] or "crashlab-bisect"
    sys.exit(run(BisectOptions.from_command_line(**options)))
