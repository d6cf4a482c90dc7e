"""``crashlab list``, ``show`` and ``gc`` as the command line runs them: the index opened for
reading, what the verb found printed as JSON or as its terminal view, the exit code back.

``crashlab list`` on SQLite imports neither pydantic nor psycopg (nor, with --json, rich): each
verb imports the models and views it prints inside its function.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import EXIT_FOUND, EXIT_NOTHING, BadInput, CrashlabError
from ..stdout import echo
from .location import resolve
from .since import parse
from .store import Filters, Index, UnknownSignature

Say = Callable[[str], None]

#: crashlab list on a terminal, without --limit: the newest this many
TERMINAL_LIST_LIMIT = 50


class _NothingKnown(CrashlabError):
    """list --signature names no signature the index knows: nothing found (exit 1)."""

    exit_code = EXIT_NOTHING


def list_crashes(since: str | None, signature: str | None, host: str | None, limit: int | None,
                 as_json: bool, db: str | None, runs_dir: Path, say: Say) -> int:
    """crashlab list: the filtered crashes, streamed as JSON or a line each on the terminal."""
    filters, shown_at_most = _list_filters(since, signature, host, limit, as_json)
    with _read_index(db, runs_dir, say, signature) as index:
        if as_json:
            from .streamed import write_crash_list

            write_crash_list(index, filters, sys.stdout.buffer)
            return EXIT_FOUND
        from .views import LIST_FIELDS, crash_list

        rows = [row for batch in index.listed(filters, LIST_FIELDS) for row in batch]
    return _list_on_terminal(rows, shown_at_most, crash_list, "", index.address, say)


def list_incidents(since: str | None, signature: str | None, host: str | None,
                   limit: int | None, window: float, as_json: bool, db: str | None,
                   runs_dir: Path, say: Say) -> int:
    """crashlab list --incidents: the filtered crashes grouped, a block per incident."""
    from .incidents import listing

    filters, shown_at_most = _list_filters(since, signature, host, limit, as_json)
    with _read_index(db, runs_dir, say, signature) as index:
        found = listing(index, filters, window)
    if as_json:
        echo(found.model_dump_json(indent=2))
        return EXIT_FOUND
    from .views import incident_list

    return _list_on_terminal(found.incidents, shown_at_most, incident_list, "incidents ",
                             found.index, say)


def show_one(what: str, window: float, form: str | None, db: str | None, runs_dir: Path,
             say: Say) -> None:
    """crashlab show: one crash, a signature or a coarse key; FORM "json", "markdown" (a
    signature or coarse key only) or None (the terminal view)."""
    from .commands import show
    from .views import shown

    with _read_index(db, runs_dir, say) as index:
        if form == "markdown" and what.isdigit():
            raise BadInput("--markdown shows a signature or coarse key; for one crash's issue: "
                           "crashlab report on its run directory or coredump")
        found = show(index, what, window)
    if form == "markdown":
        from . import markdown

        echo(markdown.shown(found), nl=False)
        return
    _print(found, form == "json", shown)


def collect_garbage(keep: int, max_size: str | None, dry_run: bool, as_json: bool,
                    db: str | None, runs_dir: Path, say: Say) -> None:
    """crashlab gc: the dumps beyond the retention (KEEP per signature, MAX_SIZE in all)
    deleted, or with DRY_RUN only said."""
    from ..textsize import parse_size
    from .commands import collect
    from .retention import Retention
    from .views import collection

    policy = Retention(keep_per_signature=keep,
                       max_bytes=parse_size(max_size) if max_size else None)
    with _read_index(db, runs_dir, say) as index:
        result = collect(index, policy, dry_run)
    _print(result, as_json, collection)


def _list_filters(since: str | None, signature: str | None, host: str | None,
                  limit: int | None, as_json: bool) -> tuple[Filters, int]:
    """list's filters, and how many of what they find to show: on the terminal, one more than
    shown tells whether there were more."""
    shown_at_most = limit or TERMINAL_LIST_LIMIT
    asked = limit if limit or as_json else shown_at_most + 1
    return Filters(since=parse(since) if since else None, signature=signature, host=host,
                   limit=asked), shown_at_most


def _read_index(db: str | None, runs_dir: Path, say: Say, signature: str | None = None) -> Index:
    """The index list, show and gc read: never created by them (a missing one is exit 1). A
    --signature it does not know found nothing: exit 1 too."""
    index = Index(resolve(db, runs_dir, say), create=False)
    try:
        if signature:
            index.signature_key(signature)
    except UnknownSignature as exc:
        index.close()
        raise _NothingKnown(str(exc)) from None
    except BaseException:
        index.close()
        raise
    return index


def _list_on_terminal(found: list, shown_at_most: int, view: Callable[[list, Any], None],
                      what: str, address: str, say: Say) -> int:
    from ..console import ViewConsole
    from .views import heading

    console = ViewConsole()
    heading(address, console)
    view(found[:shown_at_most], console)
    if len(found) > shown_at_most:
        say(f"the newest {shown_at_most} {what}shown; --limit N for more, --json for all")
    return EXIT_FOUND if found else EXIT_NOTHING


def _print(result: Any, as_json: bool, view: Callable[[Any, Any], None]) -> None:
    """What show and gc found: its JSON, or its terminal view."""
    if as_json:
        echo(result.model_dump_json(indent=2))
        return
    from ..console import ViewConsole
    from .views import heading

    console = ViewConsole()
    heading(result.index, console)
    view(result, console)
