"""A request dump made fit to attach to a bug report: its secrets masked, its contents optionally
replaced, written back in SGLang's layout so that ``crashlab replay`` still reads and replays it.

An SGLang crash dump holds the server's arguments (``api_key`` among them), the launch command,
and every recent request with its prompt and output. ``scrub`` walks the decoded dump (the
loader's inert records, nothing of SGLang's) and passes every string through ``clean`` (the
report's redaction and anonymization); a field whose name says it is a secret is masked whole.
With ``contents=True`` (``crashlab report --anonymize``) the requests' texts become placeholders
of the same length and their token ids the same number of one id, so that lengths, sampling
parameters and timing, what a replay needs to put the same load on a server, are kept while
what users asked and were told is not. Embeddings keep their shape, their values zeroed.
"""

from __future__ import annotations

from collections.abc import Callable

from ..picklesafe.intruns import TokenIds
from ..picklesafe.nesting import Path, descend
from ..picklesafe.pickled import Instance
from ..privacy.redact import MASK, is_secret_name
from .records import CrashDump

#: What a request's text becomes: this, repeated and cut to the text's length.
PLACEHOLDER = "lorem ipsum dolor sit amet consectetur adipiscing elit "
#: Request fields (GenerateReqInput, EmbeddingReqInput) that hold what a user sent.
_REQUEST_CONTENT = {"text", "input_ids", "image_data", "video_data", "audio_data", "input_embeds"}
#: Output fields that hold what the model answered; meta_info keys holding tokens contain one of
#: _TOKEN_WORDS (output_token_logprobs: (logprob, id, text) triples).
_OUTPUT_CONTENT = {"text", "output_ids", "embedding"}
_TOKEN_WORDS = ("logprob", "hidden_states", "token_ids")
_ZEROED = {"input_embeds", "embedding"}


def placeholder(text: str) -> str:
    """A text of the same length as ``text`` that says nothing."""
    repeats = len(text) // len(PLACEHOLDER) + 1
    return (PLACEHOLDER * repeats)[: len(text)]


class _Scrubber:
    """The walk; every method takes the path it is on (nesting.descend): a value that holds
    itself or is nested past nesting.WALK_DEPTH is refused (nesting.TooDeep), never walked
    forever."""

    def __init__(self, clean: Callable[[str], str], contents: bool, token_id: int):
        self.clean, self.contents, self.token_id = clean, contents, token_id

    def value(self, value, key: str | None = None, path: Path = ()):  # noqa: C901 - a branch per type
        """Any decoded value: strings cleaned, secret-named fields masked."""
        kind = type(value)
        if key is not None and is_secret_name(key) and value not in (None, "", [], {}):
            return MASK
        if kind is str:
            return self.clean(value)
        if kind is dict:
            path = descend(path, value)
            return {self.value(k, None, path): self.value(v, k if type(k) is str else None, path)
                    for k, v in value.items()}
        if kind in (list, tuple, set, frozenset):
            path = descend(path, value)
            return kind(self.value(item, None, path) for item in value)
        if kind is Instance:
            return self.instance(value, lambda part, at: self.value(part, None, at), path)
        return value

    def instance(self, value: Instance, fields: Callable, path: Path) -> Instance:
        """A copy of a record, ``fields(part, path)`` applied to what it was made from."""
        path = descend(path, value)
        copy = Instance(value.cls, value.how, fields(value.args, path),
                        fields(value.kwargs, path) if value.kwargs else value.kwargs,
                        (value.made_by[0], fields(value.made_by[1], path)) if value.made_by
                        else None)
        copy.state = fields(value.state, path)
        return copy

    def content(self, value, zero: bool = False, path: Path = ()):
        """What a user sent or was answered, replaced; its shape and lengths kept."""
        kind = type(value)
        if kind is str:
            return placeholder(value)
        if kind is TokenIds:
            return TokenIds([self.token_id] * len(value), was_tuple=value.was_tuple)
        if kind is int:
            return self.token_id
        if kind is float:
            return 0.0 if zero else value
        if kind is dict:
            path = descend(path, value)
            return {k: self.content(v, zero, path) for k, v in value.items()}
        if kind in (list, tuple):
            path = descend(path, value)
            return kind(self.content(item, zero, path) for item in value)
        if kind is Instance:
            return self.instance(value, lambda part, at: self.content(part, zero, at), path)
        return value

    def fields(self, value, content: set[str], path: Path = ()):
        """A request's or output's fields: those named in ``content`` replaced, others cleaned
        (dicts inside a record's state, pydantic's ``__dict__`` included, are walked)."""
        if type(value) is dict:
            path = descend(path, value)
            return {k: (self.content(v, k in _ZEROED, path) if self.contents and k in content
                        else self.fields(v, content, path)
                        if type(v) in (dict, tuple) and k == "__dict__"
                        else self.value(v, k if type(k) is str else None, path))
                    for k, v in value.items()}
        if type(value) is tuple:  # (dict, slots) state
            path = descend(path, value)
            return tuple(self.fields(item, content, path) for item in value)
        return self.value(value, None, path)

    def output(self, out):
        if type(out) is not dict:
            return self.value(out)
        cleaned = self.fields(out, _OUTPUT_CONTENT)
        meta = out.get("meta_info")
        if self.contents and type(meta) is dict:
            path = descend(descend((), out), meta)
            cleaned["meta_info"] = {k: (self.content(v, path=path) if any(w in k for w in _TOKEN_WORDS)
                                        else self.value(v, k, path)) for k, v in meta.items()}
        return cleaned

    def record(self, record):
        if type(record) is not tuple or len(record) != 4 or type(record[0]) is not Instance:
            return self.value(record)
        obj, out, created, finished = record
        request = self.instance(obj, lambda part, at: self.fields(part, _REQUEST_CONTENT, at), ())
        return (request, self.output(out), created, finished)


def _smallest_id(dump: CrashDump) -> int:
    """An id every vocabulary of the dump's model has: the smallest one it recorded."""
    ids = [min(sequence) for request in dump.requests
           for sequence in (request.input_ids, request.output.output_ids)
           if type(sequence) is TokenIds and len(sequence)]
    return min(ids, default=0)


def scrub(dump: CrashDump, clean: Callable[[str], str], contents: bool = False):
    """The dump's decoded root with ``clean`` applied and, with ``contents``, its requests'
    texts and token ids replaced; crashlab.replay.writer writes it back."""
    scrubber = _Scrubber(clean, contents, _smallest_id(dump))
    root = dump._root
    return {key: ([scrubber.record(record) for record in value] if key == "requests"
                  else scrubber.value(value, key if type(key) is str else None))
            for key, value in root.items()}
