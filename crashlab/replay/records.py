"""The typed view of an SGLang crash dump: Request records, server arguments as plain data.

Built from the decoded pickle (stand-ins of allowlisted classes, never SGLang's own objects), for
the three layouts SGLang's crash dumps have had (TokenizerManager.dump_requests_before_crash
in SGLang's python/sglang/srt/managers/tokenizer_manager.py; a real dump of each release in
fixtures/sglang_dumps/real/). A record that does not
have the shape SGLang writes is skipped with a warning rather than failing the whole dump.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    ValidationError,
    WithJsonSchema,
)

from ..escape import printable
from ..picklesafe.allowlist import REQUEST_KINDS, Global
from ..picklesafe.intruns import TokenIds
from ..picklesafe.nesting import Path, descend
from ..picklesafe.pickled import Instance
from ..published import ClosedModel as _Model

MODALITIES = ("image", "video", "audio")


def _as_token_ids(value, *, batch: bool = True):
    """Token ids as the loader made them (TokenIds), a short list as TokenIds too, a batch as a
    list of those: never a list of Python ints (36 bytes a token instead of 4). A batch holds
    sequences, never batches: nothing deeper is walked (a list holding itself included)."""
    if value is None or type(value) is TokenIds:
        return value
    if type(value) in (list, tuple) and value and all(type(row) in (list, tuple, TokenIds)
                                                      for row in value):
        if not batch:
            raise ValueError("token ids nested deeper than a batch of sequences")
        return [_as_token_ids(row, batch=False) for row in value]
    if type(value) in (list, tuple) and all(type(item) is int for item in value):
        try:
            return TokenIds(value, was_tuple=type(value) is tuple)
        except OverflowError:
            raise ValueError("a token id does not fit in 32 bits") from None
    raise ValueError(f"token ids are a {type(value).__name__}, not a list of integers")


def _token_ids_json(value):
    if type(value) is TokenIds:
        return value.tolist()
    return [row.tolist() for row in value]


#: input_ids / output_ids: one sequence or a batch of them, kept compact, lists in JSON.
TokenSequence = Annotated[
    Any, PlainValidator(_as_token_ids), PlainSerializer(_token_ids_json, when_used="unless-none"),
    WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "integer"}},
                              {"type": "array", "items": {"type": "array",
                                                          "items": {"type": "integer"}}},
                              {"type": "null"}]})]


class LogprobOptions(_Model):
    """The request's logprob options, from its return_logprob, logprob_start_len,
    top_logprobs_num and token_ids_logprob fields."""

    return_logprob: bool = False
    """The request's return_logprob."""
    logprob_start_len: int | list[int] | None = None
    """The request's logprob_start_len (a list for a batch); null where not set."""
    top_logprobs_num: int | list[int] | None = None
    """The request's top_logprobs_num (a list for a batch); null where not set."""
    token_ids_logprob: bool = False
    """whether token ids for logprobs were given"""


class Output(_Model):
    """What the dump recorded as the request's output (for in-flight requests, the partial one)."""

    finish_reason: str | None = None
    """The finish reason's type from meta_info (stop, length, abort); null for a request still
    in flight."""
    prompt_tokens: int | None = None
    """meta_info's prompt_tokens; null where not recorded."""
    completion_tokens: int | None = None
    """meta_info's completion_tokens; null where not recorded."""
    text: str | None = None
    """The output text as recorded; null where the dump has none (an embedding, a request cut
    short)."""
    output_ids: TokenSequence = None
    """The output token ids as recorded (a list of lists for a batch); null where not recorded."""
    embedding_size: int | None = None
    """Length of the recorded embedding, for an embedding request; null otherwise."""


class Request(_Model):
    """One request record of an SGLang crash dump: the request object, its output and its times."""

    index: int
    """position in arrival order (created time), from 0"""
    position: int
    """position of the record in the dump's list"""
    kind: Literal["generate", "embedding"]
    """generate (GenerateReqInput) or embedding (EmbeddingReqInput)."""
    sglang_class: str
    """The request object's class, module-qualified, as the pickle names it."""
    rid: str | list[str] | None = None
    """The request's rid (a list for a batch); null where it has none."""
    text: str | list[str] | None = None
    """The request's prompt text (a list for a batch); null where it has none (token ids sent
    instead)."""
    input_ids: TokenSequence = None
    """The request's prompt token ids (a list of lists for a batch); null where it sent text."""
    input_embeds: bool = False
    """whether the request carries input embeddings"""
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    """The request's sampling_params as plain data (temperature, max_new_tokens, ...)."""
    stream: bool = False
    """The request's stream flag: whether the client asked for a streamed answer."""
    multimodal: dict[str, int] = Field(default_factory=dict)
    """items per modality"""
    lora_path: str | list[str | None] | None = None
    """The request's lora_path (a list for a batch); null where no LoRA adapter was asked for."""
    logprob: LogprobOptions = Field(default_factory=LogprobOptions)
    """The request's logprob options."""
    created: float
    """arrival, epoch seconds"""
    finished: float
    """finish (or crash, for in-flight requests), epoch seconds"""
    offset_s: float
    """arrival relative to the first request"""
    in_flight: bool
    """still running when the server crashed"""
    output: Output = Field(default_factory=Output)
    """What the dump recorded as the request's output."""

    _raw: Instance = PrivateAttr()
    _record: tuple = PrivateAttr()

    @property
    def fields(self) -> dict:
        """Every field of the original request object (for rebuilding the HTTP body)."""
        return self._raw.fields()

    @property
    def greedy(self) -> bool:
        return self.sampling_params.get("temperature") == 0


class Partial(_Model):
    """What is known of a dump file that was cut short (salvage.py)."""

    requests_read: int
    """whole requests read before the cut"""
    ends_inside: int | None = None
    """the request (from 1, in the dump's order) the file ends inside; null when it ends between
    two"""
    requests_complete: bool = False
    """whether the requests list was read to its end (the cut came after it)"""
    bytes_missing_at_least: int | None = None
    """bytes the file's last FRAME declared beyond its end; null when unknown"""

    def line(self) -> str:
        """The one-line warning: how many requests, and where the file ends."""
        if self.requests_complete:
            where = "the file ends after the requests list"
        elif self.ends_inside is not None:
            where = f"the file ends inside request {self.ends_inside}"
        else:
            where = f"the file ends after request {self.requests_read}"
        missing = (f", at least {self.bytes_missing_at_least:,} bytes missing"
                   if self.bytes_missing_at_least else "")
        count = f"{self.requests_read} request{'' if self.requests_read == 1 else 's'}"
        return f"partial: {count}, {where}{missing}"


class CrashDump(_Model):
    """An SGLang crash dump (a pickle of server arguments and recent requests), read safely:
    what replay --json lists."""

    path: str
    """The dump file, as given."""
    size_bytes: int
    """The file's size in bytes."""
    layout: str
    """which SGLang writer the keys match"""
    keys: list[str]
    """The dump's top-level string keys, in the pickle's order."""
    server_args: dict[str, Any] | None = None
    """SGLang's ServerArgs as plain fields; null where the dump has none."""
    server_args_class: str | None = None
    """The ServerArgs object's class, module-qualified; null where the dump holds a plain dict
    or nothing."""
    launch_command: str | None = None
    """The server's launch command as the dump records it (SGLang 0.5.12 and later); null where
    absent."""
    config_updates: Any = None
    """The dump's config_updates as plain data (SGLang 0.5.23 and later); null where absent."""
    resolved_config: Any = None
    """The dump's resolved_config as plain data (SGLang 0.5.23 and later); null where absent."""
    requests: list[Request]
    """Every request record read, in arrival order."""
    warnings: list[str] = Field(default_factory=list)
    """What crashlab met while reading the dump (records skipped, unknown keys) and reports
    instead of failing."""
    partial: Partial | None = None
    """set when the file was cut short and only the requests read whole before the cut are
    listed"""

    _root: Any = PrivateAttr(default=None)

    @property
    def in_flight(self) -> list[Request]:
        return [request for request in self.requests if request.in_flight]

    @property
    def written_at_crash(self) -> bool | None:
        """Whether SGLang wrote the dump as its server crashed (its crash dump: an unfinished
        request was in flight at the crash) or not (a request dump /configure_logging asked
        for); None where its layout is both writers' (SGLang before 0.5.23) or unknown."""
        if self.layout.endswith(" crash dump"):
            return True
        return False if self.layout.startswith(REQUEST_DUMP) else None


#: The layout of the dumps SGLang writes when asked (/configure_logging), not at a crash.
REQUEST_DUMP = "sglang-0.5.23 request dump (/configure_logging)"
#: Top-level keys -> layout name (the keys each SGLang release writes at the top of its dump).
LAYOUTS = [
    ({"server_args", "requests", "launch_command", "config_updates", "resolved_config"},
     "sglang-0.5.23 crash dump"),
    ({"server_args", "requests", "config_updates", "resolved_config"}, REQUEST_DUMP),
    ({"server_args", "requests", "launch_command"}, "sglang-0.5.12 crash dump"),
    ({"server_args", "requests"}, "sglang-0.5.6 crash dump, or a request dump before 0.5.23"),
]


def plain(value, path: Path = ()) -> Any:
    """JSON-able data: stand-ins as {"__class__": ..., fields}, tuples and sets as lists. A value
    that holds itself, or is nested past nesting.WALK_DEPTH, is refused (nesting.TooDeep)."""
    kind = type(value)
    if kind is dict:
        path = descend(path, value)
        return {key if type(key) is str else repr(key): plain(item, path)
                for key, item in value.items()}
    if kind in (list, tuple):
        path = descend(path, value)
        return [plain(item, path) for item in value]
    if kind in (set, frozenset):
        path = descend(path, value)
        return sorted((plain(item, path) for item in value), key=repr)
    if kind in (bytes, bytearray):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if kind is Instance:
        return {"__class__": value.cls.qualified, **plain(value.fields(), descend(path, value))}
    if kind is TokenIds:
        return value.tolist()
    if kind is Global:
        return {"__global__": value.qualified}
    if kind is complex:
        return [value.real, value.imag]
    return value


def _count(items, path: Path = ()) -> int:
    """Items of a multimodal field: one, a list of them, or a batch's list of lists."""
    if items is None:
        return 0
    if type(items) in (list, tuple):
        path = descend(path, items)
        return sum(_count(item, path) if type(item) in (list, tuple) else 1 for item in items)
    return 1


def output_of(out: dict) -> tuple[Output, bool]:
    """The recorded output and whether the request was still running (no finish reason)."""
    info = out.get("meta_info")
    meta = info if type(info) is dict else {}
    reason = meta.get("finish_reason")
    embedding = out.get("embedding")
    summary = Output(
        finish_reason=reason.get("type") if type(reason) is dict else reason,
        prompt_tokens=meta.get("prompt_tokens"),
        completion_tokens=meta.get("completion_tokens"),
        text=out.get("text"),
        output_ids=out.get("output_ids"),
        embedding_size=len(embedding) if type(embedding) is list or type(embedding) is tuple else None,
    )
    return _shared_field_names(summary), reason is None


#: One set of field names per record model, shared by all its instances (_shared_field_names).
_FIELD_NAMES: dict[type, set[str]] = {}


def _shared_field_names(model):
    """``model`` with the set of its field names that pydantic keeps per instance replaced by
    one set shared by every instance of its class: 1.7 KB a request, an eighth of what a large
    dump's listing holds. pydantic keeps the names a model was given to answer
    ``model_fields_set`` and ``exclude_unset``, which nothing asks of these records; an
    assignment to a field adds a name the set already holds."""
    names = _FIELD_NAMES.get(type(model))
    if names is None:
        names = _FIELD_NAMES[type(model)] = set(type(model).model_fields)
    object.__setattr__(model, "__pydantic_fields_set__", names)
    return model


def request_from(record, position: int) -> Request:
    """One (obj, out_dict, created, finished) tuple as a Request; ValueError if it is not one."""
    if type(record) not in (tuple, list) or len(record) != 4:
        raise ValueError("not an (obj, output, created, finished) tuple")
    obj, out, created, finished = record
    if type(obj) is not Instance or (obj.cls.module, obj.cls.name) not in REQUEST_KINDS:
        found = obj.cls.qualified if type(obj) is Instance else f"a {type(obj).__name__}"
        raise ValueError(f"its request is {found}, "
                         "not a GenerateReqInput or EmbeddingReqInput")
    if type(out) is not dict or type(created) not in (int, float) or type(finished) not in (int, float):
        raise ValueError("its output is not a dict or its times are not numbers")
    fields = obj.fields()
    output, in_flight = output_of(out)
    request = Request(
        index=0, position=position, kind=REQUEST_KINDS[(obj.cls.module, obj.cls.name)],
        sglang_class=obj.cls.qualified, rid=fields.get("rid"), text=fields.get("text"),
        input_ids=fields.get("input_ids"), input_embeds=fields.get("input_embeds") is not None,
        sampling_params=plain(fields.get("sampling_params") or {}),
        stream=bool(fields.get("stream")),
        multimodal={name: count for name in MODALITIES
                    if (count := _count(fields.get(f"{name}_data")))},
        lora_path=fields.get("lora_path"),
        logprob=LogprobOptions(return_logprob=bool(fields.get("return_logprob")),
                               logprob_start_len=fields.get("logprob_start_len"),
                               top_logprobs_num=fields.get("top_logprobs_num"),
                               token_ids_logprob=fields.get("token_ids_logprob") is not None),
        created=created, finished=finished, offset_s=0.0, in_flight=in_flight, output=output,
    )
    request._raw, request._record = obj, record if type(record) is tuple else tuple(record)
    _shared_field_names(request)
    _shared_field_names(request.logprob)
    return request


def _server_args(value) -> dict | None:
    """ServerArgs as plain fields; SGLang dumps a plain dict instead when watermarking is on."""
    if type(value) is Instance:
        return plain(value.fields())
    return plain(value) if type(value) is dict else None


def crash_dump_from(root, path: str, size: int, seen: dict[int, Request] | None = None) -> CrashDump:
    """The typed dump; ValueError (with the reason) when ``root`` is not an SGLang dump at all.

    ``seen`` maps id(record) to the Request already made from it while the pickle was read.
    """
    root, keys, layout, warnings = _top_level(root)
    records = root["requests"]
    if type(records) not in (list, tuple, TokenIds):
        raise ValueError(f"its 'requests' is a {type(records).__name__}, not a list")
    requests = _requests(records, seen or {}, warnings)
    server_args = root.get("server_args")
    warnings += _server_args_warnings(server_args, root)
    command = root.get("launch_command")
    dump = CrashDump(
        path=path, size_bytes=size, layout=layout, keys=keys,
        server_args=_server_args(server_args),
        server_args_class=server_args.cls.qualified if type(server_args) is Instance else None,
        launch_command=command if type(command) is str else None,
        config_updates=plain(root.get("config_updates")),
        resolved_config=plain(root.get("resolved_config")),
        requests=requests, warnings=warnings,
    )
    dump._root = root
    return dump


def _top_level(root) -> tuple[dict, list[str], str, list[str]]:
    """(the dump as a dict with 'requests', its string keys, its layout, warnings); a bare list
    of records is read as one."""
    if type(root) in (list, TokenIds):
        return {"requests": root}, [], "record list", []
    if type(root) is not dict or "requests" not in root:
        shown = (f" with keys {printable(str(sorted(map(str, root))[:8]))}"
                 if type(root) is dict else "")
        raise ValueError(f"its top level is a {type(root).__name__}{shown}, "
                         "not SGLang's dict with 'requests'")
    keys = [key for key in root if type(key) is str]
    layout = next((name for wanted, name in LAYOUTS if wanted == set(keys)), None)
    if layout:
        return root, keys, layout, []
    return root, keys, "unrecognised", [f"unrecognised top-level keys "
                                        f"{printable(str(sorted(keys)))}; read as a crash dump"]


def _requests(records, seen: dict[int, Request], warnings: list[str]) -> list[Request]:
    """The request records in the order they arrived, numbered, each with its offset from the
    first; a record that is not one is skipped with a warning."""
    requests = []
    for position, record in enumerate(records):
        try:
            request = seen.get(id(record))
            if request is None or request._record is not record:
                request = request_from(record, position)
            request.position = position
            requests.append(request)
        except (ValueError, ValidationError) as problem:
            reason = problem.errors()[0]["msg"] if isinstance(problem, ValidationError) else problem
            warnings.append(f"record {position} skipped: {reason}")
    if records and not requests:
        raise ValueError(f"none of its {len(records)} records is a request record ({warnings[-1]})")
    requests.sort(key=lambda request: (request.created, request.position))
    start = requests[0].created if requests else 0.0
    for index, request in enumerate(requests):
        request.index, request.offset_s = index, request.created - start
    return requests


def _server_args_warnings(server_args, root: dict) -> list[str]:
    if server_args is None and "launch_command" in root:
        return ["server_args is None: SGLang could not pickle the server's arguments (a "
                "--trust-remote-code model config is the usual cause) and wrote the dump without "
                "them; launch_command still says how the server was started"]
    if type(server_args) not in (Instance, dict, type(None)):
        return [f"server_args is a {type(server_args).__name__}; ignored"]
    return []
