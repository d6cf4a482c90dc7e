"""The web view as a WSGI application: Werkzeug's routing and responses, Jinja2's templates
with autoescape on (every value from a dump or a log is text, never markup) and a finalize hook
that shows what does not print escaped in every value a template writes (:func:`shown`). GET
only: the index is opened read-only and no route writes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from werkzeug.exceptions import BadRequest, HTTPException, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.utils import send_file
from werkzeug.wrappers import Request, Response

from ..errors import BadInput
from ..escape import escape, escape_keeping_lines
from ..index.facets import shown_value
from ..index.store import Index
from ..notation import counted
from ..owner.fixes import is_web_link
from ..report import text, why
from ..report.advice import advice_line
from ..report.suspects import suspect_items
from ..textsize import with_bytes
from ..version import __version__
from ..wrap import break_points
from . import pages

ROUTES = Map([
    Rule("/", endpoint="home", methods=["GET"]),
    Rule("/signature/<hash_>", endpoint="signature", methods=["GET"]),
    Rule("/crash/<int:crash_id>", endpoint="crash", methods=["GET"]),
    Rule("/crash/<int:crash_id>/incident", endpoint="incident", methods=["GET"]),
    Rule("/crash/<int:crash_id>/file/<int:number>", endpoint="file", methods=["GET"]),
    Rule("/favicon.ico", endpoint="favicon", methods=["GET"]),
])


def shown(value: Any) -> Any:
    """Every value a template writes, as every view shows text from outside: a bidirectional
    control (U+202E would reverse the page's own facts around it), a C0 or C1 control (ESC,
    BEL) and whatever else does not print, escaped (``\\u202e``); line breaks and tabs kept.
    Markup (a chart) is escaped the same way and stays markup: no such character is part of
    HTML's syntax."""
    if isinstance(value, Markup):
        return Markup(escape_keeping_lines(str(value)))
    if isinstance(value, str):
        return escape_keeping_lines(value)
    return value


def templates() -> Environment:
    environment = Environment(loader=PackageLoader("crashlab.ui", "templates"),
                              autoescape=select_autoescape(default=True, default_for_string=True),
                              finalize=shown)
    # a facet's value as every view prints it (an uptime's hour as "2-3 h")
    environment.globals["shown_value"] = shown_value
    # the why's labelled lines and the facts' wording, as the terminal and Markdown views print
    # them; sizes readable and exact, as the command line writes them
    environment.globals["why_lines"] = why.lines
    environment.globals["text"] = text
    environment.globals["advice_line"] = advice_line
    environment.globals["with_bytes"] = with_bytes
    environment.globals["counted"] = counted
    environment.globals["suspect_items"] = suspect_items
    environment.filters["breakable"] = breakable
    # a report from elsewhere may name a fix's link as javascript:...: only http(s) is a link
    environment.tests["web_link"] = is_web_link
    return environment


def breakable(name: object) -> Markup:
    """A C++ name or a path, escaped, with a line-break opportunity after each ``::``, comma,
    ``(``, ``<`` or ``/`` (crashlab.wrap's rule, as the terminal breaks it): a long template name
    wraps at its boundaries and never inside an identifier or a number."""
    value = str(name)
    cuts = [0, *break_points(value)]
    return Markup("<wbr>").join(Markup.escape(value[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)
                                if b > a)


class WebView:
    """The WSGI application over one index opened read-only, answering only to HOSTS, the names
    it is reached by."""

    def __init__(self, index: Index, hosts: Set[str]):
        self.index = index
        self.hosts = hosts
        self.templates = templates()
        self.templates.globals.update(version=__version__, address=index.address)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        request = Request(environ)
        try:
            if not self._addressed_to_us(environ):
                raise BadRequest(f"this server answers to {', '.join(sorted(self.hosts))} only")
            endpoint, arguments = ROUTES.bind_to_environ(environ).match()
            response = getattr(self, f"_{endpoint}")(request, **arguments)
        except HTTPException as exc:
            response = self._page("missing.html", status=exc.code or 500, heading=exc.name,
                                  message=exc.description or "")
        except BadInput as exc:
            response = self._page("missing.html", status=404, message=str(exc))
        return response(environ, start_response)

    def _addressed_to_us(self, environ: dict) -> bool:
        """DNS rebinding: a page the on-call visits may point its own name at this machine and
        read the index through it; the browser then sends that name as Host, never one of ours."""
        try:
            host = urlsplit("//" + environ.get("HTTP_HOST", ""))
            port = host.port or 80
        except ValueError:
            return False
        return host.hostname in self.hosts and str(port) == environ.get("SERVER_PORT")

    def _page(self, template: str, status: int = 200, **values: Any) -> Response:
        body = self.templates.get_template(template).render(**values)
        return Response(body, status=status, mimetype="text/html")

    def _home(self, request: Request) -> Response:
        since = request.args.get("since", "7d")
        try:
            start = pages.window_start(since)
        except BadInput:
            return self._page("missing.html", status=400, heading="Bad request",
                              message=f"since takes an age (2h, 3d), an ISO date (2026-11-23) or "
                                      f"'all'; '{since}' is none of them")
        return self._page("home.html", since=since, top=pages.top_signatures(self.index, start))

    def _signature(self, request: Request, hash_: str) -> Response:
        """A signature's page; a coarse key's lists the signatures under it."""
        column, key = self.index.signature_key(hash_)
        if column == "coarse":
            return self._page("coarse.html", coarse=key,
                              signatures=self.index.signatures_under(key))
        return self._page("signature.html", page=pages.signature_page(self.index, key))

    def _crash(self, request: Request, crash_id: int) -> Response:
        return self._page("crash.html", page=pages.crash_page(self.index, crash_id))

    def _incident(self, request: Request, crash_id: int) -> Response:
        incident = pages.incident_page(self.index, crash_id)
        if incident is None:
            raise NotFound(f"crash {crash_id} is in no incident")
        return self._page("incident.html", incident=incident, crash_id=crash_id,
                          timeline=pages.timeline(incident))

    def _favicon(self, request: Request) -> Response:
        """Browsers ask for one on every first visit: no icon, and no 404 in the log for it."""
        return Response(status=204)

    def _file(self, request: Request, crash_id: int, number: int) -> Response:
        try:
            return send_file(pages.crash_file(self.index, crash_id, number), request.environ,
                             as_attachment=True)
        except OSError as exc:
            raise NotFound(f"file {number} of crash {crash_id} cannot be read: "
                           f"{escape(str(exc))}") from None
