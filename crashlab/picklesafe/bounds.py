"""Refuse decoded pickles whose shared references would blow up whatever walks them next.

The memo lets a pickle reference one object many times: a list of a thousand references to a
list of a thousand references to a megabyte string costs a few kilobytes of file and a terabyte
of JSON (a "billion laughs"), and a list can even contain itself. Everything after loading
(records, request bodies, --json) walks values as trees, so the tree is measured once here,
iteratively and with a budget proportional to the file, before anything else touches it.
"""

from __future__ import annotations

from .intruns import TokenIds
from .opcodes import PickleRefused
from .pickled import Instance

#: Deeper than any SGLang dump (about 8 levels: dict, list, tuple, request, sampling params,
#: lists of stop strings) and shallow enough for recursive code later.
MAX_DEPTH = 64
#: Nodes and string bytes the tree may expand to, per byte of file, plus a floor for small files.
NODES_PER_BYTE, NODE_FLOOR = 4, 200_000
BYTES_PER_BYTE, BYTE_FLOOR = 32, 32 << 20
_SCALARS = frozenset({int, float, bool, type(None), complex})
_TEXTS = frozenset({str, bytes, bytearray, TokenIds})


def children(value):
    """The values a decoded value holds (for a stand-in: its arguments, state and builder call)."""
    kind = type(value)
    if kind is dict:
        return [*value.keys(), *value.values()]
    if kind in (list, tuple, set, frozenset):
        return value
    if kind is Instance:
        parts = [*value.args, value.state]
        if value.kwargs:
            parts += [*value.kwargs.keys(), *value.kwargs.values()]
        if value.made_by:
            parts += value.made_by[1][1:]
        return parts
    return ()


def kind_name(value) -> str:
    """What a decoded value is, for a message: its type, or a stand-in's class."""
    return value.cls.qualified if type(value) is Instance else type(value).__name__


def cycle_in(root):
    """A container under ``root`` (``root`` included) that contains itself, directly or through
    others, or None: a depth-first walk that keeps the path, each container walked once."""
    done: set[int] = set()
    on_path = {id(root)}
    stack = [(root, iter(children(root)))]
    while stack:
        value, members = stack[-1]
        for child in members:
            kind = type(child)
            if kind in _SCALARS or kind in _TEXTS:
                continue
            if id(child) in on_path:
                return child
            if id(child) not in done:
                on_path.add(id(child))
                stack.append((child, iter(children(child))))
                break
        else:
            stack.pop()
            on_path.discard(id(value))
            done.add(id(value))
    return None


def check(root, file_size: int, source: str) -> None:
    """Raise PickleRefused when the tree under ``root`` is too deep or expands too far."""
    node_budget = NODES_PER_BYTE * file_size + NODE_FLOOR
    byte_budget = BYTES_PER_BYTE * file_size + BYTE_FLOOR
    nodes = size = 0
    pending = [(root, 0)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise _refusal(root, source, f"values nested more than {MAX_DEPTH} deep")
        held = children(value)
        nodes += len(held)
        for child in held:
            kind = type(child)
            if kind in _SCALARS:
                continue
            if kind in _TEXTS:
                size += len(child)
            else:
                pending.append((child, depth + 1))
        if nodes > node_budget or size > byte_budget:
            raise _refusal(root, source, "its shared references expand to far more data than the "
                                         "file holds (a pickle bomb?)")


def _refusal(root, source: str, otherwise: str) -> PickleRefused:
    """The refusal of a tree too deep or too big: a container that contains itself where there
    is one (it makes the tree both), else ``otherwise``."""
    cycle = cycle_in(root)
    what = (f"a {kind_name(cycle)} that contains itself (a reference cycle in the values, which "
            "no walk of them ends)" if cycle is not None else otherwise)
    return PickleRefused(f"{source}: refused to load this pickle: {what}")
