"""Bounded fuzzing of the dump loader: mutated real fixtures must load or be refused cleanly.

Hypothesis flips, inserts, overwrites and cuts bytes of the fixture dumps (derandomized, a fixed
number of examples). Every outcome must be a CrashDump or a BadInput, and the loader may not
allocate out of proportion to the file.
"""

from __future__ import annotations

import functools
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
