"""The options several verbs share, declared once: each is a decorator that adds the option to a
command, with the same name, type and default wherever it appears (its help may say what it
prints there)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..incidents.window import DEFAULT_WINDOW as DEFAULT_INCIDENT_WINDOW

#: what an option decorates: the command's function (or a command already made of it)
Decorated = TypeVar("Decorated", bound=Callable[..., Any])

#: A count of seconds (or a factor) that must be more than zero.
POSITIVE = click.FloatRange(min=0, min_open=True)

#: Where ``--output`` (``--out``'s former name) leaves its value for ``--out`` to take.
_OUT_ALIAS = "crashlab.out_alias"


def db_option(command: Decorated) -> Decorated:
    """--db: where the crash index is (crashlab.index.location), the same on every verb."""
    return click.option(
        "--db", metavar="FILE|URL",
        help="The crash index: a SQLite file, or postgresql://user@host/db for a fleet "
             "[default: env CRASHLAB_DB, else crashlab/index.sqlite in "
             "${XDG_DATA_HOME:-~/.local/share}, or an older crashlab's index beside the runs "
             "directory while it is there].")(command)


def incident_window_option(command: Decorated) -> Decorated:
    """--incident-window: serve records it; list --incidents and show group with it."""
    return click.option(
        "--incident-window", type=click.FloatRange(min=0), default=DEFAULT_INCIDENT_WINDOW,
        show_default=True, metavar="SECONDS",
        help="Crashes of a deployment's servers (or, without --deployment, of one host) "
             "within this many seconds of an incident's first failure join it.")(command)


def _named(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A host name or label, not the next option taken as one (``--host --copy``), nor empty."""
    if value is not None and not value.strip():
        raise click.BadParameter("cannot be empty")
    if value is not None and value.startswith("-"):
        raise click.BadParameter(f"{value!r} is not a name (is the name missing?)")
    return value


def origin_options(where: str) -> Callable[[Decorated], Decorated]:
    """--host and --deployment: where a dump read on its own crashed, for the index (WHERE says
    when they apply). Without them the host is recorded as unknown, never the reading machine."""

    def decorate(command: Decorated) -> Decorated:
        command = click.option(
            "--deployment", metavar="LABEL", callback=_named,
            help=f"{where}: the deployment the crashed server belonged to (as serve "
                 "--deployment names it).")(command)
        return click.option(
            "--host", metavar="NAME", callback=_named,
            help=f"{where}: the host the dump crashed on (a dump copied off node7: --host "
                 "node7). A dump in a serve run directory takes the run's host; otherwise, "
                 "without --host, the host is recorded as unknown, never this machine's.")(command)

    return decorate


def runs_dir_option(help: str) -> Callable[[Decorated], Decorated]:
    """--runs-dir: serve's runs directory, where list, show, gc and doctor look for it."""
    return click.option("--runs-dir", type=click.Path(path_type=Path),
                        default=Path("crashlab-runs"), show_default=True, help=help)


def json_option(help: str) -> Callable[[Decorated], Decorated]:
    """--json: print the verb's result as JSON (its help names the schema)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def markdown_option(help: str) -> Callable[[Decorated], Decorated]:
    """--markdown: print the verb's result as Markdown for an issue body."""
    return click.option("--markdown", "as_markdown", is_flag=True, help=help)


def python_option(help: str) -> Callable[[Decorated], Decorated]:
    """--python: the interpreter whose packages env and doctor look at."""
    return click.option("--python", "python", metavar="PATH", help=help)


def out_option(name: str, path: click.Path, help: str) -> Callable[[Decorated], Decorated]:
    """--out (-o), the place a verb writes, into parameter NAME; and --output, replay's former
    name for it, unlisted, kept for scripts that use it. --out wins where both are given."""

    def keep_alias(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.meta[_OUT_ALIAS] = value

    def out_or_alias(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        # click processes the options given on the command line before those left out, so a
        # given --output has been kept by the time an absent --out is processed
        return value if value is not None else ctx.meta.get(_OUT_ALIAS)

    def decorate(command: Decorated) -> Decorated:
        command = click.option("--output", "former_out", type=path, hidden=True,
                               expose_value=False, callback=keep_alias,
                               help="--out's former name, kept for scripts that use it.")(command)
        return click.option("--out", "-o", name, type=path, callback=out_or_alias,
                            help=help)(command)

    return decorate


def oracle_timing_options(command: Decorated) -> Decorated:
    """--health-interval, --health-timeout, --settle: how patiently the crash oracle watches a
    replayed server (replay, and bisect's replays)."""
    for option in reversed((
        click.option("--health-interval", type=POSITIVE, default=1.0, show_default=True,
                     help="Seconds between /health checks."),
        click.option("--health-timeout", type=POSITIVE, default=20.0, show_default=True,
                     help="A /health slower than this counts as a crash (SGLang's own limit is "
                          "20 s)."),
        click.option("--settle", type=click.FloatRange(min=0), default=3.0, show_default=True,
                     help="Seconds to keep watching after the last answer."),
    )):
        command = option(command)
    return command
