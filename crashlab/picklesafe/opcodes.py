"""The state of one read of a pickle, and what each opcode does to it, without importing or
calling anything a pickle names.

Every declared length is checked against the bytes left, the memo is a dict, and dict keys and
set members must be of a type whose hash the file cannot steer (pickled.py). A global is only
ever an ``allowlist.Global`` record; what a call on one makes is calls.py's. The interpreter
loop that drives these handlers, and inlines the commonest opcodes, is unpickler.py.
"""

from __future__ import annotations

import struct

# pickletools' own table of opcodes by code, which typeshed does not declare
from pickletools import code2op  # type: ignore[attr-defined]

from ..errors import BadInput
from ..escape import printable
from . import calls
from .allowlist import Global, lookup
from .calls import CallRefused, describe
from .pickled import Instance, unsafe_key

_MAX_LINE = 1024
_RELEASE_EVERY = 2 << 20
_MAX_PROTOCOL = 5


class PickleRefused(BadInput):
    """A pickle crashlab will not read: hostile, damaged, or not a crash dump."""


class Truncated(PickleRefused):
    """The data ran out before STOP, with every byte before the cut read as valid pickle: the
    file was cut (a writer killed, a full disk). Holds what was read, for the loader to salvage
    the complete requests from; ``bytes_missing`` is a lower bound where a FRAME declared more
    bytes than the file has, else None."""

    def __init__(self, message: str, stack: list, marks: list[int], bytes_missing: int | None):
        super().__init__(message)
        self.stack, self.marks, self.bytes_missing = stack, marks, bytes_missing


class Opcodes:
    """One read of ``data``: its position, stack, marks and memo, and an ``op_`` method for
    each supported opcode that the interpreter loop does not inline."""

    def __init__(self, data, source: str, on_record=None, release=None):
        self.data = data
        self.release = release
        self.released = 0
        self.source = source
        self.pos = 0
        self.stack: list = []
        self.marks: list[int] = []
        self.memo: dict[int, object] = {}
        self.on_record = on_record
        self.frame_end: int | None = None  # where the last FRAME said its bytes end
        self.frame_overrun: PickleRefused | None = None

    # -- failing ----------------------------------------------------------------------------
    def refuse(self, why: str, at: int | None = None) -> PickleRefused:
        where = self.pos - 1 if at is None else at
        return PickleRefused(f"{self.source}: refused to load this pickle: {why} "
                             f"(at byte {where}); nothing in it was run")

    def cut(self, why: str, reading_at: int, at: int | None = None) -> PickleRefused:
        """The refusal for a read past the last byte at ``reading_at``: Truncated (salvageable)
        unless the read began inside a frame that ends within the file. A pickler never lets an
        opcode straddle the end of its frame, so that read runs past where its own bytes end:
        a forged length, not a cut."""
        end = len(self.data)
        refusal = self.refuse(why, at)
        if self.frame_end is not None and reading_at < self.frame_end <= end:
            return refusal
        missing = self.frame_end - end if self.frame_end is not None and self.frame_end > end \
            else None
        return Truncated(str(refusal), self.stack, self.marks, missing)

    # -- reading ----------------------------------------------------------------------------
    def take(self, count: int, what: str) -> bytes:
        start = self.pos
        if count < 0:
            raise self.refuse(f"{what} declares {count:,} bytes but only "
                              f"{len(self.data) - start:,} remain (truncated or forged)")
        if start + count > len(self.data):
            raise self.cut(f"{what} declares {count:,} bytes but only "
                           f"{len(self.data) - start:,} remain (truncated or forged)", start)
        self.pos = start + count
        return self.data[start:self.pos]

    def unpack(self, fmt: str, what: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size, what))[0]

    def line(self, what: str) -> str:
        end = self.data.find(b"\n", self.pos, self.pos + _MAX_LINE)
        if end < 0 and len(self.data) - self.pos < _MAX_LINE:
            raise self.cut(f"{what} has no end of line before the end of the file (truncated)",
                           self.pos)
        if end < 0:
            raise self.refuse(f"{what} has no end of line within {_MAX_LINE} bytes")
        text = self.take(end + 1 - self.pos, what)[:-1]
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError:
            raise self.refuse(f"{what} is not UTF-8") from None

    def text(self, count: int, what: str) -> str:
        raw = self.take(count, what)
        try:
            return str(raw, "utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise self.refuse(f"{what} is not valid UTF-8") from None

    # -- the stack --------------------------------------------------------------------------
    def pop(self):
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise self.refuse("the stack is empty (malformed pickle)")
        return self.stack.pop()

    def top(self):
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise self.refuse("the stack is empty (malformed pickle)")
        return self.stack[-1]

    def pop_mark(self) -> list:
        if not self.marks:
            raise self.refuse("an opcode needs a MARK and there is none (malformed pickle)")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def keys_checked(self, keys) -> None:
        problem = unsafe_key(keys)
        if problem:
            raise self.refuse(problem)

    # -- opcodes: framing and constants ----------------------------------------------------------
    def op_proto(self):
        version = self.take(1, "PROTO")[0]
        if version > _MAX_PROTOCOL:
            raise self.refuse(f"pickle protocol {version} is newer than any Python writes")

    def op_frame(self):
        """A frame longer than the rest of the file is read on: a cut file ends inside its
        last frame. Unless the data then runs out (Truncated), the overrun is the refusal."""
        size = self.unpack("<Q", "FRAME")
        self.frame_end = self.pos + size
        if size > len(self.data) - self.pos and self.frame_overrun is None:
            self.frame_overrun = self.refuse(f"FRAME declares {size:,} bytes but only "
                                             f"{len(self.data) - self.pos:,} remain "
                                             "(truncated or forged)")
        if self.release is not None and self.pos - self.released > _RELEASE_EVERY:
            self.release(self.pos)  # every byte before a frame was read (the memo holds copies)
            self.released = self.pos

    def op_stop(self):
        if self.frame_overrun is not None:
            raise self.frame_overrun
        return True

    def op_long1(self):
        size = self.take(1, "LONG1")[0]
        self.stack.append(int.from_bytes(self.take(size, "LONG1"), "little", signed=True))

    def op_long4(self):
        size = self.unpack("<i", "LONG4")
        self.stack.append(int.from_bytes(self.take(size, "LONG4"), "little", signed=True))

    def op_binunicode(self):
        self.stack.append(self.text(self.unpack("<I", "BINUNICODE"), "BINUNICODE"))

    def op_binunicode8(self):
        self.stack.append(self.text(self.unpack("<Q", "BINUNICODE8"), "BINUNICODE8"))

    def op_short_binbytes(self):
        self.stack.append(self.take(self.take(1, "SHORT_BINBYTES")[0], "SHORT_BINBYTES"))

    def op_binbytes(self):
        self.stack.append(self.take(self.unpack("<I", "BINBYTES"), "BINBYTES"))

    def op_binbytes8(self):
        self.stack.append(self.take(self.unpack("<Q", "BINBYTES8"), "BINBYTES8"))

    def op_bytearray8(self):
        self.stack.append(bytearray(self.take(self.unpack("<Q", "BYTEARRAY8"), "BYTEARRAY8")))

    # -- opcodes: containers ----------------------------------------------------------------
    def op_pop(self):
        if self.marks and len(self.stack) == self.marks[-1]:
            self.marks.pop()
        else:
            self.pop()

    def op_pop_mark(self):
        self.pop_mark()

    def op_dup(self):
        self.stack.append(self.top())

    def op_empty_tuple(self):
        self.stack.append(())

    def op_tuple1(self):
        self.stack.append((self.pop(),))

    def op_tuple2(self):
        second = self.pop()
        self.stack.append((self.pop(), second))

    def op_tuple3(self):
        third, second = self.pop(), self.pop()
        self.stack.append((self.pop(), second, third))

    def op_tuple(self):
        items = tuple(self.pop_mark())
        self.stack.append(items)
        if self.on_record is not None and len(items) == 4 and type(items[0]) is Instance:
            self.on_record(items)

    def op_list(self):
        self.stack.append(self.pop_mark())

    def op_append(self):
        item = self.pop()
        self.target(list, "APPEND").append(item)

    def op_appends(self):
        items = self.pop_mark()
        self.target(list, "APPENDS").extend(items)

    def op_dict(self):
        items = self.pop_mark()
        if len(items) % 2:
            raise self.refuse("DICT with an odd number of items")
        self.keys_checked(items[::2])
        self.stack.append(dict(zip(items[::2], items[1::2], strict=True)))

    def op_setitem(self):
        value, key = self.pop(), self.pop()
        self.keys_checked((key,))
        self.target(dict, "SETITEM")[key] = value

    def op_setitems(self):
        items = self.pop_mark()
        if len(items) % 2:
            raise self.refuse("SETITEMS with an odd number of items")
        keys = items[::2]
        self.keys_checked(keys)
        self.target(dict, "SETITEMS").update(zip(keys, items[1::2], strict=True))

    def op_empty_set(self):
        self.stack.append(set())

    def op_additems(self):
        items = self.pop_mark()
        self.keys_checked(items)
        self.target(set, "ADDITEMS").update(items)

    def op_frozenset(self):
        items = self.pop_mark()
        self.keys_checked(items)
        self.stack.append(frozenset(items))

    def target(self, kind: type, opcode: str):
        found = self.top()
        if type(found) is not kind:
            raise self.refuse(f"{opcode} on a {type(found).__name__}, not a {kind.__name__}")
        return found

    # -- opcodes: the memo ------------------------------------------------------------------
    def op_memoize(self):
        self.memo[len(self.memo)] = self.top()

    def op_binput(self):
        self.memo[self.take(1, "BINPUT")[0]] = self.top()

    def op_long_binput(self):
        self.memo[self.unpack("<I", "LONG_BINPUT")] = self.top()

    # -- opcodes: globals and objects -------------------------------------------------------
    def op_global(self):
        module = self.line("GLOBAL module")
        self.stack.append(self.allowed(module, self.line("GLOBAL name")))

    def op_stack_global(self):
        name, module = self.pop(), self.pop()
        if type(module) is not str or type(name) is not str:
            raise self.refuse("STACK_GLOBAL with a module or name that is not a string")
        self.stack.append(self.allowed(module, name))

    def allowed(self, module: str, name: str) -> Global:
        found = lookup(module, name)
        if found is None:
            raise self.refuse(f"it names {printable(f'{module}.{name}')}, which is neither a "
                              "class under SGLang's or Hugging Face's packages nor a data helper "
                              "an SGLang dump uses")
        return found

    def op_reduce(self):
        args = self.pop()
        function = self.pop()
        if type(args) is not tuple:
            raise self.refuse("REDUCE with arguments that are not a tuple")
        self.stack.append(self.made(calls.call, function, args))

    def op_newobj(self):
        args, cls = self.pop(), self.pop()
        self.stack.append(self.made(calls.new, cls, args, None, "NEWOBJ"))

    def op_newobj_ex(self):
        kwargs, args, cls = self.pop(), self.pop(), self.pop()
        if type(kwargs) is not dict:
            raise self.refuse("NEWOBJ_EX with keyword arguments that are not a dict")
        self.stack.append(self.made(calls.new, cls, args, kwargs, "NEWOBJ_EX"))

    def made(self, how, *arguments):
        """What a call makes (calls.py), its refusal placed at this opcode."""
        try:
            return how(*arguments)
        except CallRefused as why:
            raise self.refuse(str(why)) from None

    def op_build(self):
        state = self.pop()
        target = self.top()
        if type(target) is not Instance or target.state is not None:
            raise self.refuse(f"BUILD on {describe(target)}, not a fresh object of an allowed "
                              "class")
        target.state = state


def unsupported(code: int) -> str:
    try:
        name = code2op[chr(code)].name
    except KeyError:
        return f"unknown opcode 0x{code:02x}"
    return (f"opcode {name}, which a crash dump never needs (persistent ids, extension codes, "
            "out-of-band buffers and protocol 0/1 text opcodes are not supported)")


#: Opcode byte -> handler name (op_<name>); everything else is refused.
SUPPORTED = {
    op.code: op.name for op in code2op.values() if op.name in {
        "PROTO", "FRAME", "STOP", "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2",
        "LONG1", "LONG4", "BINFLOAT", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8",
        "SHORT_BINBYTES", "BINBYTES", "BINBYTES8", "BYTEARRAY8", "MARK", "POP", "POP_MARK", "DUP",
        "EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "TUPLE", "EMPTY_LIST", "LIST", "APPEND",
        "APPENDS", "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS", "EMPTY_SET", "ADDITEMS",
        "FROZENSET", "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "GLOBAL",
        "STACK_GLOBAL", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "BUILD",
    }
}
