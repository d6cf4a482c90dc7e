"""Rebuild the HTTP request SGLang received from a dumped request object.

The dumped object is the normalised ``GenerateReqInput`` the server held, not what the client
sent: it carries internal fields (the HTTP worker's IPC name, receive times, the LoRA id the
server derives from the path, batch bookkeeping) that an older server rejects as unknown keys
and that must not be replayed. What is left is sent as SGLang's ``/generate`` (or ``/encode``)
JSON, with input_ids preferred over text when both are present (``--log-requests`` writes the
decoded text into the object) and multimodal items as URLs, as SGLang's newer replay script does.
"""

from __future__ import annotations

import base64

from ..picklesafe.intruns import TokenIds
from ..picklesafe.nesting import Path, descend
from ..picklesafe.pickled import Instance
from .records import Request

#: Set by the server, never by a client (SGLang 0.5.6 to 0.5.23).
INTERNAL_FIELDS = frozenset({
    "rid", "http_worker_ipc", "received_time", "received_time_perf", "validation_time",
    "lora_id", "need_wait_for_mm_inputs", "num_items_assigned", "encoder_urls",
    "external_trace_header", "trace_context", "is_single", "batch_size", "parallel_sample_num",
    "log_metrics",
})
ENDPOINTS = {"generate": "/generate", "embedding": "/encode"}


def _json(value, path: Path = ()):
    """JSON-able value; multimodal dataclasses become their URL, bytes base64 text. A value that
    holds itself, or is nested past nesting.WALK_DEPTH, is refused (nesting.TooDeep)."""
    kind = type(value)
    if kind is dict:
        path = descend(path, value)
        return {key if type(key) is str else str(key): _json(item, path)
                for key, item in value.items()}
    if kind is TokenIds:
        return value.tolist()  # the one copy of the ids a body makes
    if kind in (list, tuple, set, frozenset):
        path = descend(path, value)
        return [_json(item, path) for item in value]
    if kind in (bytes, bytearray):
        return base64.b64encode(value).decode("ascii")
    if kind is Instance:
        fields = value.fields()
        if type(fields.get("url")) is str:
            return fields["url"]
        return _json(fields, descend(path, value))
    if kind is complex:
        return [value.real, value.imag]
    return value


def request_body(request: Request) -> tuple[str, dict]:
    """(endpoint path, JSON body) that replays ``request``."""
    fields = request.fields
    if fields.get("input_ids") is not None:
        fields.pop("text", None)
    body = {name: _json(value) for name, value in fields.items()
            if type(name) is str and name not in INTERNAL_FIELDS
            and value is not None and value is not False}
    return ENDPOINTS[request.kind], body
