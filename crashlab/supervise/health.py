"""Polling the server's health endpoint, from a thread of its own.

A hung server answers nothing, so the poll has a timeout and runs beside the supervisor loop,
never inside it. SGLang's /health runs a one-token generation and gives up after 20 s
(SGLANG_HEALTH_CHECK_TIMEOUT), hence the default timeout above that. Before the first success
the server is "starting" (loading a model takes minutes); after it, a failure makes it
"unhealthy" until the next success. SGLang itself marks the server UnHealthy after a failed
/health, which is what makes a later SIGTERM write its request dump.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import requests

from .launch import base_url

StateChange = Callable[[str, str], None]


class HealthWatch:
    def __init__(self, url: str, interval: float, timeout: float, on_change: StateChange,
                 on_first_healthy: Callable[[requests.Session, str], None] | None = None):
        self.url = url
        self.interval = interval
        self.timeout = timeout
        self.state = "starting"
        self.checks = 0
        self.failures = 0
        self.last_error: str | None = None
        self.first_healthy_at: float | None = None
        #: time.monotonic() of the last 200, for serve --hang-after
        self.last_ok: float | None = None
        self._on_change = on_change
        self._on_first_healthy = on_first_healthy
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="crashlab-health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout + 1)

    def _run(self) -> None:
        with requests.Session() as session:
            while not self._stop.is_set():
                ok, detail = self._check(session)
                self.checks += 1
                first = ok and self.first_healthy_at is None
                if first:
                    self.first_healthy_at = time.time()
                if ok:
                    self.last_ok = time.monotonic()
                self._update(ok, detail)
                if first and self._on_first_healthy is not None:
                    self._on_first_healthy(session, base_url(self.url))
                self._stop.wait(self.interval)

    def _check(self, session: requests.Session) -> tuple[bool, str]:
        try:
            response = session.get(self.url, timeout=self.timeout)
        except requests.Timeout:
            return False, f"no answer within {self.timeout:g} s"
        except requests.RequestException as exc:
            return False, f"{type(exc).__name__}: {exc}"[:300]
        if response.status_code == 200:
            return True, "200 OK"
        return False, f"HTTP {response.status_code}"

    def _update(self, ok: bool, detail: str) -> None:
        if ok:
            new_state = "healthy"
        else:
            self.failures += 1
            self.last_error = detail
            new_state = "unhealthy" if self.first_healthy_at is not None else "starting"
        if new_state != self.state:
            self.state = new_state
            self._on_change(new_state, detail)
