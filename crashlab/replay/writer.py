"""Write a subset of a dump back as a pickle in SGLang's layout, without importing sglang.

Request objects are written as SGLang pickles them (NEWOBJ of ``io_struct.GenerateReqInput`` +
BUILD with the same fields). Everything else from SGLang (ServerArgs, LoRARef, ImageData, ...) is
written as a plain dict of its fields, as SGLang itself writes ``server_args`` when watermarking
is on: SGLang's ``safe_pickle_load`` (the loader of its replay script since 0.5.10) allows the
request classes but refuses those others.
"""

from __future__ import annotations

import os

from ..picklesafe.allowlist import Global
from ..picklesafe.nesting import Path, descend
from ..picklesafe.pickled import Instance
from ..picklesafe.writer import dumps
from .records import CrashDump, Request

_KEPT_CLASSES = {"GenerateReqInput", "EmbeddingReqInput", "Modality"}


def portable(value, path: Path = ()):
    """``value`` with SGLang objects other than requests (and enum keys) turned into dicts, and
    names of anything else (``torch.bfloat16``) into their dotted text. A value that holds
    itself, or is nested past nesting.WALK_DEPTH, is refused (nesting.TooDeep)."""
    kind = type(value)
    if kind is Global:
        return value.qualified
    if kind is dict:
        path = descend(path, value)
        return {portable(key, path): portable(item, path) for key, item in value.items()}
    if kind in (list, tuple, set, frozenset):
        path = descend(path, value)
        return kind(portable(item, path) for item in value)
    if kind is Instance:
        path = descend(path, value)
        if value.cls.name not in _KEPT_CLASSES:
            return portable(value.fields(), path)
        copy = Instance(value.cls, value.how, portable(value.args, path),
                        portable(value.kwargs, path) if value.kwargs else None)
        copy.state = portable(value.state, path)
        return copy
    return value


def write_subset(dump: CrashDump, keep: list[Request], path: str | os.PathLike) -> None:
    """A new dump with the keys of ``dump`` and only the records of ``keep``, in dump order."""
    root = dict(dump._root)
    root["requests"] = [request._record for request in sorted(keep, key=lambda r: r.position)]
    data = dumps(portable(root))
    with open(path, "wb") as out:
        out.write(data)
