"""Where the crash index lives: ``--db``, else CRASHLAB_DB, else one SQLite file in the user's
XDG data folder (the same whatever the working directory), and how its address is shown (never
with its password).

An index at the place older crashlabs used (``crashlab-index.sqlite`` beside the runs
directory) is kept in use, with one line saying so and how to move it: crashes recorded there
are not abandoned by an upgrade.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

#: The environment variable that points every verb (and every node) at one index.
ENV_VAR = "CRASHLAB_DB"
#: The index's file name, in crashlab's XDG data folder.
DEFAULT_NAME = "index.sqlite"
#: The file name older crashlabs gave the index, in the folder that holds the runs directory.
OLD_DEFAULT_NAME = "crashlab-index.sqlite"
#: The folder beside a SQLite index where ``inspect --record --copy`` keeps its copies.
COPIES_FOLDER = "crashlab-copies"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def data_folder() -> Path:
    """crashlab's folder under ``${XDG_DATA_HOME:-~/.local/share}``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "crashlab"


def default_index() -> Path:
    return data_folder() / DEFAULT_NAME


def resolve(db: str | None, runs_dir: Path, notice: Callable[[str], None] | None = None) -> str:
    """The index's address: a postgresql:// URL, or the path of a SQLite file. NOTICE hears
    (once) that an index at the old default place is used instead of the new one."""
    chosen = db or os.environ.get(ENV_VAR) or ""
    if chosen:
        return chosen
    old = Path(runs_dir).absolute().parent / OLD_DEFAULT_NAME
    if old.is_file():
        if notice is not None:
            notice(f"using the index at the old default place {old}; crashlab's default is now "
                   f"{default_index()}: move it there (with its -wal file, crashlab not running) "
                   f"or name it with --db or {ENV_VAR}")
        return str(old)
    return str(default_index())


def copies_folder(address: str) -> Path:
    """Where the index keeps the dumps handed over to it: beside a SQLite index; in crashlab's
    data folder for a PostgreSQL one (a copy is a file on the node that took it)."""
    return (data_folder() if is_postgres(address) else Path(address).absolute().parent) \
        / COPIES_FOLDER


def is_postgres(address: str) -> bool:
    return address.startswith(POSTGRES_SCHEMES)


_PASSWORD_IN_NETLOC = re.compile(r"^(?P<scheme>[a-z]+://)(?P<user>[^:@/]*):(?P<password>[^@/]*)@")
_PASSWORD_PARAMETER = re.compile(r"(?P<key>[?&]password=)(?P<password>[^&]*)", re.IGNORECASE)


def shown(address: str) -> str:
    """The address with any password replaced by ***, for every message and view."""
    masked = _PASSWORD_IN_NETLOC.sub(r"\g<scheme>\g<user>:***@", address)
    return _PASSWORD_PARAMETER.sub(r"\g<key>***", masked)


def _passwords(address: str) -> list[str]:
    found = [_PASSWORD_IN_NETLOC.match(address), _PASSWORD_PARAMETER.search(address)]
    return [match["password"] for match in found if match and match["password"]]


def scrub(text: str, address: str) -> str:
    """A message that may quote the address (a driver's error): address and password masked."""
    text = text.replace(address, shown(address))
    for password in _passwords(address):
        text = text.replace(password, "***")
    return text


def first_line(exc: BaseException, address: str) -> str:
    """An exception's first line, fit for one line on stderr about this index."""
    return scrub((str(exc).strip().splitlines() or [type(exc).__name__])[0], address)
