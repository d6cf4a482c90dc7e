"""crashlab ui: a read-only web page over the crash index."""

from __future__ import annotations

from pathlib import Path

import click

from ..guard import GuardedCommand, say
from .options import db_option, runs_dir_option


@click.command(cls=GuardedCommand)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; another than this machine's needs --public.")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=8028, show_default=True,
              help="The port to listen on (0: any free one, said on start).")
@click.option("--public", is_flag=True,
              help="Allow --host to be an address other machines reach: the page has no login.")
@db_option
@runs_dir_option("The runs directory, where an older crashlab's index may lie.")
def ui(host: str, port: int, public: bool, db: str | None, runs_dir: Path) -> None:
    """Serve a read-only web page of the crash index: the top signatures, each signature's
    facets and charts, each crash's triage and files, each incident's timeline.

    It opens the index read-only and binds 127.0.0.1 unless --host and --public say otherwise.
    Needs the ui extra: pip install 'crashlab[ui]'.

    \b
    Examples:
      crashlab ui
      crashlab ui --db postgresql://crashlab@db.internal/crashes --port 8080
      crashlab ui --host 0.0.0.0 --public
    """
    from ..ui.server import serve

    serve(db, runs_dir, host, port, public, say)
