"""The whole entries of a Flight Recorder dump whose file was cut (its writer killed, a disk full,
a capture that ran out of time).

A pickled dump is ``{key: value, ...}`` written as EMPTY_DICT, MARK, its pairs, SETITEMS; the
entries list as EMPTY_LIST, MARK, its entries, APPENDS; each entry a dict of its own. When the
data runs out the interpreter's stack holds the top dict, the pairs read so far, the entries list
and the entries of the batch being appended; an entry whose own MARK is still open is the one
being read, and is not guessed at. A JSON dump (torch writes its keys sorted: ``entries`` before
``pg_status``) is read pair by pair and, where the cut falls in its entries, entry by entry.
Either way a dump cut before its first whole entry is refused.
"""

from __future__ import annotations

import json

from ..errors import BadInput
from ..picklesafe.opcodes import Truncated

_SPACE = " \t\r\n"


def salvaged_pickle(cut: Truncated, name: str) -> tuple[dict, str]:
    """(the dump as far as it was read, the line saying what was lost); BadInput where not one
    entry was read whole."""
    stack, marks = cut.stack, sorted(cut.marks)
    if not stack or type(stack[0]) is not dict or not marks:
        raise _nothing(name)
    top = dict(stack[0])
    at = marks[0]
    while at + 1 < len(stack):
        key, value = stack[at], stack[at + 1]
        if type(key) is not str:
            break
        if key == "entries" and type(value) is list and at + 2 in marks:
            later = [mark for mark in marks if mark > at + 2]
            batch = stack[at + 2:later[0] - 1 if later else len(stack)]
            top["entries"] = value + [entry for entry in batch if type(entry) is dict]
            break
        if at + 2 in marks:  # this value was being read when the data ran out
            break
        top[key] = value
        at += 2
    return _checked(top, name)


def salvaged_json(text: str, name: str, problem: json.JSONDecodeError) -> tuple[dict, str]:
    """The same for a JSON dump that does not parse: its top-level pairs read one by one, the
    entries list element by element. BadInput, naming the JSON error, where no entry was read."""
    decoder = json.JSONDecoder()
    top: dict = {}
    try:
        at = _skip(text, 0)
        if text[at:at + 1] != "{":
            raise _invalid(name, problem)
        at += 1
        while True:
            at = _skip(text, at)
            key, at = decoder.raw_decode(text, at)
            at = _skip(text, at)
            if type(key) is not str or text[at:at + 1] != ":":
                break
            at = _skip(text, at + 1)
            if key == "entries" and text[at:at + 1] == "[":
                entries, at, whole = _elements(text, at + 1, decoder)
                top["entries"] = entries
                if not whole:
                    break
            else:
                top[key], at = decoder.raw_decode(text, at)
            at = _skip(text, at)
            if text[at:at + 1] != ",":
                break
            at += 1
    except (json.JSONDecodeError, RecursionError):
        pass
    found = top.get("entries")
    if type(found) is not list or not any(type(entry) is dict for entry in found):
        raise _invalid(name, problem)
    return _checked(top, name)


def _elements(text: str, at: int, decoder: json.JSONDecoder) -> tuple[list, int, bool]:
    """(the list's elements read whole, where reading stopped, whether the list ended)."""
    elements: list = []
    while True:
        at = _skip(text, at)
        if text[at:at + 1] == "]":
            return elements, at + 1, True
        try:
            element, at = decoder.raw_decode(text, at)
        except (json.JSONDecodeError, RecursionError):
            return elements, at, False
        elements.append(element)
        at = _skip(text, at)
        if text[at:at + 1] == ",":
            at += 1
        elif text[at:at + 1] != "]":
            return elements, at, False


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _checked(top: dict, name: str) -> tuple[dict, str]:
    entries = top.get("entries")
    if type(entries) is not list or not any(type(entry) is dict for entry in entries):
        raise _nothing(name)
    lost = [key for key in ("pg_status", "pg_config", "version") if key not in top]
    line = (f"{name}: cut short or damaged: {len(entries)} whole entries read, the rest lost"
            + (f"; no {', '.join(lost)}" if lost else ""))
    return top, line


def _nothing(name: str) -> BadInput:
    return BadInput(f"{name}: the file is cut before its first whole Flight Recorder entry "
                    "(its writer was killed or the disk filled); nothing to salvage")


def _invalid(name: str, problem: json.JSONDecodeError) -> BadInput:
    return BadInput(f"{name}: not valid JSON ({problem.msg} at byte {problem.pos}), with no whole "
                    "Flight Recorder entry before that: not a Flight Recorder dump, or cut before "
                    "its first entry")
