"""POST JSON over keep-alive connections with the stdlib's http.client: the sender's transport.

Why not requests (which the health checks use): at the rates a replay must hold, the client's
CPU time per request decides how late the sends get. On the development machine, 1,000
sequential POSTs to the stand-in server cost 0.69 ms of CPU each through a requests.Session
(with trust_env off), 0.36 ms through urllib3 and 0.16 ms through http.client: CPU enough,
under the GIL, for about 1,400 or about 6,000 requests a second from one process.

Each thread keeps one connection. A reused connection the server had already closed (an idle
keep-alive timeout) fails before any answer; that one case is retried once on a new connection,
so that only a refusal or a drop on a fresh connection counts as the server going away.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
_ERROR_EXCERPT = 300
_DROPPED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
            ConnectionAbortedError, http.client.IncompleteRead)


class ConnectionLost(Exception):
    """The server refused the connection or dropped it before answering."""


class TimedOut(Exception):
    pass


@dataclass
class Reply:
    status: int
    payload: object = None  # the JSON body, or the last event of an SSE stream
    error: str | None = None


class Client:
    def __init__(self, url: str, timeout: float):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.local = threading.local()

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection and whether it has carried a request before."""
        connection = getattr(self.local, "connection", None)
        if connection is not None:
            return connection, True
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        connection = self.local.connection = kind(self.host, self.port, timeout=self.timeout)
        return connection, False

    def _drop(self) -> None:
        connection = getattr(self.local, "connection", None)
        if connection is not None:
            connection.close()
            self.local.connection = None

    def post(self, path: str, body: dict, stream: bool) -> Reply:
        data = json.dumps(body).encode()
        started = time.monotonic()
        for attempt in (1, 2):
            connection, reused = self._connection()
            try:
                connection.request("POST", self.prefix + path, body=data, headers=_HEADERS)
                answer = connection.getresponse()
            except _DROPPED as problem:
                self._drop()
                if reused and attempt == 1:
                    continue  # a stale keep-alive connection: once more on a fresh one
                raise ConnectionLost("connection reset by the server") from problem
            except ConnectionRefusedError as problem:
                self._drop()
                raise ConnectionLost("connection refused") from problem
            except (socket.timeout, TimeoutError) as problem:
                self._drop()
                raise TimedOut() from problem
            except OSError:
                self._drop()
                raise
            try:
                return self._read(answer, stream, started)
            except _DROPPED as problem:
                self._drop()
                raise ConnectionLost("connection dropped during the answer") from problem
            except (socket.timeout, TimeoutError, TimedOut) as problem:
                self._drop()
                raise TimedOut() from problem
        raise AssertionError("unreachable")

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
