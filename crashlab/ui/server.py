"""``crashlab ui`` as the command line runs it: the index opened read-only, the web view served
on 127.0.0.1 unless --public names another address (then with a warning: the page shows every
crash's paths and hosts, with no login)."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from ..errors import BadInput, EnvironmentProblem
from ..index.location import resolve
from ..index.store import Index

#: addresses that keep the page on this machine
LOOPBACK = ("127.0.0.1", "::1", "localhost")
#: addresses that listen on every interface of this machine
EVERYWHERE = ("0.0.0.0", "::")


def host_names(host: str) -> frozenset[str]:
    """The names a browser may reach the server by (its Host header), for the web view to
    answer to none other: the loopback names, the --host given, and on every interface this
    machine's own names and addresses."""
    names = {host.lower().strip("[]")}
    if host in LOOPBACK or host in EVERYWHERE:
        names.update(LOOPBACK)
    if host in EVERYWHERE:
        names.update(name.lower() for name in (socket.gethostname(), socket.getfqdn()))
        with contextlib.suppress(OSError):  # a name that resolves to nothing: its names only
            names.update(str(found[4][0]) for found in socket.getaddrinfo(socket.gethostname(), None))
    return frozenset(names)


def serve(db: str | None, runs_dir: Path, host: str, port: int, public: bool,
          say: Callable[[str], None]) -> None:
    """Serve until interrupted. Werkzeug's server, one request at a time: the page reads one
    connection to the index, and an on-call's few readers need no more."""
    try:
        from werkzeug import serving
        from werkzeug.serving import make_server

        from .app import WebView
    except ImportError as exc:
        missing = (exc.name or "jinja2").split(".")[0]
        raise EnvironmentProblem(f"crashlab ui needs {missing}: pip install 'crashlab[ui]'") \
            from None
    if host not in LOOPBACK and not public:
        raise BadInput(f"--host {host} would show the index to other machines: add --public "
                       "to mean it")
    # werkzeug colours each request line with ANSI codes wherever it writes, and this module
    # switch is its only control: into a file or a pipe the codes are noise
    serving._log_add_style = sys.stderr.isatty()
    with Index(resolve(db, runs_dir, say), create=False, read_only=True) as index:
        try:
            server = make_server(host, port, WebView(index, host_names(host)))
        except OSError as exc:
            raise EnvironmentProblem(f"crashlab ui cannot listen on {host}:{port}: "
                                     f"{exc.strerror or exc}") from None
        if host not in LOOPBACK:
            say(f"warning: serving the crash index on {host}, to anyone who can reach it, with "
                "no login")
        say(f"serving http://{host}:{server.server_port}/ (index {index.address}, read-only); "
            "Ctrl-C stops it")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
