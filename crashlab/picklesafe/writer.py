"""Write a decoded pickle (plain data and allowlist stand-ins) back as pickle bytes, without
importing what it names.

The stdlib Pickler verifies every class it writes by importing its module, which would import
sglang (or fail where it is absent), so the opcodes are emitted here directly: protocol 4, the
stream CPython's pickler writes for the same values, without memoisation (a tree that passed
bounds.check is of bounded size; one that holds itself is refused, nesting.py). A stand-in is
written as the opcodes that made it (NEWOBJ, NEWOBJ_EX, REDUCE or its builder call, then BUILD
with its state).
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Callable

# pickletools' own table of opcodes by code, which typeshed does not declare
from pickletools import code2op  # type: ignore[attr-defined]
from typing import Any

from .allowlist import Global
from .intruns import TokenIds
from .nesting import Path, descend
from .pickled import Instance

_OP = {op.name: op.code.encode("latin-1") for op in code2op.values()}
_BATCH = 1000
_BYTEARRAY = Global("builtins", "bytearray", "container")
_COMPLEX = Global("builtins", "complex", "container")


class _Emitter:
    def __init__(self):
        self.out = bytearray()
        self.path: Path = ()

    def op(self, name: str, payload: bytes = b"") -> None:
        self.out += _OP[name] + payload

    def value(self, value) -> None:
        """Append ``value``'s opcodes, by its exact type (as the stdlib pickler dispatches). A
        value that holds itself, or is nested past nesting.WALK_DEPTH, is refused
        (nesting.TooDeep): without a memo its pickle would never end."""
        write = _WRITERS.get(type(value))
        if write is None:
            raise TypeError(f"cannot write a {type(value).__name__} into a dump")
        if type(value) in _LEAVES:
            write(self, value)
            return
        around = self.path
        self.path = descend(around, value)
        write(self, value)
        self.path = around

    def none(self, value: None) -> None:
        self.op("NONE")

    def boolean(self, value: bool) -> None:
        self.op("NEWTRUE" if value else "NEWFALSE")

    def floating(self, value: float) -> None:
        self.op("BINFLOAT", struct.pack(">d", value))

    def text(self, value: str) -> None:
        self.sized(value.encode("utf-8", "surrogatepass"), "SHORT_BINUNICODE", "BINUNICODE",
                   "BINUNICODE8")

    def raw_bytes(self, value: bytes) -> None:
        self.sized(value, "SHORT_BINBYTES", "BINBYTES", "BINBYTES8")

    def byte_array(self, value: bytearray) -> None:
        self.call(_BYTEARRAY, (bytes(value),))

    def complex_number(self, value: complex) -> None:
        self.call(_COMPLEX, (value.real, value.imag))

    def token_ids(self, value: TokenIds) -> None:
        """A run of token ids goes back as the list or tuple it was read from."""
        self.value(tuple(value) if value.was_tuple else value.tolist())

    def list_items(self, value: list) -> None:
        self.op("EMPTY_LIST")
        self.batches(value, "APPENDS")

    def dict_items(self, value: dict) -> None:
        self.op("EMPTY_DICT")
        self.batches([part for pair in value.items() for part in pair], "SETITEMS", step=2)

    def set_items(self, value: set) -> None:
        self.op("EMPTY_SET")
        self.batches(list(value), "ADDITEMS")

    def frozenset_items(self, value: frozenset) -> None:
        self.op("MARK")
        for item in value:
            self.value(item)
        self.op("FROZENSET")

    def global_name(self, value: Global) -> None:
        self.value(value.module)
        self.value(value.name)
        self.op("STACK_GLOBAL")

    def integer(self, value: int) -> None:
        if 0 <= value < 256:
            self.op("BININT1", bytes([value]))
        elif 0 <= value < 65536:
            self.op("BININT2", struct.pack("<H", value))
        elif -(1 << 31) <= value < (1 << 31):
            self.op("BININT", struct.pack("<i", value))
        else:
            data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
            if len(data) < 256:
                self.op("LONG1", bytes([len(data)]) + data)
            else:
                self.op("LONG4", struct.pack("<i", len(data)) + data)

    def sized(self, data: bytes, short: str, medium: str, large: str) -> None:
        if len(data) < 256:
            self.op(short, bytes([len(data)]) + data)
        elif len(data) < (1 << 32):
            self.op(medium, struct.pack("<I", len(data)) + data)
        else:
            self.op(large, struct.pack("<Q", len(data)) + data)

    def tuple(self, items: tuple) -> None:
        if not items:
            self.op("EMPTY_TUPLE")
            return
        if len(items) > 3:
            self.op("MARK")
        for item in items:
            self.value(item)
        self.op({1: "TUPLE1", 2: "TUPLE2", 3: "TUPLE3"}.get(len(items), "TUPLE"))

    def batches(self, flat: list, opcode: str, step: int = 1) -> None:
        size = _BATCH * step
        for start in range(0, len(flat), size):
            self.op("MARK")
            for item in flat[start:start + size]:
                self.value(item)
            self.op(opcode)

    def call(self, function: Global, args: builtins.tuple[object, ...]) -> None:
        self.value(function)
        self.tuple(args)
        self.op("REDUCE")

    def instance(self, value: Instance) -> None:
        if value.made_by:
            self.call(*value.made_by)
        elif value.how == "REDUCE":
            self.call(value.cls, value.args)
        else:
            self.value(value.cls)
            self.tuple(value.args)
            if value.how == "NEWOBJ_EX":
                self.value(value.kwargs or {})
            self.op(value.how)
        if value.state is not None:
            self.value(value.state)
            self.op("BUILD")


#: The writer of each type a decoded dump holds (exact types: a subclass is not written).
#: the writer of each exact type (a subclass is refused, as by the stdlib pickler's dispatch)
_WRITERS: dict[type, Callable[[_Emitter, Any], None]] = {type(None): _Emitter.none, bool: _Emitter.boolean, int: _Emitter.integer,
            float: _Emitter.floating, str: _Emitter.text, bytes: _Emitter.raw_bytes,
            bytearray: _Emitter.byte_array, complex: _Emitter.complex_number,
            tuple: _Emitter.tuple, TokenIds: _Emitter.token_ids, list: _Emitter.list_items,
            dict: _Emitter.dict_items, set: _Emitter.set_items, frozenset: _Emitter.frozenset_items,
            Global: _Emitter.global_name, Instance: _Emitter.instance}


#: What holds no other value: written without entering the path (nesting.descend).
_LEAVES = frozenset({type(None), bool, int, float, str, bytes, bytearray, complex, TokenIds, Global})


def dumps(value) -> bytes:
    """Protocol-4 pickle bytes of a decoded value (plain data and allowlist stand-ins)."""
    emitter = _Emitter()
    emitter.op("PROTO", bytes([4]))
    emitter.value(value)
    emitter.op("STOP")
    return bytes(emitter.out)
