"""Open a crash-dump file as a stranger's file: one clear refusal for anything that is not one."""

from __future__ import annotations

import gc
import mmap
import os
from collections.abc import Callable
from contextlib import contextmanager

from pydantic import ValidationError

from ..errors import BadInput
from ..escape import printable
from ..picklesafe import bounds, unpickler
from ..picklesafe.nesting import TooDeep
from ..picklesafe.opcodes import PickleRefused, Truncated
from ..vocabulary import PICKLE_PROTO, InputKind
from .records import CrashDump, Request, crash_dump_from, request_from
from .salvage import salvaged

_GZIP = b"\x1f\x8b"


@contextmanager
def _mapped(path, name: str):
    """(the file's bytes, a function that drops the bytes before an offset from memory).

    A regular file is memory-mapped, so that the part already read can be handed back to the
    kernel as the reading goes on: a 242 MB dump need not sit in memory beside what it decodes
    to. A pipe or an empty file is read whole.
    """
    try:
        file = open(path, "rb")  # noqa: SIM115 (`with file:` below, once open's errors are told)
    except FileNotFoundError:
        raise BadInput(f"{name}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{name}: is a directory, not a crash-dump .pkl") from None
    except OSError as problem:
        raise BadInput(f"{name}: cannot be read ({problem.strerror or problem})") from None
    with file:
        try:
            view = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):  # empty, or not a regular file
            try:
                data = file.read()
            except OSError as problem:
                raise BadInput(f"{name}: cannot be read ({problem.strerror or problem})") from None
            yield data, None  # outside the try: an OSError of the reader (a closed stdout) is theirs
            return
        with view:
            yield view, (lambda offset: view.madvise(mmap.MADV_DONTNEED, 0, offset - offset
                                                     % mmap.PAGESIZE)
                         if hasattr(view, "madvise") else None)


def _check_start(data, name: str) -> None:
    if not len(data):
        raise BadInput(f"{name}: empty file" + (
            " (SGLang 0.5.6 leaves its crash dump empty when the server's arguments cannot be "
            "pickled, e.g. a --trust-remote-code model config; its requests are lost)"
            if os.path.basename(name).startswith("crash_dump_") else ""))
    if data[:2] == _GZIP or data[0] != PICKLE_PROTO:
        from ..coredump.elf import is_cuda_core

        if is_cuda_core(data[:4096]):
            raise BadInput(f"{name}: a CUDA coredump, not an SGLang crash dump", InputKind.COREDUMP,
                           name)
    if data[:2] == _GZIP:
        raise BadInput(f"{name}: gzip-compressed; gunzip it first (SGLang writes plain pickles)")
    if data[0] != PICKLE_PROTO:
        raise BadInput(f"{name}: not a pickle of protocol 2 or later (SGLang writes protocol 4 or 5)")


def load(path: str | os.PathLike, on_request: Callable[[Request], None] | None = None) -> CrashDump:
    """The typed dump in ``path``, read without running anything it names.

    ``on_request`` sees each request as soon as its record is read, in the dump's order (a long
    dump's listing starts at once); the dump itself is returned at the end, sorted by arrival.
    Raises crashlab.errors.BadInput (exit 2) for a missing, unreadable, hostile, damaged or
    non-SGLang file; the message is one line and names the offending global or byte offset.
    A file cut short (its writer killed, its disk full) gives the requests read whole before
    the cut, with ``partial`` set and its line first in the warnings; cut before the first
    whole request, it is refused.
    """
    name = printable(os.fspath(path), 500)
    seen: dict[int, Request] = {}

    def record_read(record: tuple) -> None:
        try:
            request = request_from(record, len(seen))
        except (ValueError, ValidationError):
            return  # crash_dump_from reports it, with its position, once the dump is read
        seen[id(record)] = request
        if on_request is not None:
            on_request(request)

    with _mapped(path, name) as (data, release), _no_cycle_collection():
        _check_start(data, name)
        return decoded(data, name, record_read, release, seen)


def decoded(data, name: str, on_record=None, release=None,
            seen: dict[int, Request] | None = None) -> CrashDump:
    """The typed dump in ``data`` (a pickle's bytes; ``name`` is what messages call it); a cut
    pickle's requests are salvaged (salvage.py). ``seen``: the Requests ``on_record`` made."""
    size = len(data)
    partial = None
    try:
        try:
            root = unpickler.loads(data, name, on_record=on_record, release=release)
        except Truncated as cut:
            root, partial = salvaged(cut, name)
        bounds.check(root, size, name)
        try:
            dump = crash_dump_from(root, name, size, seen)
        except ValueError as problem:
            raise BadInput(f"{name}: not an SGLang crash dump: {problem}") from None
    except TooDeep as refusal:  # a record the listing read before bounds.check walked the tree
        raise PickleRefused(f"{name}: refused to load this pickle: {refusal.reason}") from None
    if partial is not None:
        dump.partial = partial
        dump.warnings.insert(0, partial.line())
        if not partial.requests_complete:  # the keys that tell the layouts apart come later
            dump.layout = "cut short: which SGLang writer is unknown (its keys after " \
                "'requests' are missing)"
    return dump


@contextmanager
def _no_cycle_collection():
    """Loading makes millions of objects and no cycles (the decoded tree is acyclic until
    bounds.check has walked it); the cycle collector, run every 700 allocations, would walk all
    of them again and again: a third of the load time of a 280 MB dump."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
