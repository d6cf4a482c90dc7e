"""ReplayResult: the one object a replay (and a minimization) ends in; ``--json`` prints it.
DumpListing: what ``--json`` prints without ``--url`` (the dump's requests).

They are separate models from TriageReport: a replay explains no coredump, so it neither fills
nor stretches TriageReport's contract. Fields may be added, none renamed
(``schema_version: 1``); the terminal views are renderings of these same objects.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..published import ClosedModel as _Model
from ..report.tool import Tool
from .records import CrashDump, Output, Request

Status = Literal["ok", "http-error", "timeout", "refused", "error", "not-sent", "unfinished"]
SignalKind = Literal["exited", "health", "refused", "coredump", "log"]
#: What the server got: an answer (any HTTP status), a request it may have read but never
#: answered, or nothing at all (the request was never written to a socket).
DeliveryKind = Literal["answered", "failed-after-send", "never-sent"]
Verdict = Literal["reproduced", "crashed", "different crash", "unconfirmed", "no crash"]
ForceMode = Literal["auto", "trace", "length", "off"]


class Divergence(_Model):
    """Where a greedy (temperature 0) output first differs from the one in the dump."""

    compared: Literal["output_ids", "text"]
    """What was compared: the output token ids where both sides have them, else the text."""
    first_difference: int
    """index of the first differing token or character"""
    recorded: str
    """An excerpt of the recorded output from just before the first difference (token ids joined
    by spaces)."""
    replayed: str
    """The same excerpt of the replayed output."""


class RequestOutcome(_Model):
    """What happened to one request of the dump when it was replayed."""

    index: int
    """the request's index in the dump (arrival order)"""
    rid: str | list[str] | None = None
    """The request's rid as the dump records it (a list for a batch); null where it has none."""
    endpoint: str
    """The HTTP path the request was sent to, e.g. /generate."""
    status: Status
    """ok: answered 200 with SGLang's answer; http-error: another status or an error body;
    timeout: no answer within --timeout; refused: the connection failed or was lost; error:
    an answer that is not SGLang's, or another transport error; not-sent / unfinished: the
    attempt ended before it was sent / answered."""
    http_status: int | None = None
    """The HTTP status of the answer; null where none came."""
    delivery: DeliveryKind = "never-sent"
    """answered: the server answered; failed-after-send: written, then no answer; never-sent:
    nothing was written to a socket."""
    scheduled_s: float | None = None
    """planned send time from the run's start"""
    sent_s: float | None = None
    """actual send time from the run's start: when the request's first byte went to the socket"""
    late_s: float | None = None
    """sent_s - scheduled_s"""
    forced: Literal["trace", "length", "at-least"] | None = None
    """how its decode length was forced (--force-decode)"""
    forced_tokens: int | None = None
    """tokens forced: exactly (trace, length) or at least (at-least: it was in flight at the
    crash)"""
    latency_s: float | None = None
    """Seconds from the request's first byte written to the end of its answer; null where it was
    never sent."""
    output: Output | None = None
    """The replayed output (for a greedy request, compared with the recorded one); null where no
    answer was read."""
    error: str | None = None
    """What went wrong, in one line (cut to 300 characters); null where status is ok."""
    divergence: Divergence | None = None
    """Where a greedy output first differs from the recorded one; null where it does not or was
    not compared."""


class Signal(_Model):
    """One piece of evidence that the server crashed."""

    kind: SignalKind
    """exited: the server process ended; health: /health failed or was slow; refused: a
    connection was refused or lost; coredump: a new file under --watch-cores; log: a fault
    line in --watch-log."""
    detail: str
    """What was seen, in one line, e.g. 'server process 1234 exited with code -6'."""
    at_s: float
    """seconds from the run's start"""


class Schedule(_Model):
    """How late the requests of one attempt fired compared with their planned times."""

    late_p50_s: float | None = None
    """Median seconds a request was sent after its planned time; null where nothing was sent."""
    late_p99_s: float | None = None
    """99th percentile of that lateness, in seconds; null where nothing was sent."""
    late_max_s: float | None = None
    """The largest lateness, in seconds; null where nothing was sent."""
    threshold_s: float
    """--late-threshold: the largest p99 that keeps the schedule"""
    kept: bool | None
    """p99 lateness within the threshold; None when nothing was sent or there was no schedule to
    keep (--concurrency alone)"""


class ObservedFault(_Model):
    """The fault as the replay's evidence shows it (log lines, new coredumps)."""

    classes: list[str] = Field(default_factory=list)
    """fault classes named by the evidence"""
    kernels: list[str] = Field(default_factory=list)
    """kernel names named by the evidence"""
    lines: list[str] = Field(default_factory=list)
    """fault lines seen (the first 20)"""


class Attempt(_Model):
    """One replay of the dump's requests, against a freshly restarted server where crashlab
    manages it."""

    number: int
    """The attempt's number, from 1."""
    reproduced: bool
    """verdict is reproduced or crashed (no expectation given)"""
    verdict: Verdict = "no crash"
    """reproduced: the crash matches the expected one; crashed: a crash, no expectation given;
    different crash: one that contradicts it; unconfirmed: a crash with no evidence to
    compare; no crash."""
    mismatch: str | None = None
    """why the crash does not match the expected one"""
    observed: ObservedFault = Field(default_factory=ObservedFault)
    """The fault the replay's evidence names."""
    signals: list[Signal] = Field(default_factory=list)
    """Every piece of evidence that the server crashed, in the order seen."""
    requests: list[RequestOutcome] = Field(default_factory=list)
    """What happened to each request, in the dump's order."""
    sent: int = 0
    """requests written to the server (answered + failed_after_send)"""
    answered: int = 0
    """Requests the server answered (any HTTP status)."""
    failed_after_send: int = 0
    """written, then no answer: the server may have read them; never retried"""
    never_sent: int = 0
    """Requests never written to a socket (the server was gone or the attempt ended)."""
    reconnects: int = 0
    """idle keep-alive connections found closed and replaced before anything was written on them"""
    schedule: Schedule | None = None
    """How late the requests fired against their planned times."""
    ok: int = 0
    """Requests answered with status ok."""
    divergences: int = 0
    """Greedy requests whose output differs from the recorded one."""
    duration_s: float = 0.0
    """Wall time of the attempt in seconds, from the first send to the verdict (the server's
    restart excluded)."""
    lag_p50_s: float | None = None
    """median |sent - scheduled|"""
    lag_p99_s: float | None = None
    """99th percentile of |sent - scheduled|, in seconds; null where nothing was sent."""


class Pacing(_Model):
    """How the requests were paced: at their recorded times, at a fixed rate, or as fast as a
    concurrency limit allows."""

    mode: Literal["recorded", "rate", "concurrency"]
    """recorded: the dump's arrival times divided by speed; rate: --max-rate; concurrency:
    --concurrency alone."""
    speed: float = 1.0
    """--speed: the recorded gaps between arrivals are divided by it."""
    max_rate: float | None = None
    """--max-rate, requests per second; null where not given."""
    concurrency: int | None = None
    """--concurrency, requests in flight at most; null where not given."""
    timeout_s: float
    """--timeout: seconds one request may take."""


class Expectation(_Model):
    """The recorded crash a replay must match to count as reproduced (syzkaller's lesson: a
    different crash found while minimizing is not the bug being minimized)."""

    source: str
    """--expect, or the run directory's report.json"""
    patterns: list[str] = Field(default_factory=list)
    """regular expressions that must all match the replay's fault lines"""
    fault_class: str | None = None
    """illegal-address, device-assert, ..."""
    kernel: str | None = None
    """the faulting kernel's name"""


class ForceDecode(_Model):
    """Whether the replay forced the recorded decode lengths, and how."""

    asked: ForceMode
    """--force-decode as given (auto by default)."""
    used: Literal["trace", "length", "off"]
    """What was used: trace (the recorded ids, trace_decode_token_ids), length (min = max new
    tokens, ignore_eos), or off."""
    reason: str
    """Why that was used, in one line."""
    probe: str | None = None
    """the one request sent to learn whether the server takes trace_decode_token_ids, and its
    answer"""
    requests: int = 0
    """requests whose decode was forced"""


class Harden(_Model):
    """What --harden changed in how --restart-cmd is run."""

    profile: Literal["sanitizer", "sglang", "all"]
    """--harden: sanitizer (compute-sanitizer memcheck), sglang (SGLang's debug switches) or
    all."""
    command: str
    """the command as launched"""
    env: dict[str, str] = Field(default_factory=dict)
    """variables added to its environment"""


class Minimization(_Model):
    """What --minimize found: the smallest set of the dump's requests that still reproduces the
    crash."""

    original: int
    """requests in the dump"""
    minimal: list[int]
    """indices of the requests that still reproduce"""
    minimal_rids: list[str | list[str] | None] = Field(default_factory=list)
    """The rids of those requests, in the same order (null where a request has none)."""
    trials: int
    """replays run, each on a freshly restarted server"""
    budget: str
    """--budget as understood: trials, minutes, or both."""
    budget_exhausted: bool = False
    """True where the budget ran out before the set was minimal."""
    budget_left: str | None = None
    """what was left of the budget at the end"""
    elapsed_s: float | None = None
    """wall time the minimization took"""
    output: str | None = None
    """the minimal dump written in SGLang's layout"""


class ReplayResult(_Model):
    """What crashlab replay --url found: each attempt to replay an SGLang request dump against a
    server, and, with --minimize, the minimal reproducing set."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the result."""
    dump: str
    """The request dump replayed, as given."""
    layout: str
    """Which SGLang writer the dump's keys match (e.g. 'sglang-0.5.12 crash dump'), or
    'unrecognised'."""
    url: str
    """The server replayed against."""
    pacing: Pacing
    """How the requests were paced."""
    repeat: int
    """--repeat: how many attempts were asked for."""
    reproductions: int
    """How many attempts reproduced the crash (verdict reproduced or crashed)."""
    attempts: list[Attempt]
    """Every attempt run, in order (fewer than repeat where the server could not be restarted)."""
    expected: Expectation | None = None
    """The crash a replay must match; null with --any-crash or where nothing was recorded to
    expect."""
    force_decode: ForceDecode | None = None
    """Whether recorded decode lengths were forced; null where not decided."""
    harden: Harden | None = None
    """What --harden changed; null without --harden."""
    schedule_kept: bool | None = None
    """False when any attempt missed its schedule"""
    minimization: Minimization | None = None
    """What --minimize found; null without --minimize."""
    server_log: str | None = None
    """output of --restart-cmd's servers, kept"""
    warnings: list[str] = Field(default_factory=list)
    """What crashlab met while reading the dump or replaying it and reports instead of failing."""

    @property
    def reproduced(self) -> bool:
        return self.reproductions > 0


class ListedOutput(Output):
    """A request's recorded output as the listing prints it: texts cut, id lists to their first
    16."""

    output_ids_count: int | None = None
    """output ids in the dump (output_ids holds the first 16)"""


class ListedRequest(Request):
    """A request as the listing prints it: texts cut to 80 characters, id lists to their first 16."""

    input_ids_count: int | None = None
    """input ids in the dump (input_ids holds the first 16)"""
    output: ListedOutput = Field(default_factory=ListedOutput)
    """What the dump recorded as the request's output, id lists cut to their first 16."""


class DumpListing(CrashDump):
    """The dump as replay --json lists it without --url (crashlab/replay/views.py writes it)."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    tool: Tool
    """The crashlab that wrote the listing."""
    # pydantic validates the field as this subclass declares it (each request in its listed
    # form); mypy holds the override to list's invariance
    requests: list[ListedRequest]  # type: ignore[assignment]
    """Every request read from the dump, in arrival order."""
