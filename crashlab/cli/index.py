"""crashlab list, show and gc: the crash index read, and its old dumps deleted."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import BadInput
from ..guard import GuardedCommand, say
from .options import (
    db_option,
    incident_window_option,
    json_option,
    markdown_option,
    runs_dir_option,
)

#: --runs-dir where the index verbs look for an older crashlab's index
_runs_dir = runs_dir_option("The runs directory; an index an older crashlab made beside it "
                            "(crashlab-index.sqlite) is used while it is there.")


@click.command(name="list", cls=GuardedCommand)
@click.option("--since", metavar="AGE|DATE", help="Only crashes since then: 2h, 3d, 1w, or an ISO "
                                                  "date or time (UTC unless it says).")
@click.option("--signature", metavar="HASH", help="Only crashes of this signature or coarse key "
                                                  "(a prefix will do).")
@click.option("--host", help="Only crashes on this host.")
@click.option("--limit", type=click.IntRange(min=1),
              help="At most this many (the newest) [default: 50 on the terminal, all with --json].")
@click.option("--incidents", is_flag=True,
              help="Group the crashes into incidents (the ranks of a server, the servers of a "
                   "deployment), newest first, with the driver's Xid lines; --limit counts "
                   "incidents.")
@incident_window_option
@json_option("Print the crashes as JSON (schema: crashlab schema crash-list, or "
             "incident-list with --incidents).")
@db_option
@_runs_dir
def list_command(since: str | None, signature: str | None, host: str | None,
                 limit: int | None, incidents: bool, incident_window: float, as_json: bool,
                 db: str | None, runs_dir: Path) -> None:
    """List recorded crashes, newest first, one line each (like coredumpctl list).

    \b
    Examples:
      crashlab list --since 2h
      crashlab list --signature 3fa2c1 --host node7
      crashlab list --incidents --since 1d
      crashlab list --json --db postgresql://crashlab@db.internal/crashes |
          jq '.crashes[0]'
    """
    from ..index.verbs import list_crashes, list_incidents

    if incidents:
        sys.exit(list_incidents(since, signature, host, limit, incident_window, as_json, db,
                                runs_dir, say))
    sys.exit(list_crashes(since, signature, host, limit, as_json, db, runs_dir, say))


@click.command(cls=GuardedCommand, subject="crash")
@click.argument("what", metavar="ID|SIGNATURE")
@incident_window_option
@json_option("Print it as JSON (its schema: crashlab schema crash-show).")
@markdown_option("Print a signature or coarse key and its facets as Markdown for an issue.")
@db_option
@_runs_dir
def show(what: str, incident_window: float, as_json: bool, as_markdown: bool, db: str | None,
         runs_dir: Path) -> None:
    """Show one recorded crash (its facts, its incident and its report), a signature (how many
    crashes, on which hosts, GPUs, drivers and versions, first and last seen), or a coarse key
    (the signatures under it, which differ only in their site: the same bug where source
    lines moved between releases). A signature or coarse key comes with what stays and what
    varies across its crashes (PC, kernel, rank, GPU, host, driver, versions, model, uptime...)
    and what that allows one to say, with its evidence.

    \b
    Examples:
      crashlab show 42
      crashlab show 3fa2c1d0e9b7
      crashlab show 3fa2c1d0e9b7 --markdown
    """
    from ..index.verbs import show_one

    if as_json and as_markdown:
        raise BadInput("choose one of --json and --markdown")
    show_one(what, incident_window, "json" if as_json else "markdown" if as_markdown else None,
             db, runs_dir, say)


@click.command(cls=GuardedCommand)
@click.option("--keep", type=click.IntRange(min=0), default=3, show_default=True,
              help="Coredumps kept per signature (its first ones).")
@click.option("--max-size", metavar="SIZE",
              help="Disk budget for all kept coredumps, e.g. 200GB (each signature's first dump "
                   "is kept before any second one).")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
@json_option("Print the decisions as JSON (schema: crashlab schema crash-gc).")
@db_option
@_runs_dir
def gc(keep: int, max_size: str | None, dry_run: bool, as_json: bool, db: str | None,
       runs_dir: Path) -> None:
    """Delete the coredumps of known crashes beyond the retention, and mark them gone in the
    index (their crash records stay).

    gc deletes only files crashlab made: those in serve's run directories and the copies
    inspect --record --copy took. A dump recorded by reference (inspect --record, report on
    your own file) is never deleted: past the retention the index forgets it and it stays on
    disk.

    \b
    Examples:
      crashlab gc --dry-run
      crashlab gc --keep 1 --max-size 100GB
    """
    from ..index.verbs import collect_garbage

    collect_garbage(keep, max_size, dry_run, as_json, db, runs_dir, say)
