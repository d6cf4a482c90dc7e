"""Crash dumps whose pickle refers to itself, or nests deeper than any SGLang dump, built for the
tests of every walker over loaded data (SYNTHETIC).

A real record (fixtures/sglang_dumps/crash_dump_0.5.12.pkl, the stand-in classes' dump) is
written back with crashlab's own writer around a sentinel string at the chosen place; the
sentinel's opcodes are then replaced by a hand-made value. The writer memoises nothing, so the
value's own MEMOIZE opcodes number the memo from 0 and its BINGETs can point back at the
containers that hold them: a list that contains itself, a dict that contains the list around it.

A shape, as the hypothesis strategies generate it:

- an int, a str or None;
- ("list", [shapes]), ("dict", [shapes]) (keys "k0", "k1", ...), ("tuple", [shapes]);
- ("back", n): the n-th list or dict around this place (0 the nearest): a reference cycle;
- ("deep", n): a list nested n deep (n lists, one in the other).
"""

from __future__ import annotations

import struct
from pickletools import code2op

from hypothesis import strategies as st

from crashlab import replay
from crashlab.picklesafe.nesting import WALK_DEPTH
from crashlab.picklesafe.writer import dumps
from tests.replay_support import FIXTURES

_CODE = {op.name: op.code.encode("latin-1") for op in code2op.values()}
SENTINEL = "crashlab-test-sentinel"
#: Where a shape goes in a dump: the request's sampling parameters, its rid, its text, its
#: output's meta_info, the server's arguments, a top-level key.
PLACES = ("sampling_params", "rid", "text", "meta_info", "server_args", "config_updates")


def _op(name: str, payload: bytes = b"") -> bytes:
    return _CODE[name] + payload


def _text(value: str) -> bytes:
    data = value.encode()
    return _op("SHORT_BINUNICODE", bytes([len(data)]) + data)


class _Emitter:
    def __init__(self):
        self.memo = 0
        self.around: list[int] = []  # memo indices of the lists and dicts being built

    def emit(self, shape) -> bytes:  # noqa: C901 - a branch per kind of shape
        if shape is None:
            return _op("NONE")
        if type(shape) is int:
            return _op("BININT", struct.pack("<i", shape))
        if type(shape) is str:
            return _text(shape)
        kind, content = shape
        if kind == "deep":
            return _op("EMPTY_LIST") * content + _op("APPEND") * (content - 1)
        if kind == "back":
            index = self.around[-1 - content % len(self.around)]
            return (_op("BINGET", bytes([index])) if index < 256
                    else _op("LONG_BINGET", struct.pack("<I", index)))
        if kind == "tuple":
            return _op("MARK") + b"".join(self.emit(item) for item in content) + _op("TUPLE")
        start = _op("EMPTY_LIST" if kind == "list" else "EMPTY_DICT") + _op("MEMOIZE")
        self.around.append(self.memo)
        self.memo += 1
        if kind == "list":
            items = b"".join(self.emit(item) for item in content)
            end = _op("MARK") + items + _op("APPENDS") if content else b""
        else:
            items = b"".join(_text(f"k{number}") + self.emit(item)
                             for number, item in enumerate(content))
            end = _op("MARK") + items + _op("SETITEMS") if content else b""
        self.around.pop()
        return start + end


def value_bytes(shape) -> bytes:
    """The opcodes of ``shape`` (back references need a list or dict around them)."""
    return _Emitter().emit(shape)


def is_cyclic(shape) -> bool:
    if type(shape) is not tuple:
        return False
    kind, content = shape
    if kind == "back":
        return True
    return kind in ("list", "dict", "tuple") and any(is_cyclic(item) for item in content)


def dump_with(shape, place: str = "sampling_params") -> bytes:
    """A one-request SGLang 0.5.12 dump whose ``place`` holds ``shape``."""
    source = replay.load(FIXTURES / "crash_dump_0.5.12.pkl")
    obj, out, created, finished = source.requests[0]._record
    server_args: dict = {"model_path": "m", "tp_size": 1}
    root = {"server_args": server_args, "launch_command": "python -m sglang.launch_server",
            "requests": [(obj, out, created, finished)]}
    if place == "sampling_params":
        obj.state["sampling_params"] = {"max_new_tokens": 4, "stop": SENTINEL}
    elif place in ("rid", "text"):
        obj.state[place] = SENTINEL
    elif place == "meta_info":
        out["meta_info"] = {**out["meta_info"], "extra": SENTINEL}
    elif place == "server_args":
        server_args["extra"] = SENTINEL
    else:
        root[place] = SENTINEL
    data = dumps(root)
    assert data.count(_text(SENTINEL)) == 1
    return data.replace(_text(SENTINEL), value_bytes(shape))


#: A list or dict that holds itself, or the list or dict around it, somewhere inside.
_LEAVES = st.one_of(st.none(), st.integers(-5, 300), st.text(max_size=4))


def _containers(children):
    return st.one_of(st.tuples(st.just("list"), st.lists(children, max_size=3)),
                     st.tuples(st.just("dict"), st.lists(children, max_size=3)),
                     st.tuples(st.just("tuple"), st.lists(children, max_size=3)))


#: Shapes with a reference back to a list or dict around them: their walk never ends.
CYCLIC = st.tuples(st.sampled_from(["list", "dict"]), st.lists(
    st.recursive(st.one_of(_LEAVES, st.tuples(st.just("back"), st.integers(0, 4))),
                 _containers, max_leaves=8), min_size=1, max_size=3)).filter(is_cyclic)
#: Shapes nested deeper than any SGLang dump (bounds.MAX_DEPTH is 64), to 20,000 levels.
DEEP = st.tuples(st.just("deep"), st.integers(70, 20_000))
#: Shapes nested deeper than a walker goes (nesting.WALK_DEPTH).
DEEPER_THAN_A_WALK = st.tuples(st.just("deep"), st.integers(WALK_DEPTH + 1, 20_000))


def build(shape, json: bool = False, around: list | None = None):
    """``shape`` as Python values (with ``json``, tuples as lists): what a walker is given."""
    around = [] if around is None else around
    if type(shape) is not tuple:
        return shape
    kind, content = shape
    if kind == "deep":
        made: list = []
        inner = made
        for _ in range(content - 1):
            inner.append([])
            inner = inner[0]
        return made
    if kind == "back":
        return around[-1 - content % len(around)]
    if kind == "tuple":
        items = [build(item, json, around) for item in content]
        return items if json else tuple(items)
    container: list | dict = [] if kind == "list" else {}
    around.append(container)
    for number, item in enumerate(content):
        if type(container) is list:
            container.append(build(item, json, around))
        else:
            container[f"k{number}"] = build(item, json, around)
    around.pop()
    return container
