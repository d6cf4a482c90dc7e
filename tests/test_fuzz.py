"""Bounded fuzzing of the reader over the builder's output.

Hypothesis mutates a small synthetic dump (header fields set to edge values, bytes flipped in the
tables and cubins, truncations) and checks the doctrine: crashlab returns a report or refuses with
BadInput, within a time limit, without allocating out of proportion to the file.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import crashlab
from crashlab.errors import BadInput
from tests import scenarios
from tests.coredump_builder import write
from tests.elf_patch import SHDR, read_section, section_count, section_header_offset, set_section

EDGE_VALUES = [0, 1, 7, 8, 63, 64, 0xFF00, 0xFFFF, 0xFFFFFFFF, 1 << 32, 1 << 40, (1 << 64) - 1]
MEMORY_FACTOR = 8
MEMORY_SLACK = 24 << 20


@functools.cache
def seed(which: str) -> bytes:
    """The unmutated dump (built once; kept out of hypothesis' arguments to keep reports short)."""
    folder = Path(tempfile.mkdtemp(prefix="crashlab-fuzz-"))
    spec = scenarios.fault(bystander_blocks=1).spec if which == "fault" else scenarios.hang().spec
    data = write(spec, folder / "seed.nvcudmp").path.read_bytes()
    shutil.rmtree(folder)
    return data


def _field_mutation(data: bytearray, index: int, field: str, value: int) -> None:
    at, code = SHDR[field]
    bits = 32 if code == "I" else 64
    set_section(data, index, field, value & ((1 << bits) - 1))


mutation = st.one_of(
    st.tuples(st.just("field"), st.integers(0, 10_000), st.sampled_from(sorted(SHDR)),
              st.one_of(st.sampled_from(EDGE_VALUES), st.integers(0, (1 << 64) - 1))),
    st.tuples(st.just("flip"), st.integers(0, 1 << 30), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 30)),
    st.tuples(st.just("header-flip"), st.integers(0, 63), st.integers(1, 255)),
)


def _apply(data: bytearray, change) -> bytearray:
    kind = change[0]
    if len(data) < 64:
        return data  # already cut below the ELF header: nothing left to mutate
    if kind == "field":
        _, index, field, value = change
        count = section_count(data)
        if count and section_header_offset(data, count - 1) + 64 <= len(data):
            _field_mutation(data, index % count, field, value)
    elif kind == "flip":
        _, position, mask = change
        data[position % len(data)] ^= mask
    elif kind == "truncate":
        del data[change[1] % len(data):]
    else:
        _, position, mask = change
        data[position] ^= mask
    return data


def _check(tmp_path, data: bytes, sass: bool):
    path = tmp_path / "mutant.nvcudmp"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        report = crashlab.inspect(path, sass=sass)
        assert report.schema_version == 1
    except BadInput as refusal:
        assert "\n" not in str(refusal)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MEMORY_FACTOR * len(data) + MEMORY_SLACK, f"peak {peak} for {len(data)} bytes"


@settings(max_examples=250, deadline=5000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from(["fault", "hang"]), changes=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_dumps_are_refused_or_read(tmp_path, which, changes):
    data = bytearray(seed(which))
    for change in changes:
        data = _apply(data, change)
    _check(tmp_path, bytes(data), sass=False)


@settings(max_examples=40, deadline=30_000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(position=st.integers(0, 1 << 30), masks=st.lists(st.integers(1, 255), min_size=1, max_size=8))
def test_damaged_cubin_never_breaks_the_report(tmp_path, position, masks):
    """Bytes flipped inside the embedded relocated cubin: SASS may go, the triage stays."""
    data = bytearray(seed("fault"))
    relf = next(i for i in range(section_count(data)) if read_section(data, i, "type") == 0x80000007)
    start, size = read_section(data, relf, "offset"), read_section(data, relf, "size")
    for step, mask in enumerate(masks):
        data[start + (position + step * 977) % size] ^= mask
    path = tmp_path / "cubin.nvcudmp"
    path.write_bytes(data)
    report = crashlab.inspect(path)
    assert report.faults and report.faults[0].kernel is not None


def test_mutation_helpers_touch_what_they_say():
    data = bytearray(seed("fault"))
    _apply(data, ("field", 3, "entsize", 77))
    assert read_section(data, 3, "entsize") == 77
    assert section_header_offset(data, 3) > 0


@settings(max_examples=60, deadline=5000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from(["fault", "hang"]), at=st.integers(0, 1 << 30),
       changes=st.lists(mutation, max_size=2))
def test_cut_dumps_say_what_is_missing(tmp_path, which, at, changes):
    """A dump cut at any offset (after up to two other mutations) is refused in one line; cut
    before the end of its section header table, the line says the table is cut."""
    data = bytearray(seed(which))
    for change in changes:
        data = _apply(data, change)
    del data[at % max(len(data), 1):]
    path = tmp_path / "cut.nvcudmp"
    path.write_bytes(data)
    try:
        crashlab.inspect(path, sass=False)
    except BadInput as refusal:
        message = str(refusal)
        assert "\n" not in message
        if not changes and len(data) >= 64:
            assert f"it ends at byte {len(data):,}" in message and "its section table" in message, message
    else:
        assert changes  # an untouched dump cut short is never read as whole
