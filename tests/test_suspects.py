"""Kernel arguments that are not what their type says, and a dump without the
parameter buffer: planted in SYNTHETIC dumps (tests/coredump_builder.py) around real nvcc-built
cubins (moe_align.cu's ``moe_align_block_size(int const*, int*, int)``) and production ones
carved from public wheels (``merge_attn_states``: ``__nv_bfloat16*``, ``float*``; ``ngram_ids``:
``long const*``). Each expected reason is derived from the planted value and the parameter's
type in the .cu source or the demangled name; the layout is the cubin's (held to cuobjdump in
tests/test_params.py). Every view shows the suspects, the signature notes them without hashing
them, and a missing buffer is explained once with the flag to drop.
"""

from __future__ import annotations

import io
import json

import pytest

import crashlab
from crashlab.console import ViewConsole
from crashlab.cubin import Cubin
from crashlab.cubin.nvinfo import kernel_param_layout
from crashlab.report import markdown, terminal
from crashlab.report.model import Param
from crashlab.report.suspects import (
    PACKED_HALF_LIMIT,
    SMALL_INTEGER_LIMIT,
    KnownMemory,
    element_bytes,
    pointee,
    suspect,
)
from tests import scenarios
from tests.conftest import run_cli
from tests.test_production_cubins import PRODUCTION, fault_dump, kernel_of, site
from tests.test_views_hostile import _rendered_text, _squeezed
from tests.test_views_layout import assert_reads_at_80

#: CUDBGCoredumpGenerationFlags: skip_global_memory and skip_constbank_memory, by their bits.
SKIP_GLOBAL, SKIP_CONSTBANK = 1 << 1, 1 << 5
LIGHTWEIGHT = 47  # SGLang's and vLLM's default: every skip_* but skip_abort
GLOBAL_BASE, GLOBAL_SIZE = 0x7FFF_0010_0000, 0x10_0000
FLAG = "drop skip_constbank_memory from CUDA_COREDUMP_GENERATION_FLAGS next time"


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


def _moe(params: bytes | None, *, flags: int = LIGHTWEIGHT, global_memory=(), metadata=True):
    """moe_align_block_size faulting, its buffer ``params`` (#0 int const*, #1 int*, #2 int)."""
    scenario = scenarios.fault("moe_align.sm_90.cubin:shared-out-of-range",
                               scenarios.WARP_OUT_OF_RANGE_ADDRESS, metadata=metadata)
    scenario.spec.devices[0].grids[0].params = params
    scenario.spec.flags = flags
    scenario.spec.global_memory = list(global_memory)
    return scenario


def _views(report) -> tuple[str, str, dict]:
    """The terminal view at 80 columns, the Markdown as a reader sees it, the JSON."""
    console = ViewConsole(width=80, file=io.StringIO())
    terminal.render(report, console)
    return console.file.getvalue(), _rendered_text(markdown.render(report)), json.loads(
        report.model_dump_json())


def _suspects(report) -> dict[int, str]:
    return {p.ordinal: p.suspect for p in report.faults[0].params.values if p.suspect}


# -- what each kind of value is called, on the moe_align cubin ---------------------------------
PACKED = (5 << 32) | 3  # two int32s, 3 then 5, as a struct {int; int} lays them
NUMEL = (1024).to_bytes(4, "little")


@pytest.mark.parametrize("first, second, expected", [
    (0, GLOBAL_BASE, {0: "null pointer"}),
    (1024, GLOBAL_BASE, {0: "a small integer (1024) where a pointer goes: below 4 GiB"}),
    (SMALL_INTEGER_LIMIT - 1, SMALL_INTEGER_LIMIT, {0: f"a small integer ({SMALL_INTEGER_LIMIT - 1}) "
                                                        "where a pointer goes: below 4 GiB"}),
    (GLOBAL_BASE, PACKED, {1: "two packed int32s (3 and 5, as a struct of two ints lays them) "
                              "where a pointer goes"}),
    (GLOBAL_BASE + 2, GLOBAL_BASE + 4, {0: "misaligned for int (4-byte elements): 2 bytes past a boundary"}),
    (GLOBAL_BASE, (PACKED_HALF_LIMIT << 32) | 4, {}),  # a half of 65,536 is not small
    (GLOBAL_BASE, GLOBAL_BASE + 0x40, {}),
], ids=["null", "small", "largest-small", "packed", "misaligned", "not-packed", "clean"])
def test_each_suspect_value_is_named_with_its_reason(build, first, second, expected):
    """Without global memory in the dump (SGLang's default flags) nothing is said of where a
    pointer points: only what its value and type rule out."""
    report = crashlab.inspect(build(_moe(_u64(first) + _u64(second) + NUMEL)).path, sass=False)
    assert _suspects(report) == expected
    assert report.faults[0].params_missing is None


def test_with_global_memory_a_pointer_outside_every_range_is_named(build):
    """Global memory in the dump (no skip_global_memory): a pointer into a planted section, the
    shared window or the parameter buffer is inside; one past all of them is outside."""
    spec = _moe(_u64(GLOBAL_BASE + 4) + _u64(0x7AAA_0000_0000) + NUMEL,
                flags=LIGHTWEIGHT & ~SKIP_GLOBAL, global_memory=[(GLOBAL_BASE, GLOBAL_SIZE)])
    report = crashlab.inspect(build(spec).path, sass=False)
    assert _suspects(report) == {1: "outside every address range the dump holds (1 global memory "
                                    "section, the shared and local windows, the constant banks, "
                                    "the parameter buffer; host memory mapped for the GPU is not dumped)"}
    shared_window = 0x7E00_0000_0000 + 0x2000  # the builder's context row
    spec = _moe(_u64(shared_window) + _u64(GLOBAL_BASE + GLOBAL_SIZE - 4) + NUMEL,
                flags=LIGHTWEIGHT & ~SKIP_GLOBAL, global_memory=[(GLOBAL_BASE, GLOBAL_SIZE)])
    assert _suspects(crashlab.inspect(build(spec, name="inside.nvcudmp").path, sass=False)) == {}


#: Constant banks 7, 1 and 0 of the grid, with a global memory section each: what a driver writes
#: under skip_global_memory (fixtures/gpu/h200-runs/flags.json: three sections, 68,608 bytes).
BANKS = [(0x7FFF_0020_0000, 0x10000, 7), (0x7FFF_0030_0000, 0x900, 1), (0x7FFF_0040_0000, 0x300, 0)]


@pytest.mark.parametrize("metadata", [True, False], ids=["flags-recorded", "no-flags"])
def test_constant_bank_copies_are_not_the_process_memory(build, metadata):
    """Global memory sections that are the constant banks' copies say nothing of where the
    process's allocations lie: no pointer is outside them. With one allocation beside them, in a
    dump written without skip_global_memory (or one that records no flags), a pointer past it is."""
    outside = _u64(GLOBAL_BASE + 4) + _u64(0x7AAA_0000_0000) + NUMEL
    copies = [(address, size) for address, size, _ in BANKS]
    for name, flags, memory, expected in (
            ("copies", LIGHTWEIGHT & ~SKIP_CONSTBANK, copies, {}),
            ("allocation", LIGHTWEIGHT & ~SKIP_CONSTBANK & ~SKIP_GLOBAL,
             [*copies, (GLOBAL_BASE, GLOBAL_SIZE)], {1: "outside every address range the dump holds "
                                                        "(1 global memory section, the shared"})):
        scenario = _moe(outside, flags=flags, global_memory=memory, metadata=metadata)
        scenario.spec.devices[0].grids[0].const_banks = BANKS
        report = crashlab.inspect(build(scenario, name=f"{name}.nvcudmp").path, sass=False)
        said = _suspects(report)
        assert set(said) == set(expected) and all(said[o].startswith(expected[o]) for o in said), said
    if metadata:  # the flags decide: skip_global_memory recorded, a section is not the process's
        scenario = _moe(outside, global_memory=[*copies, (GLOBAL_BASE, GLOBAL_SIZE)])
        scenario.spec.devices[0].grids[0].const_banks = BANKS
        assert _suspects(crashlab.inspect(build(scenario, name="flagged.nvcudmp").path, sass=False)) == {}


def test_packed_halves_within_a_dump_section_are_not_called_packed(build):
    packed_inside = (0x7 << 32) | 0x1000
    spec = _moe(_u64(packed_inside) + _u64(packed_inside) + NUMEL, flags=LIGHTWEIGHT & ~SKIP_GLOBAL,
                global_memory=[(packed_inside - 0x1000, 0x10000)])
    assert _suspects(crashlab.inspect(build(spec).path, sass=False)) == {}
    lightweight = crashlab.inspect(build(_moe(_u64(packed_inside) * 2 + NUMEL), name="l.nvcudmp").path,
                                   sass=False)
    assert set(_suspects(lightweight)) == {0, 1}  # without memory to tell, the halves are what is seen


def test_an_address_in_the_mmap_area_is_not_called_packed_even_with_a_small_low_half(build):
    """0x7fff_0000_1000: a 4 GiB-aligned allocation plus 4 KiB in the process's mmap area, not
    the ints 32767 and 4096."""
    mmap_area = (0x7FFF << 32) | 0x1000
    report = crashlab.inspect(build(_moe(_u64(mmap_area) * 2 + NUMEL)).path, sass=False)
    assert _suspects(report) == {}


def test_suspects_show_in_every_view_and_in_the_signatures_notes_not_its_hash(build):
    clean = crashlab.inspect(build(_moe(_u64(GLOBAL_BASE) * 2 + NUMEL), name="clean.nvcudmp").path)
    report = crashlab.inspect(build(_moe(_u64(0) + _u64(PACKED) + NUMEL)).path)
    shown, seen, data = _views(report)
    assert [(v["ordinal"], v["suspect"]) for v in data["faults"][0]["params"]["values"]] == [
        (0, "null pointer"), (1, _suspects(report)[1]), (2, None)]
    for argument, reason in (("#0 int const* = 0x0", "null pointer"),
                             (f"#1 int* = {PACKED:#x}", "two packed int32s (3 and 5")):
        assert _squeezed(f"suspect {argument}: {reason}") in _squeezed(shown)
        assert _squeezed(f"Suspect argument {argument}: {reason}") in _squeezed(seen)
        assert any(argument in note and reason in note for note in report.signature.notes)
    assert report.signature.hash == clean.signature.hash
    assert not [n for n in clean.signature.notes if "suspect" in n]
    assert_reads_at_80(report)


# -- types: the pointee's size from the demangled signature --------------------------------------
@pytest.mark.parametrize("type_name, target, size", [
    ("int const*", "int", 4), ("float* __restrict__", "float", 4), ("long const*", "long", 8),
    ("double*", "double", 8), ("__nv_bfloat16 const*", "__nv_bfloat16", 2), ("__half*", "__half", 2),
    ("c10::BFloat16*", "c10::BFloat16", 2), ("int**", "int*", 8), ("float4 const*", "float4", 16),
    ("unsigned char*", "unsigned char", None), ("void*", "void", None), ("Params*", "Params", None),
    ("cutlass::Array<float, 4>*", "cutlass::Array<float, 4>", None),
    ("int", None, None), ("Pair<int, int>", None, None), (None, None, None),
])
def test_the_pointee_and_its_element_size_come_from_the_type(type_name, target, size):
    assert pointee(type_name) == target
    if target is not None:
        assert element_bytes(target) == size


def test_an_unknown_struct_or_type_gets_no_alignment_claim():
    odd = GLOBAL_BASE + 1
    for type_name in ("Params*", "void*", None):
        param = Param(ordinal=0, offset=0, size=8, type=type_name, value=odd, shown=f"{odd:#x}")
        assert suspect(param, None) is None
    memory = KnownMemory(((GLOBAL_BASE, GLOBAL_BASE + GLOBAL_SIZE),), 1)
    outside = Param(ordinal=0, offset=0, size=8, type="Params*", value=0x7AAA_0000_0000, shown="")
    assert suspect(outside, memory).startswith("outside every address range")


def _production(build_dir, cubin: str, values: dict[int, int]) -> crashlab.TriageReport:
    """A production kernel faulting, with ``values`` planted at its parameters' offsets (the
    other 8-byte ones at an aligned address, the smaller ones 7)."""
    kernel = kernel_of(cubin).symbol.name
    layout, _ = kernel_param_layout(Cubin((PRODUCTION / cubin).read_bytes()), kernel)
    buffer = bytearray(max(p.offset + p.size for p in layout.params))
    for param in layout.params:
        value = values.get(param.ordinal, GLOBAL_BASE if param.size == 8 else 7)
        buffer[param.offset:param.offset + param.size] = value.to_bytes(param.size, "little")
    path = build_dir / f"{cubin}.nvcudmp"
    fault_dump(cubin, site(cubin, "kernel"), path, params=bytes(buffer))
    return crashlab.inspect(path, sass=False)


def test_production_kernels_pointees_of_2_4_and_8_bytes(tmp_path):
    """merge_attn_states(__nv_bfloat16*, float*, __nv_bfloat16 const*, float const*, ...) and
    ngram_ids(int, int, int, int*, ..., long const*, ...): each pointer misaligned by one byte
    less than its element."""
    merge = _production(tmp_path, "merge_attn_states.sm_90a.cubin",
                        {0: GLOBAL_BASE + 1, 1: GLOBAL_BASE + 2, 2: GLOBAL_BASE + 2})
    assert _suspects(merge) == {
        0: "misaligned for __nv_bfloat16 (2-byte elements): 1 bytes past a boundary",
        1: "misaligned for float (4-byte elements): 2 bytes past a boundary"}
    ngram = _production(tmp_path, "ngram_ids.sm_80.cubin", {9: GLOBAL_BASE + 4, 3: 0})
    assert _suspects(ngram) == {3: "null pointer",
                                9: "misaligned for long (8-byte elements): 4 bytes past a boundary"}


# -- a dump without the parameter buffer ---------------------------------------------------------
@pytest.mark.parametrize("flags, metadata, said", [
    (LIGHTWEIGHT, True, "it was written with skip_constbank_memory; " + FLAG),
    (LIGHTWEIGHT & ~SKIP_CONSTBANK, True, "although it was written without skip_constbank_memory: "
                                          "no generation flag is known to bring it back"),
    (LIGHTWEIGHT, False, "records no generation flags; if CUDA_COREDUMP_GENERATION_FLAGS held "
                         "skip_constbank_memory (SGLang's and vLLM's default), drop it next time"),
], ids=["skip-constbank", "flag-not-set", "no-metadata"])
def test_a_missing_parameter_buffer_is_explained_with_the_flag_to_drop(build, flags, metadata, said):
    report = crashlab.inspect(build(_moe(None, flags=flags, metadata=metadata)).path, sass=False)
    fault = report.faults[0]
    assert fault.params is None
    assert fault.params_missing.startswith("the dump holds no parameter buffer for this kernel")
    assert said in fault.params_missing


def test_a_missing_buffer_is_said_once_in_every_view(build):
    """Two fault groups of two kernels, neither with its buffer: the sentence once per view,
    the second fault pointing to the first in the Markdown; the CLI's JSON carries it per fault."""
    several = scenarios.fault(device_count=2, faulting_device=1)
    several.spec.devices[0].sms[2].ctas[0].warps[0].lanes[5].exception = scenarios.WARP_MISALIGNED_ADDRESS
    for device in several.spec.devices:
        device.grids[0].params = None
    path = build(several).path
    report = crashlab.inspect(path, sass=False)
    assert len(report.faults) == 2 and all(f.params_missing for f in report.faults)
    shown, seen, _ = _views(report)
    assert _squeezed(shown).count(_squeezed(FLAG)) == 1
    assert seen.count(FLAG) == 1 and "not in the dump (as fault 1)" in seen
    data = json.loads(run_cli("inspect", path, "--json", "--no-sass").stdout)
    assert [FLAG in f["params_missing"] for f in data["faults"]] == [True, True]
    assert_reads_at_80(report)


def test_known_memory_holds_what_its_ranges_hold_where_they_overlap():
    """Windows of 4 GiB overlap the sections inside them: a lookup over the merged ranges
    answers as a scan of every range would."""
    ranges = ((0x1000, 0x2000), (0x1800, 0x3000), (0x5000, 0x5001), (0x100, 0x200), (0x4000, 0x4000))
    memory = KnownMemory(ranges, 1)
    for address in range(0, 0x6000, 0x80):
        for probe in (address - 1, address, address + 1):
            assert memory.holds(probe) == any(a <= probe < b for a, b in ranges), hex(probe)
