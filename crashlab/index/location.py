"""Where the crash index lives: ``--db``, else CRASHLAB_DB, else one SQLite file beside the runs
directory, and how its address is shown (never with its password)."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: The environment variable that points every verb (and every node) at one index.
ENV_VAR = "CRASHLAB_DB"
#: The default index's file name, in the folder that holds the runs directory: a runs directory
#: holds only run directories, and `crashlab gc` may empty it, so the index stays out of it.
DEFAULT_NAME = "crashlab-index.sqlite"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def resolve(db: str | None, runs_dir: Path) -> str:
    """The index's address: a postgresql:// URL, or the path of a SQLite file."""
    chosen = db or os.environ.get(ENV_VAR) or ""
    if chosen:
        return chosen
    return str(Path(runs_dir).absolute().parent / DEFAULT_NAME)


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
