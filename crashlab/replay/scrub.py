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
    def __init__(self, clean: Callable[[str], str], contents: bool, token_id: int):
        self.clean, self.contents, self.token_id = clean, contents, token_id

    def value(self, value, key: str | None = None):  # noqa: C901 - one branch per decoded type
        """Any decoded value: strings cleaned, secret-named fields masked."""
        kind = type(value)
        if key is not None and is_secret_name(key) and value not in (None, "", [], {}):
            return MASK
        if kind is str:
            return self.clean(value)
        if kind is dict:
            return {self.value(k): self.value(v, k if type(k) is str else None)
                    for k, v in value.items()}
        if kind in (list, tuple, set, frozenset):
            return kind(self.value(item) for item in value)
        if kind is Instance:
            return self.instance(value, self.value)
        return value

    def instance(self, value: Instance, fields: Callable) -> Instance:
        """A copy of a record, ``fields`` applied to what it was made from."""
        copy = Instance(value.cls, value.how, fields(value.args),
                        fields(value.kwargs) if value.kwargs else value.kwargs,
                        (value.made_by[0], fields(value.made_by[1])) if value.made_by else None)
        copy.state = fields(value.state)
        return copy

    def content(self, value, zero: bool = False):
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
            return {k: self.content(v, zero) for k, v in value.items()}
        if kind in (list, tuple):
            return kind(self.content(item, zero) for item in value)
        if kind is Instance:
            return self.instance(value, lambda part: self.content(part, zero))
        return value

    def fields(self, value, content: set[str]):
        """A request's or output's fields: those named in ``content`` replaced, others cleaned
        (dicts inside a record's state, pydantic's ``__dict__`` included, are walked)."""
        if type(value) is dict:
            return {k: (self.content(v, k in _ZEROED) if self.contents and k in content
                        else self.fields(v, content) if type(v) in (dict, tuple) and k == "__dict__"
                        else self.value(v, k if type(k) is str else None))
                    for k, v in value.items()}
        if type(value) is tuple:  # (dict, slots) state
            return tuple(self.fields(item, content) for item in value)
        return self.value(value)

    def output(self, out):
        if type(out) is not dict:
            return self.value(out)
        cleaned = self.fields(out, _OUTPUT_CONTENT)
        meta = out.get("meta_info")
        if self.contents and type(meta) is dict:
            cleaned["meta_info"] = {k: (self.content(v) if any(w in k for w in _TOKEN_WORDS)
                                        else self.value(v, k)) for k, v in meta.items()}
        return cleaned

    def record(self, record):
        if type(record) is not tuple or len(record) != 4 or type(record[0]) is not Instance:
            return self.value(record)
        obj, out, created, finished = record
        request = self.instance(obj, lambda part: self.fields(part, _REQUEST_CONTENT))
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
