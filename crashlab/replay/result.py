"""ReplayResult: the one object a replay (and a minimisation) ends in; ``--json`` prints it.

It is a separate model from TriageReport: a replay explains no coredump, so it neither fills nor
stretches the report contract of DESIGN.md. Fields may be added, none renamed
(``schema_version: 1``); the terminal view is a rendering of this same object.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..report.model import Tool
from .records import Output

Status = Literal["ok", "http-error", "timeout", "refused", "error", "not-sent", "unfinished"]
SignalKind = Literal["exited", "health", "refused", "coredump", "log"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Divergence(_Model):
    """Where a greedy (temperature 0) output first differs from the one in the dump."""

    compared: Literal["output_ids", "text"]
    first_difference: int = Field(description="index of the first differing token or character")
    recorded: str
    replayed: str


class RequestOutcome(_Model):
    index: int = Field(description="the request's index in the dump (arrival order)")
    rid: str | list[str] | None = None
    endpoint: str
    status: Status
    http_status: int | None = None
    scheduled_s: float | None = Field(None, description="planned send time from the run's start")
    sent_s: float | None = Field(None, description="actual send time from the run's start")
    latency_s: float | None = None
    output: Output | None = None
    error: str | None = None
    divergence: Divergence | None = None


class Signal(_Model):
    """One piece of evidence that the server crashed."""

    kind: SignalKind
    detail: str
    at_s: float = Field(description="seconds from the run's start")


class Attempt(_Model):
    number: int
    reproduced: bool
    signals: list[Signal] = Field(default_factory=list)
    requests: list[RequestOutcome] = Field(default_factory=list)
    sent: int = 0
    ok: int = 0
    divergences: int = 0
    duration_s: float = 0.0
    lag_p50_s: float | None = Field(None, description="median |sent - scheduled|")
    lag_p99_s: float | None = None


class Pacing(_Model):
    mode: Literal["recorded", "rate", "concurrency"]
    speed: float = 1.0
    max_rate: float | None = None
    concurrency: int | None = None
    timeout_s: float


class Minimization(_Model):
    original: int = Field(description="requests in the dump")
    minimal: list[int] = Field(description="indices of the requests that still reproduce")
    minimal_rids: list[str | list[str] | None] = Field(default_factory=list)
    trials: int = Field(description="replays run, each on a freshly restarted server")
    budget: str
    budget_exhausted: bool = False
    output: str | None = Field(None, description="the minimal dump written in SGLang's layout")


class ReplayResult(_Model):
    schema_version: Literal[1] = 1
    tool: Tool
    dump: str
    layout: str
    url: str
    pacing: Pacing
    repeat: int
    reproductions: int
    attempts: list[Attempt]
    minimization: Minimization | None = None
    server_log: str | None = Field(None, description="output of --restart-cmd's servers, kept")
    warnings: list[str] = Field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        return self.reproductions > 0
