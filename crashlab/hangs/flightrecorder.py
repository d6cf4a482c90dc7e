"""A PyTorch Flight Recorder dump, read as a stranger's file: per process group, the collectives
a rank enqueued, started and completed, with their sizes, dtypes and the Python stack PyTorch
kept for each.

What a dump is (PyTorch's torch/csrc/distributed/c10d/FlightRecorder*.{hpp,cpp}, and the dumps
torch 2.14.1 writes for gloo): a dict ``{version, pg_config, pg_status, entries,
comm_lib_version}``. Pickled (protocol 2 by torch's C++ pickler: plain dicts, lists, tuples,
strings and integers) by ``_dump_fr_trace()``, the NCCL dump file and the
``dump_nccl_trace_pickle`` handler; JSON by ``_dump_fr_trace_json()`` and the ``fr_trace_json``
handler, without frames, with pg_status's numbers as strings and absent times as 0. An entry
names its process group as ``(name, desc)``; gloo's entries stay ``scheduled`` (its works
record no start or end): a gloo collective's completion is read from its ``retired`` flag (set
when the work ends) and from ``pg_status``, which gloo's worker threads write in the order they
finish and which may therefore lag.
Older dumps spell the collective's number ``seq_id``.

A pickle is read by crashlab.picklesafe (nothing it names is imported or run) and must be plain
data: a class named in it is refused. A cut file gives the entries read whole (frsalvage.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from ..errors import BadInput
from ..escape import printable
from ..picklesafe import bounds, unpickler
from ..picklesafe.intruns import TokenIds
from ..picklesafe.opcodes import PickleRefused, Truncated
from ..picklesafe.pickled import Instance
from ..vocabulary import PICKLE_PROTO
from .clip import clipped
from .frsalvage import salvaged_json, salvaged_pickle

#: The states an entry has; gloo's never leave ``scheduled``.
States = Literal["scheduled", "started", "completed"]
_STATES = ("scheduled", "started", "completed")


@dataclass(frozen=True)
class Frame:
    """One frame of the Python stack Flight Recorder kept with an entry, innermost first."""

    function: str
    file: str
    line: int | None


@dataclass
class Entry:
    """One collective (or point-to-point operation) as a rank recorded it."""

    pg_id: str | None
    """the group's number, which keys pg_status"""
    pg_name: str
    pg_desc: str
    seq: int
    """collective_seq_id, or p2p_seq_id for a point-to-point operation"""
    is_p2p: bool
    op: str
    """profiling_name without its backend (``nccl:all_reduce`` -> ``all_reduce``)"""
    profiling_name: str
    input_sizes: list[list[int]]
    output_sizes: list[list[int]]
    input_dtypes: list[str]
    output_dtypes: list[str]
    state: States
    retired: bool | None
    time_created_ns: int | None
    timeout_ms: int | None
    frames: list[Frame]


@dataclass
class PgStatus:
    """pg_status: the last collective a rank enqueued, started and completed in one group."""

    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass
class FlightRecord:
    """One rank's dump."""

    format: Literal["pickle", "json"]
    version: str | None
    entries: list[Entry]
    pg_status: dict[str, PgStatus]
    """keyed by the group's pg_id, as text"""
    pg_ranks: dict[str, list[int]]
    """pg_config: a group's name -> its global ranks"""
    warnings: list[str] = field(default_factory=list)
    cut: str | None = None
    """Why the dump is partial (a cut file), None where it was read whole."""

    def status_of(self, pg_id: str) -> PgStatus | None:
        return self.pg_status.get(pg_id)


def read(data: bytes, name: str) -> FlightRecord:
    """The dump in ``data`` (a pickle or JSON, told apart by its first byte); BadInput, one line,
    for anything that is not a Flight Recorder dump or cannot be read safely."""
    if not data:
        raise BadInput(f"{name}: empty file, not a Flight Recorder dump")
    fmt: Literal["pickle", "json"]
    if data[0] == PICKLE_PROTO:
        (root, cut), fmt = _from_pickle(data, name), "pickle"
    elif data.lstrip()[:1] == b"{":
        (root, cut), fmt = _from_json(data, name), "json"
    else:
        raise BadInput(f"{name}: neither a pickle nor JSON, not a Flight Recorder dump")
    if type(root) is not dict or type(root.get("entries")) is not list:
        raise BadInput(f"{name}: not a Flight Recorder dump (no 'entries' list at its top)")
    return _record(root, fmt, cut)


def _from_pickle(data: bytes, name: str) -> tuple[object, str | None]:
    cut = None
    try:
        try:
            root = unpickler.loads(data, name)
        except Truncated as truncated:
            root, cut = salvaged_pickle(truncated, name)
        bounds.check(root, len(data), name)
    except PickleRefused as refusal:
        raise BadInput(str(refusal)) from None
    named = _class_named(root)
    if named is not None:
        raise BadInput(f"{name}: refused: the pickle names the class {printable(named)}; a Flight "
                       "Recorder dump is plain data (nothing in it was run)")
    return root, cut


def _class_named(root) -> str | None:
    """The first class (an inert picklesafe record) anywhere in the decoded tree."""
    pending = [root]
    while pending:
        value = pending.pop()
        if type(value) is Instance:
            return value.cls.qualified
        pending.extend(bounds.children(value))
    return None


def _from_json(data: bytes, name: str) -> tuple[object, str | None]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as problem:
        raise BadInput(f"{name}: not UTF-8 at byte {problem.start}, not a Flight Recorder JSON "
                       "dump") from None
    try:
        return json.loads(text), None
    except RecursionError:
        raise BadInput(f"{name}: refused: JSON nested too deep to be a Flight Recorder dump") \
            from None
    except json.JSONDecodeError as problem:
        return salvaged_json(text, name, problem)


def _record(root: dict, fmt: Literal["pickle", "json"], cut: str | None) -> FlightRecord:
    entries, skipped = [], 0
    for raw in root["entries"]:
        entry = _entry(raw) if type(raw) is dict else None
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)
    warnings = [f"{skipped} entries not of Flight Recorder's shape were left out"] if skipped else []
    version = root.get("version")
    return FlightRecord(format=fmt, version=clipped(version) if type(version) is str else None,
                        entries=entries, pg_status=_pg_status(root.get("pg_status")),
                        pg_ranks=_pg_ranks(root.get("pg_config")), warnings=warnings, cut=cut)


def _entry(raw: dict) -> Entry | None:
    """An entry, or None where a field Flight Recorder always writes is absent or of another type."""
    group = raw.get("process_group")
    if not isinstance(group, (tuple, list)) or len(group) != 2 \
            or not all(type(g) is str for g in group):
        return None
    pg_name, pg_desc = group
    is_p2p = raw.get("is_p2p") is True
    seq = _int(raw.get("p2p_seq_id" if is_p2p else "collective_seq_id", raw.get("seq_id")))
    name = raw.get("profiling_name")
    if seq is None or type(name) is not str:
        return None
    state = raw.get("state")
    retired = raw.get("retired")
    pg_id = _int(raw.get("pg_id"))
    return Entry(
        pg_id=None if pg_id is None else str(pg_id), pg_name=clipped(pg_name),
        pg_desc=clipped(pg_desc), seq=seq, is_p2p=is_p2p,
        op=clipped(name.rpartition(":")[2]), profiling_name=clipped(name),
        input_sizes=_sizes(raw.get("input_sizes")), output_sizes=_sizes(raw.get("output_sizes")),
        input_dtypes=_texts(raw.get("input_dtypes")), output_dtypes=_texts(raw.get("output_dtypes")),
        state=state if state in _STATES else "scheduled",
        retired=retired if type(retired) is bool else None,
        time_created_ns=_int(raw.get("time_created_ns")) or None,
        timeout_ms=_int(raw.get("timeout_ms")), frames=_frames(raw.get("frames")))


def _pg_status(raw) -> dict[str, PgStatus]:
    if type(raw) is not dict:
        return {}
    found = {}
    for pg_id, status in raw.items():
        if type(pg_id) is str and type(status) is dict:
            found[clipped(pg_id)] = PgStatus(
                last_enqueued=_int(status.get("last_enqueued_collective")),
                last_started=_int(status.get("last_started_collective")),
                last_completed=_int(status.get("last_completed_collective")))
    return found


def _pg_ranks(raw) -> dict[str, list[int]]:
    """pg_config's ranks, written as the text of a Python list (``"[0, 1, 2, 3]"``): read as
    numbers, never evaluated."""
    if type(raw) is not dict:
        return {}
    found = {}
    for key, config in raw.items():
        ranks = config.get("ranks") if type(config) is dict else None
        if type(key) is str and type(ranks) is str and len(ranks) < 1_000_000:
            numbers = ranks.strip().strip("[]").split(",")
            if all(part.strip().isdigit() for part in numbers if part.strip()):
                found[clipped(key)] = [int(part) for part in numbers if part.strip()]
    return found


def _frames(raw) -> list[Frame]:
    if type(raw) is not list:
        return []
    frames = []
    for frame in raw:
        if type(frame) is dict and type(frame.get("name")) is str and type(frame.get("filename")) is str:
            frames.append(Frame(clipped(frame["name"]), clipped(frame["filename"]),
                                _int(frame.get("line"))))
    return frames


def _int(value) -> int | None:
    """An integer as a dump writes it: an int, or (JSON's pg_status) its decimal text."""
    if type(value) is int:
        return value
    if type(value) is str and value.lstrip("-").isdigit() and len(value) < 24:
        return int(value)
    return None


def _texts(raw) -> list[str]:
    return [clipped(item) for item in raw if type(item) is str] if type(raw) is list else []


def _sizes(raw) -> list[list[int]]:
    """Tensor shapes: lists of integers (picklesafe reads a run of pickled integers as TokenIds)."""
    if type(raw) is not list:
        return []
    return [shape.tolist() if type(shape) is TokenIds else [dim for dim in shape if type(dim) is int]
            for shape in raw if type(shape) in (list, TokenIds)]
