"""A real HTTP/1.1 server on 127.0.0.1 that closes keep-alive connections in chosen ways, and
counts on its side how many times it received each request (by its first input id).

  idle_close  close a connection idle this long after an answer (FIN; with idle_reset, an RST)
  drop_on     read these requests in full, then close without answering (FIN)
  reset_on    read these requests in full, then reset the connection (RST)

GET /health answers 200; POST /generate answers a minimal SGLang reply.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import Counter


class KeepAliveServer:
    def __init__(self, idle_close: float | None = None, idle_reset: bool = False,
                 drop_on=(), reset_on=()):
        self.idle_close, self.idle_reset = idle_close, idle_reset
        self.drop_on, self.reset_on = set(drop_on), set(reset_on)
        self.received: Counter = Counter()
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.closing = False

    def __enter__(self):
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.closing = True
        self.listener.close()

    def _accept(self):
        while not self.closing:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    @staticmethod
    def _reset(connection):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()

    def _serve(self, connection: socket.socket):
        buffer, answered = b"", False
        while True:
            # idle only once it has answered: a new connection's first request can be slow to
            # come on a loaded machine, and closing it then is no keep-alive close
            connection.settimeout(self.idle_close if answered and not buffer else 10)
            try:
                while b"\r\n\r\n" not in buffer:
                    chunk = connection.recv(65536)
                    if not chunk:
                        connection.close()
                        return
                    buffer += chunk
            except TimeoutError:
                return self._reset(connection) if self.idle_reset else connection.close()
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            lines = head.decode().split("\r\n")
            method, path = lines[0].split()[:2]
            headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
            length = int(headers.get("content-length", 0))
            while len(buffer) < length:
                buffer += connection.recv(65536)
            body, buffer = buffer[:length], buffer[length:]
            if method == "GET":
                self._answer(connection, b"")
                answered = True
                continue
            ids = json.loads(body).get("input_ids") or [None]
            with self.lock:
                self.received[ids[0]] += 1
            if ids[0] in self.drop_on:
                connection.close()
                return
            if ids[0] in self.reset_on:
                return self._reset(connection)
            self._answer(connection, json.dumps({
                "text": "a", "output_ids": [1],
                "meta_info": {"finish_reason": {"type": "length"}, "completion_tokens": 1}}).encode())
            answered = True

    @staticmethod
    def _answer(connection, data: bytes):
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
