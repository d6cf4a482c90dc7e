"""Read a pickle as data: an interpreter of pickle opcodes that never imports or calls anything.

Why not ``pickle.Unpickler`` with an allowlisting ``find_class``: on CPython 3.11 its C code
allocates the length a BINBYTES8/BYTEARRAY8 opcode declares before reading a byte of it, grows
the memo array to twice the largest index a LONG_BINPUT names (five bytes of file can ask for
32 GiB, zeroed), lets BUILD set attributes on whatever ``find_class`` returned, and inserts keys
whose hashes the file chooses into dicts and sets (a few hundred thousand colliding ints make
loading quadratic). Here every declared length is checked against the bytes left, the memo is a
dict, dict keys and set members must be of a type whose hash the file cannot steer (pickled.py),
and a global is only ever an ``allowlist.Global`` record: nothing the file names is imported.

What can run code in a pickle is a call (REDUCE, NEWOBJ, NEWOBJ_EX, BUILD through
``__setstate__``; INST/OBJ, persistent ids and extension codes), never a name. So a call on an
SGLang or Hugging Face class, or through the few reconstructors the stdlib pickler writes for
data, makes an inert ``Instance`` record of what was passed; a call on anything else is refused
(calls.py; allowlist.py has the names).

This module is the loop; what each opcode does is opcodes.py. Speed: token ids are most of a
dump's bytes, so a list or tuple made only of integer opcodes is decoded in one call (intruns.py)
into a compact ``TokenIds`` array; the rest goes through the loop in ``PickleInterpreter.run``, whose
commonest opcodes are inlined.

Only the binary opcodes of protocols 2 to 5 that CPython's pickler writes for data are known;
SGLang writes protocol 4 (Python <= 3.13) or 5. Anything else is refused with its name and offset.
"""

from __future__ import annotations

import mmap
import re
import struct

from .intruns import TokenIds
from .intruns import run as int_run
from .opcodes import SUPPORTED, Opcodes, PickleRefused, Truncated, unsupported

# Opcode bytes the fast paths look ahead for (the loop in PickleInterpreter.run spells its own inline).
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


class PickleInterpreter(Opcodes):
    """One run of the interpreter over ``data``; ``run()`` returns the pickled value."""

    def __init__(self, data, source: str, on_record=None, release=None):
        super().__init__(data, source, on_record, release)
        self.handlers = {ord(code): getattr(self, f"op_{name.lower()}")
                         for code, name in SUPPORTED.items() if name not in _INLINED}

    # -- running ----------------------------------------------------------------------------
    def run(self):  # noqa: C901 (one branch per inlined opcode: a call per opcode is what it saves)
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
                        raise self.refuse(unsupported(code))
                    if handler():
                        return self.pop()
                    pos = self.pos
        except (IndexError, struct.error):  # only reads past the last byte raise these
            raise self.cut("the pickle ends in the middle of an opcode or before its STOP "
                           "(truncated)", pos, at=end) from None

    def constant_fields(self, pos: int, wide: bool) -> int:
        """A run of (BINGET or LONG_BINGET name, None/True/False) pairs, most of a dataclass's
        state in a dump (a request's unset fields), pushed in one go; returns the offset after
        it. ``wide``: the names are LONG_BINGETs (a dump whose ServerArgs filled the first 256
        memo entries)."""
        run_found = (_WIDE_CONSTANT_FIELDS if wide else _CONSTANT_FIELDS).match(self.data, pos)
        assert run_found is not None  # the opcode loop saw its first pair before calling
        end = run_found.end()
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
        pairs: list[object] = [None] * (2 * count)
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
        self.stack.append(TokenIds.joined(parts))
        self.pos = pos + 1
        if length == 1:
            self.op_memoize()
        elif length == 2:
            self.op_binput()
        else:
            self.op_long_binput()
        return at


#: Supported opcodes that only the loop in PickleInterpreter.run handles.
_INLINED = {"BINGET", "LONG_BINGET", "MEMOIZE", "SHORT_BINUNICODE", "NONE", "NEWFALSE", "NEWTRUE",
            "MARK", "EMPTY_DICT", "EMPTY_LIST", "BININT1", "BININT2", "BININT",
            "BINFLOAT"}


def loads(data: bytes | mmap.mmap, source: str = "<pickle>", on_record=None, release=None):
    """The value a pickle describes, with objects of allowed classes as ``Instance`` records.

    ``on_record`` is called with every (request, output, created, finished) tuple as soon as it
    is read, for views that stream a long dump; ``release(offset)``, now and then, says that no
    byte before ``offset`` will be read again (the loader unmaps them).
    A pickle cut short raises ``Truncated`` with what was read; a FRAME that declared more
    bytes than the file holds is the refusal of a pickle that does not end where its data runs out.
    """
    machine = PickleInterpreter(data, source, on_record, release)
    try:
        return machine.run()
    except PickleRefused as refusal:
        if machine.frame_overrun is None or isinstance(refusal, Truncated):
            raise
        raise machine.frame_overrun from None
    finally:  # the handlers refer back to the machine: without this the file's bytes wait for gc
        machine.handlers.clear()
