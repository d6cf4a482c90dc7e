"""POST JSON over keep-alive connections with the stdlib's http.client: the sender's transport.

Why not requests (which the health checks use): at the rates a replay must hold, the client's
CPU time per request decides how late the sends get. On the development machine, 1,000
sequential POSTs to the stand-in server cost 0.69 ms of CPU each through a requests.Session
(with trust_env off), 0.36 ms through urllib3 and 0.16 ms through http.client: CPU enough,
under the GIL, for about 1,400 or about 6,000 requests a second from one process.

A request is never sent twice. Each thread keeps one connection; before a request is written
on a reused one, the socket is polled: a server that closed it while idle (a keep-alive timeout)
has left an EOF or a reset there, and the connection is replaced before any byte is written.
Once a byte may have been written, a failure is final (``sent=True``): the server may have
read the request, and a retry could run it twice (a second prefill of the crashing batch).
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
_ERROR_EXCERPT = 300
_DROPPED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
            ConnectionAbortedError, http.client.IncompleteRead)


class ConnectionLost(Exception):
    """The server refused the connection or dropped it before answering.

    ``sent`` says whether any byte of the request may have reached it.
    """

    def __init__(self, message: str, sent: bool):
        super().__init__(message)
        self.sent = sent


class TimedOut(Exception):
    def __init__(self, sent: bool = True):
        super().__init__("timed out")
        self.sent = sent


@dataclass
class Reply:
    status: int
    payload: object = None  # the JSON body, or the last event of an SSE stream
    error: str | None = None


@dataclass
class Delivery:
    """When the request's first byte was handed to the socket (monotonic), if it was."""

    written_at: float | None = None


def stale(sock: socket.socket | None) -> bool:
    """True if an idle keep-alive socket was closed or reset by the server (nothing is pending
    on an idle HTTP/1.1 connection, so anything readable is an EOF, a reset or garbage)."""
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class Client:
    def __init__(self, url: str, timeout: float, headers: Mapping[str, str] | None = None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.headers = {**_HEADERS, **(headers or {})}
        self.local = threading.local()
        self.reconnects = 0  # idle connections found closed and replaced before a send

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's connection, connected; ConnectionLost(sent=False) if that fails."""
        connection = getattr(self.local, "connection", None)
        if connection is not None and stale(connection.sock):
            self._drop()
            self.reconnects += 1
            connection = None
        if connection is None:
            kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            connection = kind(self.host, self.port, timeout=self.timeout)
            try:
                connection.connect()
            except ConnectionRefusedError as problem:
                raise ConnectionLost("connection refused", sent=False) from problem
            except TimeoutError as problem:
                raise TimedOut(sent=False) from problem
            except OSError as problem:
                raise ConnectionLost(f"could not connect ({problem})", sent=False) from problem
            self.local.connection = connection
        return connection

    def _drop(self) -> None:
        connection = getattr(self.local, "connection", None)
        if connection is not None:
            connection.close()
            self.local.connection = None

    def post(self, path: str, body: dict, stream: bool, delivery: Delivery | None = None) -> Reply:
        """One POST, written at most once. Raises ConnectionLost or TimedOut (with ``sent``)."""
        data = json.dumps(body).encode()
        delivery = delivery or Delivery()
        connection = self._connection()
        delivery.written_at = time.monotonic()
        try:
            connection.request("POST", self.prefix + path, body=data, headers=self.headers)
            answer = connection.getresponse()
        except _DROPPED as problem:
            self._drop()
            raise ConnectionLost("connection closed by the server after the request was sent",
                                 sent=True) from problem
        except TimeoutError as problem:
            self._drop()
            raise TimedOut() from problem
        except OSError:
            self._drop()
            raise
        try:
            return self._read(answer, stream, delivery.written_at)
        except _DROPPED as problem:
            self._drop()
            raise ConnectionLost("connection dropped during the answer", sent=True) from problem
        except (TimeoutError, TimedOut) as problem:
            self._drop()
            raise TimedOut() from problem

    def _read(self, answer: http.client.HTTPResponse, stream: bool, started: float) -> Reply:
        if answer.status != 200:
            text = answer.read().decode("utf-8", "replace")
            return Reply(answer.status, error=text[:_ERROR_EXCERPT])
        if not stream or "event-stream" not in (answer.getheader("Content-Type") or ""):
            return Reply(answer.status, payload=json.loads(answer.read()))
        last = None
        while True:
            if time.monotonic() - started > self.timeout:
                raise TimedOut()
            line = answer.readline()
            if not line:
                break
            if line.startswith(b"data:"):
                event = line[5:].strip()
                if event == b"[DONE]":
                    answer.read()  # drain the end of the stream, keeping the connection usable
                    break
                last = json.loads(event)
        return Reply(answer.status, payload=last)
