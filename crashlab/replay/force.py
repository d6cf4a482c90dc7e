"""Forced decode: make a replay generate the recorded number of tokens, so that the batches and
KV-cache shapes of the crash come back (a sampled or slightly different output would end at
another step, and the crashing batch might never form).

Two ways, the best the server takes:

  trace   ``sampling_params.trace_decode_token_ids`` = the recorded output ids: the decoder
          emits exactly those tokens (vLLM #46701; SGLang's open port, sgl-project/sglang#39157);
  length  ``min_new_tokens == max_new_tokens ==`` the recorded count with ``ignore_eos``, as
          SGLang's own replay script does with --ignore-eos: same lengths, other tokens.

A request still in flight at the crash recorded only a partial output: it is forced to at least
that many tokens (its trace, or ``min_new_tokens``), never capped to fewer than it had. Stop
strings and stop tokens are dropped from forced requests, since they could end them early.

``auto`` learns whether the server takes the trace field with one probe that both kinds of
server reject before scheduling anything (``max_new_tokens: -1``): a server without the field
fails on the unknown keyword first, one with it fails on the count.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..escape import cut_at_word
from .records import Request
from .transport import Client, ConnectionLost, TimedOut

#: Sampling fields that could end a forced request before its recorded length.
STOPS = ("stop", "stop_token_ids", "stop_regex")
TRACE_FIELD = "trace_decode_token_ids"
PROBE_BODY = {"input_ids": [0], "sampling_params": {"max_new_tokens": -1, TRACE_FIELD: [0]}}
#: How servers refuse a field they do not know: Python's TypeError (older SGLang), serde's
#: "unknown field `x`, expected one of ..." (SGLang 0.5.23, whose list then names max_new_tokens),
#: pydantic's "Extra inputs are not permitted".
_REFUSED_FIELD = re.compile(r"unexpected keyword|unknown field|Extra inputs are not permitted|"
                            r"extra fields not permitted", re.IGNORECASE)


@dataclass(frozen=True)
class Forced:
    kind: str  # "trace", "length" or "at-least"
    tokens: int


def recorded_tokens(request: Request) -> tuple[list[int] | None, int | None]:
    """(recorded output ids, recorded token count) of a single generate request, else (None, None).

    Batches (a list of prompts) and parallel sampling (n > 1) are not forced: their outputs are
    per item and SGLang splits them into requests of its own.
    """
    if request.kind != "generate" or not isinstance(request.text, (str, type(None))):
        return None, None
    ids = request.input_ids
    if ids is not None and len(ids) and not isinstance(next(iter(ids)), int):
        return None, None
    if (request.sampling_params.get("n") or 1) != 1:
        return None, None
    output = request.output
    recorded = output.output_ids
    if recorded is not None and not isinstance(recorded, (str, bytes)):
        items = list(recorded)
        if all(type(item) is int for item in items):
            return items, len(items)
    count = output.completion_tokens
    return None, count if type(count) is int else None


def forceable(request: Request) -> bool:
    return bool(recorded_tokens(request)[1])


class Forcing:
    """Rewrites a request body's sampling params for one mode: "trace", "length" or "off"."""

    def __init__(self, mode: str = "off"):
        self.mode = mode

    def apply(self, request: Request, body: dict) -> Forced | None:
        if self.mode == "off":
            return None
        ids, count = recorded_tokens(request)
        if not count:
            return None
        params = dict(body.get("sampling_params") or {})
        for name in STOPS:
            params.pop(name, None)
        trace = self.mode == "trace" and ids is not None
        if trace:
            params[TRACE_FIELD] = ids
        if request.in_flight:
            params["min_new_tokens"] = max(count, params.get("min_new_tokens") or 0)
            if isinstance(params.get("max_new_tokens"), int) and params["max_new_tokens"] < count:
                params["max_new_tokens"] = count
            kind = "at-least"
        else:
            params["min_new_tokens"] = params["max_new_tokens"] = count
            params["ignore_eos"] = True
            kind = "trace" if trace else "length"
        body["sampling_params"] = params
        return Forced(kind, count)


#: How much of the server's answer to the probe is kept (cut at a word): SGLang 0.5.23's refusal
#: lists every field it takes, hundreds of characters.
PROBE_ANSWER_CHARS = 200


def probe_trace(url: str, timeout: float = 30.0,
                headers: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """(whether the server takes trace_decode_token_ids, what it answered to the probe)."""
    client = Client(url.rstrip("/"), timeout, headers)
    try:
        reply = client.post("/generate", PROBE_BODY, stream=False)
    except (ConnectionLost, TimedOut, OSError) as problem:
        return False, f"no answer ({type(problem).__name__}: {problem})"
    text = reply.error or str(reply.payload)
    answer = f"HTTP {reply.status}: {cut_at_word(text, PROBE_ANSWER_CHARS)}"
    if _REFUSED_FIELD.search(text) or (TRACE_FIELD in text and "max_new_tokens" not in text):
        return False, answer
    # accepted the field and refused the count (or, against the odds, answered): it takes it
    return reply.status == 200 or "max_new_tokens" in text, answer
