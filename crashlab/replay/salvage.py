"""The complete requests of a crash dump whose file was cut (its writer killed, its disk full).

SGLang pickles ``{"server_args": ..., "requests": [(obj, out, created, finished), ...], ...}``.
When the data runs out the interpreter's stack still holds what was read: the top-level dict,
the key/value pairs of the batch being set, the requests list with the records already appended,
then the records of the batch being appended, then the parts of the record the cut fell in. A
record on the stack is whole (TUPLE ran after its last part was read), so those records are the
dump's first N requests exactly; the record being read when the data ran out is not guessed at.
"""

from __future__ import annotations

from ..errors import BadInput
from ..picklesafe.opcodes import Truncated
from ..picklesafe.pickled import Instance
from .records import Partial


def _is_record(value) -> bool:
    return type(value) is tuple and len(value) == 4 and type(value[0]) is Instance


def _pending_records(stack: list, marks: list[int], start: int) -> tuple[list, bool]:
    """(the whole records on the stack from ``start``, whether the cut fell inside a record).

    The records of an APPENDS batch follow its MARK; the first thing that is not a whole
    record, or a later MARK (the record being read), ends them."""
    later = [mark for mark in marks if mark >= start]
    stop = next((mark for mark in later if mark > start), len(stack))
    records = []
    for value in stack[start:stop]:
        if not _is_record(value):
            break
        records.append(value)
    inside = start + len(records) < len(stack) or len(later) > 1 or any(m > start for m in later)
    return records, inside


def _list_done(stack: list, marks: list[int], after: int) -> bool:
    """Whether the value after a top-level list at ``after`` - 1 is the dict's next key: a
    record being read starts with a MARK, a batch of records with a MARK or a whole record."""
    return after < len(stack) and after not in marks and type(stack[after]) is not tuple


def _requests_on_stack(stack: list, marks: list[int]) -> tuple[dict, list, bool | None] | None:
    """(the top-level pairs read, the records read, whether the cut fell inside a record: None
    when the requests list was read to its end), or None when the data ran out before the
    requests list began."""
    if stack and type(stack[0]) is list:  # a bare list of records
        pending, inside = _pending_records(stack, marks, 1)
        return {}, stack[0] + pending, inside
    if not stack or type(stack[0]) is not dict:
        return None
    top = dict(stack[0])
    if type(top.get("requests")) is list:  # the list was complete; the cut came after it
        return top, top["requests"], None
    nested = [mark for mark in marks if mark > 1]  # marks of values the cut fell inside
    for at in range(1, (nested[0] if nested else len(stack)) - 1, 2):
        key, value = stack[at], stack[at + 1]
        if type(key) is not str:
            return None
        if key == "requests" and type(value) is list:
            if _list_done(stack, marks, at + 2):
                return top, value, None
            pending, inside = _pending_records(stack, marks, at + 2)
            return top, value + pending, inside
        top[key] = value
    return None


def salvaged(cut: Truncated, source: str) -> tuple[dict | list, Partial]:
    """The dump as far as it was read (its requests list holding only whole records), and what
    is missing; BadInput when not one request was read whole."""
    found = _requests_on_stack(cut.stack, cut.marks)
    if found is None:
        raise BadInput(f"{source}: the file is cut before its first request (truncated: its "
                       "writer was killed or the disk filled); nothing to salvage")
    top, records, inside = found
    if not records:
        raise BadInput(f"{source}: the file is cut inside its first request (truncated: its "
                       "writer was killed or the disk filled); nothing to salvage")
    partial = Partial(requests_read=len(records), ends_inside=len(records) + 1 if inside else None,
                      requests_complete=inside is None, bytes_missing_at_least=cut.bytes_missing)
    if type(cut.stack[0]) is list:
        return records, partial
    top["requests"] = records
    return top, partial
