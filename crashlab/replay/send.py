"""Send a dump's requests to a server on schedule and collect what came back.

Open loop: a dispatcher thread releases each request at its planned time (the recorded arrival
offset divided by --speed, or i/--max-rate) to a pool of daemon worker threads that grows
whenever none is idle, so a slow server never delays later sends (SGLang's replay script holds
a thread of a fixed pool per sleeping request, and drifts once requests outnumber it).
--concurrency caps requests in flight; alone it means "as fast as that cap allows".
Each worker keeps one keep-alive connection (transport.py), and no request is written twice.
When the oracle trips, nothing more is sent. Each outcome says what the server got (answered,
failed-after-send, never-sent) and when its first byte was written, against its planned time.
"""

from __future__ import annotations

import functools
import http.client
import json
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from ..errors import BadInput
from .body import request_body
from .force import Forcing
from .oracle import Oracle
from .records import Request, output_of
from .result import RequestOutcome
from .transport import Client, ConnectionLost, Delivery, Reply, TimedOut

#: How long requests still running when the oracle trips may take to finish.
GRACE_S = 2.0
_POLL_S = 0.05


@dataclass(frozen=True)
class Plan:
    mode: str = "recorded"  # "recorded", "rate" or "concurrency"
    speed: float = 1.0
    max_rate: float | None = None
    concurrency: int | None = None
    timeout: float = 120.0

    @classmethod
    def choose(cls, speed: float = 1.0, max_rate: float | None = None,
               concurrency: int | None = None, timeout: float = 120.0) -> Plan:
        """Recorded times scaled by ``speed``, or as fast as ``max_rate``/``concurrency`` allow."""
        if speed != 1.0 and (max_rate or concurrency):
            raise BadInput("--speed scales the recorded times; --max-rate and --concurrency "
                           "replace them: choose one")
        mode = "rate" if max_rate else "concurrency" if concurrency else "recorded"
        return cls(mode=mode, speed=speed, max_rate=max_rate, concurrency=concurrency,
                   timeout=timeout)

    def times(self, batch: list[Request]) -> list[float]:
        """Planned send time of each request, seconds from the run's start."""
        if self.mode == "recorded":
            start = batch[0].offset_s if batch else 0.0
            return [(request.offset_s - start) / self.speed for request in batch]
        if self.mode == "rate" and self.max_rate:
            return [index / self.max_rate for index in range(len(batch))]
        return [0.0] * len(batch)


class _Pool:
    """Daemon threads, one more whenever a job arrives and none is idle (so never a backlog)."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.idle = 0
        self.threads = 0
        self.lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self.lock:
            spawn = self.idle == 0
            if spawn:
                self.threads += 1
            else:
                self.idle -= 1
        self.jobs.put(job)
        if spawn:
            threading.Thread(target=self._work, name="crashlab-send", daemon=True).start()

    def close(self) -> None:
        """Let every thread end once it is done with its job (a hung request's thread later)."""
        with self.lock:
            for _ in range(self.threads):
                self.jobs.put(None)

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job()
            with self.lock:
                self.idle += 1


class Sender:
    """One pass over ``batch``; ``run()`` returns an outcome per request, in batch order."""

    def __init__(self, url: str, batch: list[Request], plan: Plan, oracle: Oracle,
                 progress: Callable[[int, int], None] | None = None,
                 forcing: Forcing | None = None, headers: Mapping[str, str] | None = None):
        self.url = url.rstrip("/")
        self.batch = batch
        self.forcing = forcing or Forcing()
        self.deliveries = [Delivery() for _ in batch]
        self.plan = plan
        self.oracle = oracle
        self.progress = progress
        self.outcomes: list[RequestOutcome | None] = [None] * len(batch)
        self.submitted = [False] * len(batch)
        self.done = 0
        self.finished = threading.Condition()
        self.local = threading.local()
        self.slots = threading.BoundedSemaphore(plan.concurrency) if plan.concurrency else None
        self.started = 0.0
        self.client = Client(self.url, plan.timeout, headers)

    def run(self) -> list[RequestOutcome]:
        times = self.plan.times(self.batch)
        pool = _Pool()
        self.started = time.monotonic()
        submitted = 0
        for position, planned in enumerate(times):
            if not self._wait_until(self.started + planned) or not self._take_slot():
                break
            self.submitted[position] = True
            pool.submit(functools.partial(self._send, position, planned))
            submitted += 1
        self._wait_for(submitted)
        pool.close()
        with self.finished:
            outcomes = list(self.outcomes)
        return [outcome or self._missing(position, times[position])
                for position, outcome in enumerate(outcomes)]

    # -- pacing -----------------------------------------------------------------------------
    def _wait_until(self, deadline: float) -> bool:
        """Sleep until ``deadline``; False if the oracle tripped first."""
        while True:
            if self.oracle.tripped.is_set():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, _POLL_S))

    def _take_slot(self) -> bool:
        while self.slots is not None and not self.slots.acquire(timeout=_POLL_S):
            if self.oracle.tripped.is_set():
                return False
        return True

    def _wait_for(self, submitted: int) -> None:
        grace_end = None
        with self.finished:
            while self.done < submitted:
                if self.oracle.tripped.is_set():
                    grace_end = grace_end or time.monotonic() + GRACE_S
                    if time.monotonic() >= grace_end:
                        return
                self.finished.wait(_POLL_S)

    # -- one request ------------------------------------------------------------------------
    def _send(self, position: int, planned: float) -> None:
        request = self.batch[position]
        path, body = request_body(request)
        forced = self.forcing.apply(request, body)
        scheduled = round(planned, 6)
        outcome = RequestOutcome(index=request.index, rid=_rid(request.rid), endpoint=path,
                                 status="ok", scheduled_s=scheduled,
                                 forced=forced.kind if forced else None,
                                 forced_tokens=forced.tokens if forced else None)
        delivery = self.deliveries[position]
        try:
            reply = self.client.post(path, body, request.stream, delivery)
            outcome.http_status, outcome.delivery = reply.status, "answered"
            self._read(reply, outcome)
        except TimedOut:
            outcome.status, outcome.error = "timeout", f"no answer within {self.plan.timeout:g} s"
        except ConnectionLost as problem:
            outcome.status, outcome.error = "refused", str(problem)
            self.oracle.add("refused", f"request {request.index}: {problem}")
        except (ValueError, ValidationError) as problem:  # an answer, but not SGLang's
            outcome.status, outcome.delivery = "error", "answered"
            outcome.error = f"{type(problem).__name__}: {problem}"[:300]
        except (OSError, http.client.HTTPException) as problem:
            outcome.status, outcome.error = "error", f"{type(problem).__name__}: {problem}"[:300]
        if outcome.delivery != "answered":
            outcome.delivery = "never-sent" if delivery.written_at is None else "failed-after-send"
        if delivery.written_at is not None:
            outcome.sent_s = sent = round(delivery.written_at - self.started, 6)
            outcome.late_s = round(sent - scheduled, 6)
            outcome.latency_s = round(time.monotonic() - delivery.written_at, 6)
        if self.slots is not None:
            self.slots.release()
        with self.finished:
            self.outcomes[position] = outcome
            self.done += 1
            self.finished.notify()
        if self.progress:
            self.progress(self.done, len(self.batch))

    @staticmethod
    def _read(reply: Reply, outcome: RequestOutcome) -> None:
        last = reply.payload
        if reply.status != 200:
            outcome.status, outcome.error = "http-error", reply.error
        elif isinstance(last, dict) and "error" in last:
            outcome.status, outcome.error = "http-error", json.dumps(last["error"])[:300]
        elif isinstance(last, dict):
            outcome.output = output_of(last)[0]

    def _missing(self, position: int, planned: float) -> RequestOutcome:
        """A request that was never dispatched, or whose answer did not come within the grace."""
        request = self.batch[position]
        written = self.deliveries[position].written_at
        scheduled = round(planned, 6)
        outcome = RequestOutcome(index=request.index, rid=_rid(request.rid),
                                 endpoint=request_body(request)[0],
                                 status="unfinished" if self.submitted[position] else "not-sent",
                                 delivery="never-sent" if written is None else "failed-after-send",
                                 scheduled_s=scheduled)
        if written is not None:
            outcome.sent_s = sent = round(written - self.started, 6)
            outcome.late_s = round(sent - scheduled, 6)
        return outcome


def _rid(rid):
    return rid if isinstance(rid, (str, list)) or rid is None else str(rid)
