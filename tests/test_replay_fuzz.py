"""Bounded fuzzing of the dump loader: mutated real fixtures must load or be refused cleanly.

Hypothesis flips, inserts, overwrites and cuts bytes of the fixture dumps (derandomized, a fixed
number of examples). Every outcome must be a CrashDump or a BadInput, and the loader may not
allocate out of proportion to the file.
"""

from __future__ import annotations

import functools
import pickletools
import struct
import tracemalloc
from pickletools import code2op

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashlab.errors import BadInput
from crashlab.replay import loader
from tests.replay_support import FIXTURES

SEEDS = ["crash_dump_0.5.6.pkl", "crash_dump_0.5.12.pkl", "crash_dump_0.5.23.pkl"]
REAL_SEEDS = [f"real/crash_dump_real_{version}.pkl" for version in ("0.5.6.post2", "0.5.12", "0.5.23")]
OPCODES = sorted(op.code.encode("latin-1") for op in code2op.values())
EDGES = [0, 1, 255, 256, 65535, 1 << 31, (1 << 32) - 1, 1 << 40, (1 << 64) - 1]
MEMORY_FACTOR = 16
MEMORY_SLACK = 4 << 20


@functools.cache
def seed(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 20), st.sampled_from(OPCODES)),
    st.tuples(st.just("length"), st.integers(0, 1 << 20), st.sampled_from(EDGES)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 20)),
    st.tuples(st.just("repeat"), st.integers(0, 1 << 20), st.integers(1, 64), st.integers(1, 50)),
)


def mutate(data: bytearray, change) -> bytearray:
    kind, at = change[0], change[1] % max(len(data), 1)
    if not data:
        return data
    if kind == "flip":
        data[at] ^= change[2]
    elif kind == "insert":
        data[at:at] = change[2]
    elif kind == "length":
        data[at:at + 8] = struct.pack("<Q", change[2])
    elif kind == "cut":
        del data[at:]
    else:
        data[at:at] = bytes(data[at:at + change[2]]) * change[3]
    return data


def load_bytes(data: bytes):
    """What loader.load does after reading the file (in memory, to measure allocation)."""
    return loader.decoded(data, "fuzz")


def loaded_or_refused(data: bytes):
    """The dump (rendered once) or None for a one-line refusal; the allocation is bounded."""
    tracemalloc.start()
    try:
        try:
            dump = load_bytes(data)
        except BadInput as refused:
            assert "\n" not in str(refused)
            dump = None
        else:
            dump.model_dump_json()  # whatever loaded must render
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_FACTOR * len(data) + MEMORY_SLACK
    return dump


@settings(max_examples=1500, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(SEEDS), changes=st.lists(mutation, min_size=1, max_size=6))
def test_mutated_dumps_load_or_are_refused(name, changes):
    data = bytearray(seed(name))
    for change in changes:
        data = mutate(data, change)
    loaded_or_refused(bytes(data))


@settings(max_examples=400, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(SEEDS + REAL_SEEDS), at=st.integers(0, 1 << 20),
       changes=st.lists(mutation, max_size=2))
def test_cut_dumps_are_salvaged_or_refused(name, at, changes):
    """A file cut at any offset (after up to two other mutations): its whole requests, marked
    partial and said in the first warning, or one refusal; memory bounded as for any file."""
    data = bytearray(seed(name))
    for change in changes:
        data = mutate(data, change)
    del data[at % max(len(data), 1):]
    dump = loaded_or_refused(bytes(data))
    if dump is not None and dump.partial is not None:
        assert dump.partial.requests_read == len(dump.requests) > 0
        assert dump.warnings[0] == dump.partial.line()
    elif dump is not None:
        assert changes  # an untouched seed cut short is always partial


# -- the memo made to loop: a container of the dump holding itself, or nested thousands deep -----
_CODE = {op.name: op.code.encode("latin-1") for op in code2op.values()}


@functools.cache
def containers(name: str) -> list[tuple[int, int, str]]:
    """(offset right after its memo opcode, memo index, 'list' or 'dict') of every list and dict
    the seed memoises: where a value appended now goes into that container."""
    found, memo, made = [], 0, None
    for op, arg, at in pickletools.genops(seed(name)):
        if op.name in ("MEMOIZE", "BINPUT", "LONG_BINPUT"):
            index = memo if op.name == "MEMOIZE" else arg
            memo = max(memo, index + 1)
            if made is not None:
                found.append((at + 1 + (0 if op.name == "MEMOIZE" else op.arg.n), index, made))
        made = {"EMPTY_LIST": "list", "EMPTY_DICT": "dict"}.get(op.name)
    return found


def looped(name: str, which: int, deep: int | None) -> bytes:
    """The seed with one of its lists or dicts made to hold itself (``deep`` None) or a list
    nested ``deep`` levels, put in right where the container is made."""
    data = seed(name)
    at, index, kind = containers(name)[which % len(containers(name))]
    if deep is None:
        value = (_CODE["BINGET"] + bytes([index]) if index < 256
                 else _CODE["LONG_BINGET"] + struct.pack("<I", index))
    else:
        value = _CODE["EMPTY_LIST"] * deep + _CODE["APPEND"] * (deep - 1)
    key = _CODE["SHORT_BINUNICODE"] + b"\x06looped"
    inserted = value + _CODE["APPEND"] if kind == "list" else key + value + _CODE["SETITEM"]
    return data[:at] + inserted + data[at:]


@settings(max_examples=250, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(SEEDS + REAL_SEEDS), which=st.integers(0, 1 << 16),
       deep=st.one_of(st.none(), st.integers(70, 5_000)), changes=st.lists(mutation, max_size=2),
       listed=st.booleans())
def test_dumps_whose_memo_loops_are_refused_in_one_line(tmp_path, name, which, deep, changes,
                                                        listed):
    """A list or dict of a real or fixture dump (the server's arguments, a request, its
    sampling parameters, its output, the requests list itself) made to contain itself, or
    thousands of lists deep, then maybe mutated further: loading, with each request listed as
    it is read or not, refuses it in one line (or salvages what a cut left whole), never
    RecursionError; memory bounded as for any file."""
    data = bytearray(looped(name, which, deep))
    for change in changes:
        data = mutate(data, change)
    path = tmp_path / "crash_dump.pkl"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        try:
            loader.load(path, on_request=(lambda request: None) if listed else None)
        except BadInput as refused:
            assert "\n" not in str(refused)
            if not changes:
                said = "that contains itself" if deep is None else "nested more than"
                assert said in str(refused), str(refused)
        else:
            assert changes, "a dump holding itself loaded"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_FACTOR * len(data) + MEMORY_SLACK
