"""ReplayResult: the one object a replay (and a minimization) ends in; ``--json`` prints it.
DumpListing: what ``--json`` prints without ``--url`` (the dump's requests).

They are separate models from TriageReport: a replay explains no coredump, so it neither fills
nor stretches TriageReport's contract. Fields may be added, none renamed
(``schema_version: 1``); the terminal views are renderings of these same objects.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..report.model import Tool
from .records import CrashDump, Output, Request

Status = Literal["ok", "http-error", "timeout", "refused", "error", "not-sent", "unfinished"]
SignalKind = Literal["exited", "health", "refused", "coredump", "log"]
#: What the server got: an answer (any HTTP status), a request it may have read but never
#: answered, or nothing at all (the request was never written to a socket).
DeliveryKind = Literal["answered", "failed-after-send", "never-sent"]
Verdict = Literal["reproduced", "crashed", "different crash", "unconfirmed", "no crash"]
ForceMode = Literal["auto", "trace", "length", "off"]


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
    delivery: DeliveryKind = "never-sent"
    scheduled_s: float | None = Field(None, description="planned send time from the run's start")
    sent_s: float | None = Field(None, description="actual send time from the run's start: when "
                                 "the request's first byte went to the socket")
    late_s: float | None = Field(None, description="sent_s - scheduled_s")
    forced: Literal["trace", "length", "at-least"] | None = Field(
        None, description="how its decode length was forced (--force-decode)")
    forced_tokens: int | None = Field(None, description="tokens forced: exactly (trace, length) "
                                      "or at least (at-least: it was in flight at the crash)")
    latency_s: float | None = None
    output: Output | None = None
    error: str | None = None
    divergence: Divergence | None = None


class Signal(_Model):
    """One piece of evidence that the server crashed."""

    kind: SignalKind
    detail: str
    at_s: float = Field(description="seconds from the run's start")


class Schedule(_Model):
    """How late the requests of one attempt fired compared with their planned times."""

    late_p50_s: float | None = None
    late_p99_s: float | None = None
    late_max_s: float | None = None
    threshold_s: float = Field(description="--late-threshold: the largest p99 that keeps the schedule")
    kept: bool | None = Field(description="p99 lateness within the threshold; None when nothing was "
                              "sent or there was no schedule to keep (--concurrency alone)")


class ObservedFault(_Model):
    """The fault as the replay's evidence shows it (log lines, new coredumps)."""

    classes: list[str] = Field(default_factory=list, description="fault classes named by the evidence")
    kernels: list[str] = Field(default_factory=list, description="kernel names named by the evidence")
    lines: list[str] = Field(default_factory=list, description="fault lines seen (the first 20)")


class Attempt(_Model):
    number: int
    reproduced: bool = Field(description="verdict is reproduced or crashed (no expectation given)")
    verdict: Verdict = "no crash"
    mismatch: str | None = Field(None, description="why the crash does not match the expected one")
    observed: ObservedFault = Field(default_factory=ObservedFault)
    signals: list[Signal] = Field(default_factory=list)
    requests: list[RequestOutcome] = Field(default_factory=list)
    sent: int = Field(0, description="requests written to the server (answered + failed_after_send)")
    answered: int = 0
    failed_after_send: int = Field(0, description="written, then no answer: the server may have "
                                   "read them; never retried")
    never_sent: int = 0
    reconnects: int = Field(0, description="idle keep-alive connections found closed and replaced "
                            "before anything was written on them")
    schedule: Schedule | None = None
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


class Expectation(_Model):
    """The recorded crash a replay must match to count as reproduced (syzkaller's lesson: a
    different crash found while minimizing is not the bug being minimized)."""

    source: str = Field(description="--expect, or the run directory's report.json")
    patterns: list[str] = Field(default_factory=list, description="regular expressions that must "
                                "all match the replay's fault lines")
    fault_class: str | None = Field(None, description="illegal-address, device-assert, ...")
    kernel: str | None = Field(None, description="the faulting kernel's name")


class ForceDecode(_Model):
    """Whether the replay forced the recorded decode lengths, and how."""

    asked: ForceMode
    used: Literal["trace", "length", "off"]
    reason: str
    probe: str | None = Field(None, description="the one request sent to learn whether the server "
                              "takes trace_decode_token_ids, and its answer")
    requests: int = Field(0, description="requests whose decode was forced")


class Harden(_Model):
    """What --harden changed in how --restart-cmd is run."""

    profile: Literal["sanitizer", "sglang", "all"]
    command: str = Field(description="the command as launched")
    env: dict[str, str] = Field(default_factory=dict, description="variables added to its environment")


class Minimization(_Model):
    original: int = Field(description="requests in the dump")
    minimal: list[int] = Field(description="indices of the requests that still reproduce")
    minimal_rids: list[str | list[str] | None] = Field(default_factory=list)
    trials: int = Field(description="replays run, each on a freshly restarted server")
    budget: str
    budget_exhausted: bool = False
    budget_left: str | None = Field(None, description="what was left of the budget at the end")
    elapsed_s: float | None = Field(None, description="wall time the minimization took")
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
    expected: Expectation | None = None
    force_decode: ForceDecode | None = None
    harden: Harden | None = None
    schedule_kept: bool | None = Field(None, description="False when any attempt missed its schedule")
    minimization: Minimization | None = None
    server_log: str | None = Field(None, description="output of --restart-cmd's servers, kept")
    warnings: list[str] = Field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        return self.reproductions > 0


class ListedOutput(Output):
    output_ids_count: int | None = Field(None, description="output ids in the dump (output_ids "
                                                           "holds the first 16)")


class ListedRequest(Request):
    """A request as the listing prints it: texts cut to 80 characters, id lists to their first 16."""

    input_ids_count: int | None = Field(None, description="input ids in the dump (input_ids "
                                                          "holds the first 16)")
    output: ListedOutput = Field(default_factory=ListedOutput)


class DumpListing(CrashDump):
    """The dump as replay --json lists it without --url (crashlab/replay/views.py writes it)."""

    schema_version: Literal[1] = 1
    tool: Tool
    # pydantic validates the field as this subclass declares it (each request in its listed
    # form); mypy holds the override to list's invariance
    requests: list[ListedRequest]  # type: ignore[assignment]
