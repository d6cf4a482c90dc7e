"""Kernel parameters: the cubin's layout as NVIDIA's cuobjdump reads it, the values as real
cuda-gdb reads them from a dump, and the params row of the terminal and Markdown views.

The layout reader (crashlab/cubin/nvinfo.py) is held to ``cuobjdump -elf`` on every fixture cubin,
ours and the production ones carved from public wheels: the same records in the same formats,
the same ordinal, offset and size for every parameter. The values are planted in a SYNTHETIC
dump (tests/coredump_builder.py) around the real moe_align cubin and read back by
``crashlab inspect`` in its own process, and by real cuda-gdb 12.4 where .ci/get-cuda-gdb put it.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

import crashlab
from crashlab.coredump.model import ParamBlock
from crashlab.cubin import Cubin, CubinError, nvinfo
from crashlab.demangle import demangle
from crashlab.report import text
from crashlab.report.params import argument_types, kernel_params, shown
from crashlab.toolpath import checkout_tool, find_cuda_tool
from tests import scenarios
from tests.conftest import ROOT, run_cli
from tests.test_production_cubins import PRODUCTION, kernel_of
from tests.test_real_cuda_gdb import cuda_gdb

CUBINS = sorted(ROOT.glob("fixtures/cubins/*.cubin")) + sorted(
    ROOT.glob("fixtures/cubins/production/*.cubin"))
_FORMATS = {"EIFMT_NVAL": 1, "EIFMT_BVAL": 2, "EIFMT_HVAL": 3, "EIFMT_SVAL": 4}
_KPARAM = re.compile(
    r"Ordinal : (?P<ordinal>0x[0-9a-f]+)\s+Offset\s*: (?P<offset>0x[0-9a-f]+)\s+"
    r"Size\s*: (?P<size>0x[0-9a-f]+)\s+Pointee's logAlignment : (?P<align>0x[0-9a-f]+)\s+"
    r"Space : (?P<space>0x[0-9a-f]+)\s+cbank : (?P<cbank>0x[0-9a-f]+)\s+"
    r"Parameter Space : (?P<where>\w+)")


@pytest.fixture(scope="module")
def cuobjdump() -> str:
    """NVIDIA's cuobjdump: on PATH, under CUDA_HOME or /usr/local/cuda, or where
    .ci/get-cuda-gdb puts it (from NVIDIA's nvidia-cuda-cuobjdump wheel)."""
    found = find_cuda_tool("cuobjdump", "CRASHLAB_CUOBJDUMP")[0] or checkout_tool("cuobjdump")
    if found is None:
        pytest.skip("cuobjdump not found (PATH, CUDA_HOME, /usr/local/cuda, or .cuda-gdb/bin "
                    "from .ci/get-cuda-gdb): the layout cannot be checked against NVIDIA's reader")
    return found


def _cuobjdump_sections(tool: str, cubin: Path) -> dict[str, list[dict]]:
    """cuobjdump's decoding of every ``.nv.info*`` section: per record its format, attribute
    name and the value text as printed."""
    out = subprocess.run([tool, "-elf", str(cubin)], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    sections: dict[str, list[dict]] = {}
    records: list[dict] | None = None
    for line in out.splitlines():
        if line.startswith(".nv.info"):
            records = sections.setdefault(line.strip(), [])
        elif records is not None and line and not line.startswith("\t"):
            records = None
        elif records is not None and line.startswith("\tAttribute:"):
            records.append({"attribute": line.split(":", 1)[1].strip(), "value": ""})
        elif records is not None and line.startswith("\tFormat:"):
            records[-1]["format"] = _FORMATS[line.split(":", 1)[1].strip()]
        elif records is not None and records and line.startswith(("\tValue:", "\t\t")):
            records[-1]["value"] += line.split("Value:", 1)[-1] + "\n"
    return sections


def _our_sections(cubin: Path) -> dict[str, bytes]:
    with open(cubin, "rb") as stream:
        return {s.name: s.data() for s in ELFFile(stream).iter_sections()
                if s.name.startswith(".nv.info")}


@pytest.mark.parametrize("cubin", CUBINS, ids=lambda p: p.name)
def test_nv_info_records_frame_as_cuobjdump_frames_them(cuobjdump, cubin):
    theirs = _cuobjdump_sections(cuobjdump, cubin)
    ours = _our_sections(cubin)
    assert ours.keys() == theirs.keys() and ours
    for name, data in ours.items():
        assert [r.format for r in nvinfo.records(data)] == [r["format"] for r in theirs[name]], name


@pytest.mark.parametrize("cubin", CUBINS, ids=lambda p: p.name)
def test_parameter_layout_is_cuobjdumps(cuobjdump, cubin):
    theirs = _cuobjdump_sections(cuobjdump, cubin)
    kernels = 0
    for name, data in _our_sections(cubin).items():
        if name == ".nv.info":
            continue
        layout = nvinfo.layout(nvinfo.records(data))
        printed = [_KPARAM.search(r["value"]) for r in theirs[name]
                   if r["attribute"] == "EIATTR_KPARAM_INFO"]
        expected = sorted(
            (int(m["ordinal"], 16), int(m["offset"], 16), int(m["size"], 16), int(m["align"], 16),
             int(m["space"], 16), int(m["cbank"], 16), m["where"] == "CBANK") for m in printed)
        assert [(p.ordinal, p.offset, p.size, p.log_alignment, p.space, p.cbank, p.in_cbank)
                for p in layout.params] == expected, name
        if not expected:  # a non-inlined device function's section: no parameter area
            assert layout.cbank_offset is layout.area_size is None, name
            continue
        kernels += 1
        cbank = [r["value"].split() for r in theirs[name] if r["attribute"] == "EIATTR_PARAM_CBANK"]
        (symbol, packed), = cbank
        assert (layout.cbank_offset, layout.cbank_size) == (int(packed, 16) & 0xFFFF,
                                                           int(packed, 16) >> 16), name
        area, = [r["value"].split()[0] for r in theirs[name]
                 if r["attribute"] == "EIATTR_CBANK_PARAM_SIZE"]
        assert layout.area_size == int(area, 16) == layout.cbank_size, name
        last = max(layout.params, key=lambda p: p.offset)
        assert last.offset + last.size <= layout.area_size, name
    assert kernels >= 1


def test_a_kernels_layout_is_found_by_its_mangled_name():
    cubin = (ROOT / "fixtures/cubins/moe_align.sm_90.cubin").read_bytes()
    layout, why = nvinfo.kernel_param_layout(Cubin(cubin), "_Z20moe_align_block_sizePKiPii")
    assert why == "" and [(p.ordinal, p.offset, p.size) for p in layout.params] == [
        (0, 0, 8), (1, 8, 8), (2, 16, 4)]
    missing, why = nvinfo.kernel_param_layout(Cubin(cubin), "_Z7no_suchv")
    assert missing is None and "no .nv.info section" in why
    with pytest.raises(CubinError):
        Cubin(b"\x7fELF" + bytes(60))


def _with_section_moved(cubin: bytes, name: str, offset: int, size: int | None = None) -> bytes:
    """``cubin`` with section ``name``'s sh_offset (and sh_size) rewritten in its header."""
    found = Cubin(cubin)
    shoff, shentsize = struct.unpack_from("<QxxxxxxxxxxH", cubin, 0x28)
    image = bytearray(cubin)
    at = shoff + found.section(name).index * shentsize
    struct.pack_into("<Q", image, at + 24, offset)
    if size is not None:
        struct.pack_into("<Q", image, at + 32, size)
    return bytes(image)


def test_a_damaged_kernel_section_is_said_in_the_layouts_words():
    """One exception type (CubinError) out of the cubin layer, two user-facing wordings: the
    cubin unreadable (a section past the file's end), its .nv.info records damaged."""
    cubin = (ROOT / "fixtures/cubins/moe_align.sm_90.cubin").read_bytes()
    kernel = "_Z20moe_align_block_sizePKiPii"
    info = Cubin(cubin).section(f".nv.info.{kernel}")
    past, why = nvinfo.kernel_param_layout(Cubin(_with_section_moved(cubin, info.name, len(cubin))),
                                           kernel)
    assert past is None and why.startswith("the kernel's cubin is unreadable: ") and "past the end" in why
    cut, why = nvinfo.kernel_param_layout(
        Cubin(_with_section_moved(cubin, info.name, info.offset, info.size - 3)), kernel)
    assert cut is None and why.startswith("the kernel's .nv.info section is damaged: record at ")


def test_a_damaged_nv_info_section_is_refused_with_its_reason():
    cubin = (ROOT / "fixtures/cubins/moe_align.sm_90.cubin")
    data = _our_sections(cubin)[".nv.info._Z20moe_align_block_sizePKiPii"]
    with pytest.raises(CubinError, match="past the section's end"):
        nvinfo.records(data[:-3])
    with pytest.raises(CubinError, match="unknown format 9"):
        nvinfo.records(b"\x09\x17\x00\x00")
    short_kparam = b"\x04\x17\x08\x00" + bytes(8)
    with pytest.raises(CubinError, match="KPARAM_INFO of 8 bytes"):
        nvinfo.layout(nvinfo.records(short_kparam))


@pytest.mark.parametrize("signature, types", [
    ("moe_align_block_size(int const*, int*, int)", ["int const*", "int*", "int"]),
    ("void k<int, 2>(Pair<int, float>, float* __restrict__)", ["Pair<int, float>", "float* __restrict__"]),
    ("void apply(void (*)(int, int), int)", ["void (*)(int, int)", "int"]),
    ("f((anonymous namespace)::Args<(char)1, 2>)", ["(anonymous namespace)::Args<(char)1, 2>"]),
    ("no_arguments()", []),
    ("_Z9not_demangled", None),
    ("unbalanced)", None),
])
def test_argument_types_split_at_top_level_commas(signature, types):
    assert argument_types(signature) == types


@pytest.mark.parametrize("cubin", sorted(p.name for p in ROOT.glob("fixtures/cubins/production/*.cubin")))
def test_production_signatures_type_every_parameter(cubin):
    """The demangled names of real kernels (a CUTLASS 3.x one runs to thousands of characters)
    split into as many types as the cubin has parameters."""
    kernel = kernel_of(cubin).symbol.name
    layout, why = nvinfo.kernel_param_layout(Cubin((PRODUCTION / cubin).read_bytes()), kernel)
    types = argument_types(demangle(kernel))
    assert why == "" and types is not None and len(types) == len(layout.params) >= 1
    assert all(t and t.count("<") == t.count(">") for t in types)


@pytest.mark.parametrize("raw, type_name, text", [
    ((0x7FFF00001000).to_bytes(8, "little"), "int const*", "0x7fff00001000"),
    ((0x7FFF00001000).to_bytes(8, "little"), "float* __restrict__", "0x7fff00001000"),
    ((0x400).to_bytes(8, "little"), None, "0x400"),
    ((0x400).to_bytes(8, "little"), "long", "1024"),
    ((-3).to_bytes(4, "little", signed=True), "int", "-3"),
    ((-3).to_bytes(4, "little", signed=True), "unsigned int", "4294967293"),
    ((-3).to_bytes(4, "little", signed=True), None, "4294967293"),
    ((-1).to_bytes(2, "little", signed=True), "short const", "-1"),
    (bytes.fromhex("cdcccc3d"), "float", "0.1"),
    (bytes.fromhex("000000000000f83f"), "double", "1.5"),
    (b"\x01", "bool", "true"),
    (bytes(range(24)), "Params", "24 bytes 000102030405060708090a0b0c0d0e0f…"),
    (bytes(range(12)), None, "12 bytes 000102030405060708090a0b"),
    (None, "int", "not in the dump (the buffer ends before it)"),
])
def test_each_value_is_shown_by_its_size_and_type(raw, type_name, text):
    size = 4 if raw is None else len(raw)
    assert shown(raw, size, type_name) == text


def test_types_are_dropped_when_the_signature_does_not_match_the_cubin():
    layout = nvinfo.ParamLayout(params=[
        nvinfo.KernelParam(0, 0, 8, 0, 0, 0x1F, True),
        nvinfo.KernelParam(1, 8, 4, 0, 0, 0x1F, True)])
    block = ParamBlock(address=0x7F00_0000_0000, size=12,
                       data=(0x7FFF0000).to_bytes(8, "little") + (-3).to_bytes(4, "little", signed=True))
    typed = kernel_params(block, layout, "", "k(int*, int)")
    assert [(p.type, p.shown) for p in typed.values] == [("int*", "0x7fff0000"), ("int", "-3")]
    untyped = kernel_params(block, layout, "", "k(int*, int, int)")
    assert [(p.type, p.shown) for p in untyped.values] == [(None, "0x7fff0000"), (None, "4294967293")]
    none = kernel_params(block, None, "the kernel's cubin has no .nv.info section for it", "k(int*, int)")
    assert none.values == [] and none.layout_unavailable.startswith("the kernel's cubin")


# -- end to end: a dump whose parameter buffer holds known values ----------------------------
TOPK_IDS, EXPERT_COUNTS, NUMEL = 0x7FFF_0000_1000, 0x7FFF_0000_2000, -3


def _planted(params: bytes):
    """The moe_align fault (a real nvcc-built cubin) with ``params`` as its parameter buffer."""
    scenario = scenarios.fault("moe_align.sm_90.cubin:shared-out-of-range",
                               scenarios.WARP_OUT_OF_RANGE_ADDRESS)
    scenario.spec.devices[0].grids[0].params = params
    return scenario


PLANTED = (TOPK_IDS.to_bytes(8, "little") + EXPERT_COUNTS.to_bytes(8, "little")
           + NUMEL.to_bytes(4, "little", signed=True))


def test_inspect_shows_the_planted_parameters_in_every_view(build):
    path = build(_planted(PLANTED)).path
    terminal = run_cli("inspect", path, "--no-sass")
    assert terminal.returncode == 0, terminal.stderr
    lines = terminal.stdout.decode().splitlines()
    at = next(i for i, text in enumerate(lines) if "params" in text)
    assert [text.strip("│ ").strip() for text in lines[at : at + 3]] == [
        "params     #0 int const* = 0x7fff00001000", "#1 int* = 0x7fff00002000", "#2 int = -3"]
    markdown = run_cli("inspect", path, "--no-sass", "--markdown").stdout.decode()
    assert ("| Params | `#0 int const* = 0x7fff00001000`, `#1 int* = 0x7fff00002000`, "
            "`#2 int = -3` |") in markdown.splitlines()
    data = json.loads(run_cli("inspect", path, "--no-sass", "--json").stdout)
    values = data["faults"][0]["params"]["values"]
    assert [(v["ordinal"], v["offset"], v["size"], v["type"], v["value"]) for v in values] == [
        (0, 0, 8, "int const*", TOPK_IDS), (1, 8, 8, "int*", EXPERT_COUNTS),
        (2, 16, 4, "int", NUMEL & 0xFFFFFFFF)]


def test_a_buffer_cut_short_names_what_it_lacks(build):
    path = build(_planted(PLANTED[:12])).path
    data = json.loads(run_cli("inspect", path, "--no-sass", "--json").stdout)
    values = data["faults"][0]["params"]["values"]
    assert [(v["hex"], v["shown"]) for v in values] == [
        (PLANTED[:8].hex(), "0x7fff00001000"),
        (None, "not in the dump (the buffer ends before it)"),
        (None, "not in the dump (the buffer ends before it)")]


def test_real_cuda_gdb_reads_the_values_crashlab_reads(build, real_cuda_gdb):
    """cuda-gdb's @parameter space is constant bank 0: the dump's buffer starts at the cubin's
    EIATTR_PARAM_CBANK offset (paramsOffset), each parameter at its KPARAM_INFO offset past it."""
    path = build(_planted(PLANTED)).path
    params = crashlab.inspect(path, sass=False).faults[0].params
    layout, _ = nvinfo.kernel_param_layout(
        Cubin((ROOT / "fixtures/cubins/moe_align.sm_90.cubin").read_bytes()), "_Z20moe_align_block_sizePKiPii")
    casts = {8: "unsigned long", 4: "unsigned int"}
    commands = [f"print/x *({casts[p.size]} @parameter *){layout.cbank_offset + p.offset:#x}"
                for p in params.values]
    said = cuda_gdb(real_cuda_gdb, path, *commands)
    read = [int(re.search(r"\$\d+ = (0x[0-9a-f]+)", said[c])[1], 16) for c in commands]
    assert read == [p.value for p in params.values] == [TOPK_IDS, EXPERT_COUNTS, NUMEL & 0xFFFFFFFF]


def test_the_views_phrase_says_why_a_buffer_is_not_split_and_caps_long_lists():
    block = ParamBlock(address=0x7F00_0000_0000, size=20, data=bytes(20))
    unsplit = kernel_params(block, None, "the kernel's cubin has no .nv.info section for it", "k()")
    assert text.param_items(unsplit) == [
        "20 bytes at 0x7f0000000000 (the kernel's cubin has no .nv.info section for it)"]
    many = nvinfo.ParamLayout(params=[nvinfo.KernelParam(i, 4 * i, 4, 0, 0, 0x1F, True)
                                          for i in range(text.MAX_PARAMS_SHOWN + 3)])
    wide = ParamBlock(address=0x7F00_0000_0000, size=4 * len(many.params),
                      data=b"".join(i.to_bytes(4, "little") for i in range(len(many.params))))
    items = text.param_items(kernel_params(wide, many, "", "_Z1kv"))
    assert items[0] == "#0 (4 bytes) = 0" and items[-2] == f"#{text.MAX_PARAMS_SHOWN - 1} (4 bytes) = 15"
    assert items[-1] == "... 3 more in the JSON report" and len(items) == text.MAX_PARAMS_SHOWN + 1
    assert text.param_items(None) == []
    unlisted = kernel_params(block, nvinfo.ParamLayout(area_size=20), "", "k(int)")
    assert text.param_items(unlisted) == ["20 bytes at 0x7f0000000000 (the cubin gives a 20-byte "
                                          "parameter area but no EIATTR_KPARAM_INFO record in it)"]
    assert text.param_items(kernel_params(block, nvinfo.ParamLayout(), "", "k()")) == [
        "20 bytes at 0x7f0000000000 (the kernel takes no parameters)"]


@pytest.mark.gpu
def test_a_real_dump_shows_the_launch_arguments(tmp_path):
    """null_argument.cu launches scale_rows(nullptr, out, 64): the driver's own parameter buffer
    read through the cubin's layout gives back the null, the cudaMalloc'ed pointer and 64.
    (illegal_address.cu is not used: an H200 rarely writes a dump of its fault, fixtures/gpu.)"""
    from tests.test_gpu import _run_with_coredump

    dumps = _run_with_coredump("null_argument", tmp_path)
    assert dumps, "the driver wrote no coredump"
    params = crashlab.inspect(dumps[0], sass=False).faults[0].params
    assert params is not None, "the driver's dump has no parameter buffer for the grid"
    assert [(p.ordinal, p.offset, p.size, p.type) for p in params.values] == [
        (0, 0, 8, "float const*"), (1, 8, 8, "float*"), (2, 16, 4, "int")]
    assert params.values[0].value == 0 and params.values[1].value and params.values[2].shown == "64"
