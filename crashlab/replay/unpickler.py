"""Read a pickle as data: an interpreter of pickle opcodes that never imports or calls anything.

Why not ``pickle.Unpickler`` with an allowlisting ``find_class``: on CPython 3.11 its C code
allocates the length a BINBYTES8/BYTEARRAY8 opcode declares before reading a byte of it, grows
the memo array to twice the largest index a LONG_BINPUT names (five bytes of file can ask for
32 GiB, zeroed), lets BUILD set attributes on whatever ``find_class`` returned, and inserts keys
whose hashes the file chooses into dicts and sets (a few hundred thousand colliding ints make
loading quadratic). Here every declared length is checked against the bytes left, the memo is a
dict, dict keys and set members must be of a type whose hash the file cannot steer, and a global
is only ever an ``allowlist.Global`` record: nothing the file names is imported.

What can run code in a pickle is a call (REDUCE, NEWOBJ, NEWOBJ_EX, BUILD through
``__setstate__``; INST/OBJ, persistent ids and extension codes), never a name. So a call on an
SGLang or Hugging Face class, or through the few reconstructors the stdlib pickler writes for
data, makes an inert ``Instance`` record of what was passed; a call on anything else is refused
(allowlist.py has the rules).

Speed: token ids are most of a dump's bytes, so a list or tuple made only of integer opcodes is
decoded in one call (intruns.py) into a compact ``TokenIds`` array; the rest goes through the
loop in ``_Machine.run``, whose commonest opcodes are inlined.

Only the binary opcodes of protocols 2 to 5 that CPython's pickler writes for data are known;
SGLang writes protocol 4 (Python <= 3.13) or 5. Anything else is refused with its name and offset.
"""

from __future__ import annotations

import mmap
import re
import struct
from pickletools import code2op

from ..errors import BadInput
from ..escape import printable
from .allowlist import POSITIONAL_FIELDS, Global, lookup
from .intruns import run as int_run


class PickleRefused(BadInput):
    """A pickle crashlab will not read: hostile, damaged, or not a crash dump."""


class Instance:
    """An object of an allowed class as the pickle described it; none of its code ran.

    ``how`` is the opcode that made it (NEWOBJ, NEWOBJ_EX or REDUCE), ``args``/``kwargs`` what
    that opcode passed, ``state`` what BUILD passed, and ``made_by`` the builder call (function
    and arguments) for objects rebuilt through one. Kept so that a dump can be written back.
    """

    __slots__ = ("cls", "how", "args", "kwargs", "state", "made_by")

    def __init__(self, cls: Global, how: str, args: tuple = (), kwargs: dict | None = None,
                 made_by: tuple[Global, tuple] | None = None):
        self.cls = cls
        self.how = how
        self.args = args
        self.kwargs = kwargs
        self.state = None
        self.made_by = made_by

    def __repr__(self) -> str:
        return f"<{self.cls.qualified} (from a pickle)>"

    def fields(self) -> dict:
        """Field name -> value, however the pickle spelled the object.

        Dataclasses and plain classes: the BUILD dict (or the ``(dict, slots)`` pair); pydantic
        models: the ``__dict__`` entry of theirs; msgspec structs and enums: their positional
        values, named where allowlist.POSITIONAL_FIELDS knows the names, an enum's one value as
        ``value``.
        """
        if self.made_by:
            return dict(self.made_by[1][1])
        state, slots = self.state, None
        if type(state) is tuple and len(state) == 2:
            state, slots = state
        if type(state) is dict and type(state.get("__dict__")) is dict:
            state = state["__dict__"]  # pydantic v2 (__dict__, __pydantic_extra__, ...)
        found = dict(state) if type(state) is dict else {}
        if type(slots) is dict:
            found.update(slots)
        names = POSITIONAL_FIELDS.get((self.cls.module, self.cls.name), ())
        if self.args and len(self.args) <= len(names):
            found.update(zip(names, self.args))
        elif len(self.args) == 1 and self.how == "REDUCE" and self.state is None:
            found["value"] = self.args[0]
        elif self.args:
            found["args"] = list(self.args)
        if self.kwargs:
            found.update(self.kwargs)
        return found


#: Keys a file cannot make collide: str and bytes hash with a per-process secret (SipHash), small
#: ints hash to themselves, stand-ins by identity. Bigger ints and floats hash by value, and so
#: does a tuple of ints (each step of the tuple hash can be inverted to aim at a chosen value); a
#: tuple of strings, like ServerArgs' ``_cuda_graph_config_locked`` entries, is keyed by the secret.
_SMALL_INT = 1 << 60
_MAX_LINE = 1024
_RELEASE_EVERY = 16 << 20
_MAX_PROTOCOL = 5


def _secret_hashed(key) -> bool:
    kind = type(key)
    if kind is str or kind is bytes or kind is bool or key is None or kind is Instance:
        return True
    return kind is tuple and all(_secret_hashed(member) for member in key)


def _safe_key(key) -> bool:
    if _secret_hashed(key):
        return True
    return type(key) is int and -_SMALL_INT < key < _SMALL_INT


# Opcode bytes the fast paths look ahead for (the loop in _Machine.run spells its own inline).
_MEMOIZE, _BINPUT, _LONG_BINPUT = 0x94, 0x71, 0x72
_NONE, _NEWTRUE, _NEWFALSE = 0x4E, 0x88, 0x89
_BININT, _BININT1, _BININT2 = 0x4A, 0x4B, 0x4D
_MARK, _APPENDS, _APPEND, _TUPLE, _FRAME = 0x28, 0x65, 0x61, 0x74, 0x95
_INT_OPS = frozenset({_BININT, _BININT1, _BININT2})
_CONSTANTS = {_NONE: None, _NEWTRUE: True, _NEWFALSE: False}
_CONSTANT_FIELDS = re.compile(rb"(?:h.[N\x88\x89])+", re.DOTALL)
_WIDE_CONSTANT_FIELDS = re.compile(rb"(?:j....[N\x88\x89])+", re.DOTALL)
_MEMO_OPS = {_MEMOIZE: 1, _BINPUT: 2, _LONG_BINPUT: 5}  # opcode -> its length with argument
_UNPACK_UINT = struct.Struct("<I").unpack_from
_UNPACK_INT = struct.Struct("<i").unpack_from
_UNPACK_USHORT = struct.Struct("<H").unpack_from
_UNPACK_DOUBLE = struct.Struct(">d").unpack_from


class _Machine:
    """One run of the interpreter over ``data``; ``run()`` returns the pickled value."""

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
        self.handlers = {ord(code): getattr(self, f"op_{name.lower()}")
                         for code, name in _SUPPORTED.items() if name not in _INLINED}

    # -- failing ----------------------------------------------------------------------------
    def refuse(self, why: str, at: int | None = None) -> PickleRefused:
        where = self.pos - 1 if at is None else at
        return PickleRefused(f"{self.source}: refused to load this pickle: {why} "
                             f"(at byte {where}); nothing in it was run")

    # -- reading ----------------------------------------------------------------------------
    def take(self, count: int, what: str) -> bytes:
        start = self.pos
        if count < 0 or start + count > len(self.data):
            raise self.refuse(f"{what} declares {count:,} bytes but only "
                              f"{len(self.data) - start:,} remain (truncated or forged)")
        self.pos = start + count
        return self.data[start:self.pos]

    def unpack(self, fmt: str, what: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size, what))[0]

    def line(self, what: str) -> str:
        end = self.data.find(b"\n", self.pos, self.pos + _MAX_LINE)
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
        for key in keys:
            if type(key) is not str and not _safe_key(key):
                raise self.refuse(
                    f"a {type(key).__name__} used as a dict key or set member; SGLang dumps key "
                    "by strings, and such keys could be chosen to collide and stall loading")

    # -- running ----------------------------------------------------------------------------
    def run(self):
        """The opcode loop. The commonest opcodes of a dump are inlined (each branch does what
        its ``op_`` method would); every other opcode goes through ``self.handlers``."""
        data, handlers, memo, stack, marks = self.data, self.handlers, self.memo, self.stack, self.marks
        end = len(data)
        pos = self.pos
        try:
            while True:
                code = data[pos]
                pos += 1
                if code == 0x68 or code == 0x6A:  # BINGET, LONG_BINGET
                    wide = code == 0x6A
                    after = pos + 4 if wide else pos + 1
                    if after + 1 < end and data[after] in _CONSTANTS and data[after + 1] == code:
                        pos = self.constant_fields(pos - 1, wide)
                        continue
                    index = _UNPACK_UINT(data, pos)[0] if wide else data[pos]
                    pos = after
                    try:
                        stack.append(memo[index])
                    except KeyError:
                        self.pos = pos
                        raise self.refuse(f"memo entry {index} is read before it is written") \
                            from None
                elif code == 0x94:  # MEMOIZE
                    if len(stack) <= (marks[-1] if marks else 0):
                        self.pos = pos
                        raise self.refuse("the stack is empty (malformed pickle)")
                    memo[len(memo)] = stack[-1]
                elif code == 0x8C:  # SHORT_BINUNICODE
                    size = data[pos]
                    pos += 1
                    if pos + size > end:
                        self.pos = pos
                        self.take(size, "SHORT_BINUNICODE")
                    try:
                        stack.append(str(data[pos:pos + size], "utf-8", "surrogatepass"))
                    except UnicodeDecodeError:
                        self.pos = pos
                        raise self.refuse("SHORT_BINUNICODE is not valid UTF-8") from None
                    pos += size
                elif code == 0x4E:  # NONE
                    stack.append(None)
                elif code == 0x89:  # NEWFALSE
                    stack.append(False)
                elif code == 0x88:  # NEWTRUE
                    stack.append(True)
                elif code == 0x28:  # MARK
                    if data[pos] in _INT_OPS:
                        values, stop = int_run(data, pos)
                        if stop < end and data[stop] == _TUPLE:
                            values.was_tuple = True
                            stack.append(values)
                            pos = stop + 1
                            continue
                    marks.append(len(stack))
                elif code == 0x7D:  # EMPTY_DICT
                    stack.append({})
                elif code == 0x5D:  # EMPTY_LIST
                    made = self.token_list(pos) if pos < end and data[pos] in _MEMO_OPS else None
                    if made is None:
                        stack.append([])
                    else:
                        pos = made
                elif code == 0x4B:  # BININT1
                    stack.append(data[pos])
                    pos += 1
                elif code == 0x4D:  # BININT2
                    stack.append(_UNPACK_USHORT(data, pos)[0])
                    pos += 2
                elif code == 0x4A:  # BININT
                    stack.append(_UNPACK_INT(data, pos)[0])
                    pos += 4
                elif code == 0x47:  # BINFLOAT
                    stack.append(_UNPACK_DOUBLE(data, pos)[0])
                    pos += 8
                else:
                    self.pos = pos
                    handler = handlers.get(code)
                    if handler is None:
                        raise self.refuse(_unsupported(code))
                    if handler():
                        return self.pop()
                    pos = self.pos
        except (IndexError, struct.error):  # only reads past the last byte raise these
            raise self.refuse("the pickle ends in the middle of an opcode or before its STOP "
                              "(truncated)", at=end) from None

    def constant_fields(self, pos: int, wide: bool) -> int:
        """A run of (BINGET or LONG_BINGET name, None/True/False) pairs, most of a dataclass's
        state in a dump (a request's unset fields), pushed in one go; returns the offset after
        it. ``wide``: the names are LONG_BINGETs (a dump whose ServerArgs filled the first 256
        memo entries)."""
        end = (_WIDE_CONSTANT_FIELDS if wide else _CONSTANT_FIELDS).match(self.data, pos).end()
        run, memo = self.data[pos:end], self.memo
        stride = 6 if wide else 3
        count = len(run) // stride
        if wide:
            packed = bytearray(4 * count)
            for byte in range(4):
                packed[byte::4] = run[1 + byte::6]
            indices = struct.unpack(f"<{count}I", packed)
        else:
            indices = run[1::3]
        pairs = [None] * (2 * count)
        try:
            pairs[0::2] = map(memo.__getitem__, indices)
        except KeyError:
            at = next(at for at, index in enumerate(indices) if index not in memo)
            self.pos = pos + at * stride + 1
            raise self.refuse(f"memo entry {indices[at]} is read before it is written") from None
        pairs[1::2] = map(_CONSTANTS.__getitem__, run[stride - 1::stride])
        self.stack += pairs
        return end

    def token_list(self, pos: int) -> int | None:
        """A list of integers written as EMPTY_LIST, a memo opcode and APPENDS batches, read in
        one go as TokenIds; returns the offset after it, or None (nothing consumed) when the list
        holds anything but integers, for the opcode loop to read it as any other list."""
        data, end = self.data, len(self.data)
        length = _MEMO_OPS[data[pos]]
        at, parts = pos + length, []
        while at + 1 < end:
            code = data[at]
            if code == _MARK and data[at + 1] in _INT_OPS:
                values, stop = int_run(data, at + 1)
                if stop >= end or data[stop] != _APPENDS:
                    return None
                parts.append(values)
                at = stop + 1
            elif code in _INT_OPS:
                values, stop = int_run(data, at)
                if len(values) != 1 or stop >= end or data[stop] != _APPEND:
                    return None
                parts.append(values)
                at = stop + 1
            elif code == _FRAME:
                self.pos = at + 1
                self.op_frame()
                at = self.pos
            else:
                break
        if not parts:
            return None
        ids = parts[0]
        for part in parts[1:]:
            ids.extend(part)
        self.stack.append(ids)
        self.pos = pos + 1
        if length == 1:
            self.op_memoize()
        elif length == 2:
            self.op_binput()
        else:
            self.op_long_binput()
        return at

    # -- opcodes: framing and constants ----------------------------------------------------------
    def op_proto(self):
        version = self.take(1, "PROTO")[0]
        if version > _MAX_PROTOCOL:
            raise self.refuse(f"pickle protocol {version} is newer than any Python writes")

    def op_frame(self):
        size = self.unpack("<Q", "FRAME")
        if size > len(self.data) - self.pos:
            raise self.refuse(f"FRAME declares {size:,} bytes but only "
                              f"{len(self.data) - self.pos:,} remain (truncated or forged)")
        if self.release is not None and self.pos - self.released > _RELEASE_EVERY:
            self.release(self.pos)  # every byte before a frame was read (the memo holds copies)
            self.released = self.pos

    def op_stop(self):
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
        self.stack.append(dict(zip(items[::2], items[1::2])))

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
        self.target(dict, "SETITEMS").update(zip(keys, items[1::2]))

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
        self.stack.append(self.call(function, args))

    def op_newobj(self):
        args, cls = self.pop(), self.pop()
        self.stack.append(self.new(cls, args, None, "NEWOBJ"))

    def op_newobj_ex(self):
        kwargs, args, cls = self.pop(), self.pop(), self.pop()
        if type(kwargs) is not dict:
            raise self.refuse("NEWOBJ_EX with keyword arguments that are not a dict")
        self.stack.append(self.new(cls, args, kwargs, "NEWOBJ_EX"))

    def new(self, cls, args, kwargs, opcode: str) -> Instance:
        if type(cls) is not Global or cls.kind != "class":
            raise self.refuse(f"{opcode} on {_describe(cls)}, not an allowed class")
        if type(args) is not tuple:
            raise self.refuse(f"{opcode} with arguments that are not a tuple")
        return Instance(cls, opcode, args, kwargs)

    def op_build(self):
        state = self.pop()
        target = self.top()
        if type(target) is not Instance or target.state is not None:
            raise self.refuse(f"BUILD on {_describe(target)}, not a fresh object of an allowed "
                              "class")
        target.state = state

    def call(self, function, args: tuple):
        if type(function) is not Global:
            raise self.refuse(f"REDUCE calls {_describe(function)}")
        if function.kind == "class":
            return Instance(function, "REDUCE", args)
        if function.kind == "builder":
            return self.build_with(function, args)
        if function.kind == "container":
            return self.container(function, args)
        raise self.refuse(f"REDUCE calls {function.qualified}, which is a value, not a class")

    def build_with(self, builder: Global, args: tuple) -> Instance:
        """``_rebuild_server_args(cls, fields, bookkeeping)``, msgspec's ``rebuild(cls, fields)``
        and ``copyreg._reconstructor(cls, base, state)``: an inert record of ``cls``."""
        if builder.name == "_reconstructor":
            shaped = (len(args) == 3 and type(args[0]) is Global and args[0].kind == "class"
                      and type(args[1]) is Global and args[1].qualified == "builtins.object"
                      and args[2] is None)
            if shaped:
                return Instance(args[0], "NEWOBJ", ())
        else:
            arity = 3 if builder.name == "_rebuild_server_args" else 2
            shaped = (len(args) == arity and type(args[0]) is Global and args[0].kind == "class"
                      and all(type(part) is dict for part in args[1:]))
            if shaped:
                return Instance(args[0], "REDUCE", made_by=(builder, args))
        raise self.refuse(f"{builder.qualified} called with arguments of an unexpected shape")

    def container(self, function: Global, args: tuple):
        name = function.name
        if name in ("set", "frozenset") and len(args) <= 1:
            items = list(args[0]) if args and type(args[0]) in (list, tuple, set) else None
            if args and items is None:
                raise self.refuse(f"{function.qualified} of {_describe(args[0])}")
            self.keys_checked(items or ())
            return (set if name == "set" else frozenset)(items or ())
        if name == "bytearray" and len(args) <= 2:
            if not args:
                return bytearray()
            if type(args[0]) is bytes and len(args) == 1:
                return bytearray(args[0])
            if type(args[0]) is str and args[1:] == ("latin-1",):
                return bytearray(args[0], "latin-1")
        if name == "complex" and len(args) <= 2 and all(type(part) in (int, float) for part in args):
            return complex(*args)
        if name == "OrderedDict" and not args:
            return {}
        if name == "defaultdict" and len(args) == 1 and type(args[0]) is Global:
            return {}  # the factory is a name only; the items follow as SETITEMS
        raise self.refuse(f"{function.qualified} called with arguments crashlab does not accept")


def _describe(value) -> str:
    if type(value) is Global:
        return value.qualified
    return f"a {type(value).__name__}"


def _unsupported(code: int) -> str:
    try:
        name = code2op[chr(code)].name
    except KeyError:
        return f"unknown opcode 0x{code:02x}"
    return (f"opcode {name}, which a crash dump never needs (persistent ids, extension codes, "
            "out-of-band buffers and protocol 0/1 text opcodes are not supported)")


#: Opcode byte -> handler name (op_<name>); everything else is refused.
_SUPPORTED = {
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

#: Supported opcodes that only the loop in _Machine.run handles (no op_ method).
_INLINED = {"BINGET", "LONG_BINGET", "MEMOIZE", "SHORT_BINUNICODE", "NONE", "NEWFALSE", "NEWTRUE",
            "MARK", "EMPTY_DICT", "EMPTY_LIST", "BININT1", "BININT2", "BININT",
            "BINFLOAT"}


def loads(data: bytes | mmap.mmap, source: str = "<pickle>", on_record=None, release=None):
    """The value a pickle describes, with objects of allowed classes as ``Instance`` records.

    ``on_record`` is called with every (request, output, created, finished) tuple as soon as it
    is read, for views that stream a long dump; ``release(offset)``, now and then, says that no
    byte before ``offset`` will be read again (the loader unmaps them).
    """
    machine = _Machine(data, source, on_record, release)
    try:
        return machine.run()
    finally:  # the handlers refer back to the machine: without this the file's bytes wait for gc
        machine.handlers.clear()
