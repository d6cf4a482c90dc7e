"""crashlab replay: load an SGLang crash dump safely, replay it, minimize it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..guard import GuardedCommand
from ..hardening import PROFILES
from .options import POSITIVE, json_option, oracle_timing_options, out_option


@click.command(cls=GuardedCommand, subject="dump")
@click.argument("dump", type=click.Path())
@click.option("--list", "as_list", is_flag=True,
              help="List the requests, replay nothing (the default without --url); with --json "
                   "as JSON (schema: crashlab schema listing).")
@json_option("Print JSON: the dump's requests, or with --url the replay result (schema: "
             "crashlab schema listing / replay).")
@click.option("--url", help="Server to replay against, e.g. http://127.0.0.1:30000.")
@click.option("--speed", type=POSITIVE, default=1.0, show_default=True,
              help="Divide the recorded arrival gaps by this.")
@click.option("--max-rate", type=POSITIVE, help="Ignore recorded times: send at this many requests/s.")
@click.option("--concurrency", type=click.IntRange(min=1),
              help="At most this many requests in flight (alone: as fast as that allows).")
@click.option("--timeout", type=POSITIVE, default=120.0, show_default=True,
              help="Seconds one request may take.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Replay N times and report k/N reproductions.")
@click.option("--watch-cores", type=click.Path(file_okay=False, path_type=Path),
              help="A new file under this folder counts as a crash (CUDA coredumps).")
@click.option("--watch-log", type=click.Path(dir_okay=False, path_type=Path),
              help="A fault line appended to this log counts as a crash.")
@click.option("--fault-pattern", multiple=True, help="Another regular expression for --watch-log.")
@click.option("--pid", type=int, help="The server's process id: its exit counts as a crash.")
@oracle_timing_options
@click.option("--restart-cmd", help="Shell command that starts the server; crashlab restarts it "
                                    "before each attempt and stops it at the end.")
@click.option("--start-timeout", type=POSITIVE, default=600.0, show_default=True,
              help="Seconds --restart-cmd may take to answer /health.")
@click.option("--api-key", envvar="CRASHLAB_API_KEY", metavar="KEY",
              help="The server's --api-key, sent as a bearer token [default: the --api-key of "
                   "--restart-cmd; env CRASHLAB_API_KEY]. Masked in every output.")
@click.option("--minimize", "do_minimize", is_flag=True,
              help="Shrink the dump to a minimal reproducing set (needs --restart-cmd).")
@click.option("--budget", default="50", show_default=True,
              help="--minimize trials (40) or wall time (30m).")
@out_option("output", click.Path(dir_okay=False),
            "Where --minimize writes the minimal dump [default: DUMP with .min.pkl].")
@click.option("--late-threshold", type=click.FloatRange(min=0), default=50.0, show_default=True,
              help="Milliseconds: an attempt whose p99 send lateness exceeds this did not keep "
                   "its schedule (said in the result).")
@click.option("--force-decode", type=click.Choice(["auto", "trace", "length", "off"]),
              default="auto", show_default=True,
              help="Generate the recorded number of tokens: trace (the recorded ids, "
                   "trace_decode_token_ids), length (min = max new tokens, ignore_eos), auto (trace "
                   "if the server takes it, else length; off when nothing was recorded).")
@click.option("--expect", multiple=True,
              help="Regular expression the replay's fault lines must match to count as reproduced "
                   "(repeatable; default: the run directory's triage, if the dump is in one).")
@click.option("--expect-kernel", help="The kernel the recorded crash faulted in.")
@click.option("--any-crash", is_flag=True, help="Count any crash as reproduced (no expected crash).")
@click.option("--harden", type=click.Choice(list(PROFILES)), is_flag=False,
              flag_value="all", default=None,
              help="Run --restart-cmd under compute-sanitizer (memcheck, coredumps on) and/or "
                   "SGLang's debug switches; --harden alone is all. Put it after DUMP.")
def replay(**options: Any) -> None:
    """Load an SGLang crash dump safely, replay it against a server, minimize it.

    DUMP is a crash_dump_<time>.pkl from SGLang's --crash-dump-folder (0.5.6 to 0.5.23). It is
    read without importing sglang and without running anything it names. Exit codes: 0 the
    crash reproduced (or the dump was listed), 1 it did not, 2 bad input, 3 no server.

    \b
    Examples:
      crashlab replay crash_dump.pkl --list
      crashlab replay crash_dump.pkl --url http://127.0.0.1:30000 \\
          --watch-log server.log
      crashlab replay crash_dump.pkl --url http://127.0.0.1:30000 \\
          --max-rate 200 --repeat 5 \\
          --restart-cmd "python -m sglang.launch_server --model-path M"
      crashlab replay crash_dump.pkl --url http://127.0.0.1:30000 \\
          --minimize --budget 30m \\
          --restart-cmd "python -m sglang.launch_server --model-path M"
      crashlab replay crash_dump.pkl --url http://127.0.0.1:30000 \\
          --harden sanitizer --expect "illegal memory access" \\
          --restart-cmd "python -m sglang.launch_server ..."
    """
    from ..replay.command import run
    from ..replay.options import ReplayOptions

    sys.exit(run(ReplayOptions.from_command_line(**options)))
