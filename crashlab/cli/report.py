"""crashlab report: an upstream issue's body and the bundle to attach beside it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..guard import GuardedCommand, say
from .options import db_option, json_option, origin_options, out_option


@click.command(cls=GuardedCommand, subject="inputs")
@click.argument("inputs", nargs=-1, type=click.Path())
@out_option("out", click.Path(file_okay=False, path_type=Path),
            "Folder for the body and the bundle [default: the current folder].")
@click.option("--max-size", default="25MB", show_default=True,
              help="Largest bundle (GitHub takes attachments up to 25 MB): e.g. 10MB, 500k.")
@click.option("--anonymize", is_flag=True,
              help="Also replace host and user names, home folders, IP addresses, and the "
                   "requests' texts and token ids (lengths, sampling parameters and timing kept).")
@click.option("--this-machine", is_flag=True,
              help="Also describe the machine the report is made on, labelled as such (by "
                   "default the environment is the crashed machine's: the run's and the coredump's).")
@json_option("Print a JSON summary instead of the body (schema: crashlab schema report-bundle).")
@click.option("--no-explain", is_flag=True,
              help="Skip the explanation of each coredump's faults.")
@click.option("--kernel-log", "kernel_log", type=click.Path(dir_okay=False),
              help="A file of dmesg, journalctl -k or syslog text from the crashed node: its Xid "
                   "lines are decoded (the GPU's UUID and serial withheld) and held against the "
                   "coredump's faults; with no coredump they triage the incident themselves.")
@origin_options("For coredumps given on their own")
@db_option
def report(as_json: bool, db: str | None, host: str | None, deployment: str | None,
           **options: Any) -> None:
    """Write an upstream issue: a Markdown body and one .tar.gz to attach beside it.

    INPUTS are serve run directories, crashlab bisect output folders (--out, with result.json
    and steps.jsonl), CUDA coredumps and SGLang request dumps, in any mix. The body (at most
    65,536 characters) follows SGLang's bug template: what happened, reproduction (launch and
    replay commands), the bisect's verdict, environment, triage, logs. The crashes are recorded
    in the crash index (--db). The bundle
    holds report.md, report.json, the environment, log excerpts, each coredump's triage, each
    bisect's result.json and steps.jsonl, and the dumps and request pickles that fit under
    --max-size; the body lists what was left out and where it is. Secrets are masked
    everywhere. The body goes to stdout; the title, the two paths and what the triaging machine
    lacked (no cuda-gdb: not news for upstream) to stderr.

    Exit codes: 0 written, the inputs show a crash; 1 written, they show none (a run that ended
    cleanly); 2 bad input (also a --max-size too small for the report itself); 3 the output
    folder cannot be written.

    \b
    Examples:
      crashlab report crashlab-runs/20261123-201500-node7-4242
      crashlab report core_1754_node_12345.nvcudmp \\
          crash_dump_2026-11-23_20-08-06.pkl
      crashlab report crashlab-runs/20261123-201500-node7-4242 crashlab-bisect
      crashlab report RUN --anonymize --max-size 10MB --out /tmp/issue
      crashlab report core-from-node7.nvcudmp --host node7
      crashlab report crash_dump.pkl --kernel-log node7-journalctl-k.txt
    """
    from ..index.capture import Origin
    from ..issue.command import ReportOptions
    from ..issue.flow import run

    sys.exit(run(ReportOptions.from_command_line(**options), as_json, db, say,
                 Origin(host=host, deployment=deployment)))
