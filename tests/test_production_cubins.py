"""Production kernels carved from public wheels (fixtures/cubins/production): SASS and names.

Each cubin is relocated, as the driver relocates a module, into a SYNTHETIC coredump
(tests/coredump_builder.py) with a fault at a chosen PC. crashlab's window around that PC must be
nvdisasm's listing of the ORIGINAL cubin at the same offsets, its names what the demanglers make
of the symbols, and, where real cuda-gdb is installed, its faulting instruction cuda-gdb's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

import cxxfilt
import pytest
from elftools.elf.elffile import ELFFile

import crashlab
from crashlab import sass
from tests.coredump_builder import CTA, CUBINS, SM, Context, Device, Grid, Lane, Module, Spec, Warp
from tests.coredump_builder import relocate, write

PRODUCTION = CUBINS / "production"
CODE_BASE = 0x7FFF_3A00_0000
MODULE = 0x5550_0000
WARP_ILLEGAL_ADDRESS = 14
CONTEXT = 8
#: the GPU each arch is found in (the dump's device name; crashlab does not read it)
GPUS = {"sm_80": "NVIDIA A100-SXM4-80GB", "sm_90a": "NVIDIA H100 80GB HBM3",
        "sm_100": "NVIDIA B200", "sm_120": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}
CUBIN_FILES = sorted(path.name for path in PRODUCTION.glob("*.cubin"))
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+([^;]*?)\s*;")


@dataclass(frozen=True)
class Symbol:
    index: int
    name: str
    section: str
    start: int  # offset into its section
    size: int


@dataclass(frozen=True)
class Kernel:
    """The kernel of a cubin the tests fault in: its longest-named one, and its callees."""

    arch: str
    symbol: Symbol
    callees: tuple[Symbol, ...]


@lru_cache(maxsize=None)
def kernel_of(cubin: str) -> Kernel:
    with open(PRODUCTION / cubin, "rb") as stream:
        elf = ELFFile(stream)
        names = [section.name for section in elf.iter_sections()]
        symbols = [Symbol(number, s.name, names[s["st_shndx"]], s["st_value"], s["st_size"])
                   for number, s in enumerate(elf.get_section_by_name(".symtab").iter_symbols())
                   if s["st_info"]["type"] == "STT_FUNC" and isinstance(s["st_shndx"], int)]
    kernel = max((s for s in symbols if s.name.startswith("_Z")), key=lambda s: len(s.name))
    callees = tuple(s for s in symbols if s.section == kernel.section and s.name.startswith("$__internal_"))
    return Kernel(cubin.split(".")[1], kernel, callees)


@lru_cache(maxsize=None)
def original_listing(cubin: str, symbol: int) -> tuple[tuple[int, str], ...]:
    """(offset, instruction) of the section holding ``symbol``, as nvdisasm prints the original."""
    tool, why = sass.find_nvdisasm()
    if tool is None:
        pytest.fail(f"the test environment must have nvdisasm (pip install '.[sass]'): {why}")
    out = subprocess.run([tool, "-c", "-fun", str(symbol), str(PRODUCTION / cubin)], check=True,
                         capture_output=True, text=True).stdout
    return tuple((int(m[1], 16), m[2]) for m in map(_INSTRUCTION.match, out.splitlines()) if m)


def memory_access_offset(cubin: str) -> int:
    """Offset into the kernel's section of its first global load or store: where a kernel faults."""
    kernel = kernel_of(cubin).symbol
    return next(offset for offset, text in original_listing(cubin, kernel.index)
                if kernel.start <= offset < kernel.start + kernel.size
                and re.match(r"(@!?U?P\w+ )?(LDG|STG)\b", text))


def fault_dump(cubin: str, offset: int, path) -> int:
    """A dump of one warp faulting at ``offset`` into the kernel's section; returns the PC."""
    kernel = kernel_of(cubin)
    code = relocate((PRODUCTION / cubin).read_bytes(), CODE_BASE)
    entry = code.addresses[kernel.symbol.section]
    pc = entry + offset
    lanes = [Lane(ln, (ln, 0, 0), pc=pc, exception=WARP_ILLEGAL_ADDRESS if ln == 0 else 0,
                  registers=[ln] * 32, predicates=[0] * 7) for ln in range(32)]
    warp = Warp(0, lanes, error_pc=pc, broken=1, uniform_registers=[0] * 63, uniform_predicates=[0] * 7)
    device = Device(name=GPUS[kernel.arch], sm_type=kernel.arch,
                    contexts=[Context(0x1000, [Module(MODULE, code.data)])],
                    grids=[Grid(7, kernel.symbol.name, entry, MODULE, block_dim=(32, 1, 1))],
                    sms=[SM(3, [CTA(7, (1, 0, 0), [warp])])])
    write(Spec([device]), path)
    return pc


def expected_window(cubin: str, offset: int, base: int) -> list[tuple[int, str]]:
    listing = original_listing(cubin, kernel_of(cubin).symbol.index)
    at = next(i for i, (address, _) in enumerate(listing) if address == offset)
    return [(base + address, text) for address, text in listing[max(0, at - CONTEXT):at + CONTEXT + 1]]


def gnu_demangled(name: str) -> str | None:
    """GNU c++filt's reading without its length guard, where binutils is installed."""
    if shutil.which("c++filt") is None:
        return None
    done = subprocess.run(["c++filt", "--no-recurse-limit", name], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_window_at_a_memory_access_is_nvdisasms_listing_of_the_original(cubin, tmp_path):
    offset = memory_access_offset(cubin)
    pc = fault_dump(cubin, offset, tmp_path / "core.nvcudmp")
    fault = crashlab.inspect(tmp_path / "core.nvcudmp", context=CONTEXT).faults[0]
    assert fault.sass.unavailable_reason is None
    assert fault.pc == f"{pc:#x}"
    base = pc - offset
    got = [(int(ins.address, 16), ins.text) for ins in fault.sass.instructions]
    assert got == expected_window(cubin, offset, base)
    assert [int(ins.address, 16) for ins in fault.sass.instructions if ins.faulting] == [pc]
    assert fault.sass.section == kernel_of(cubin).symbol.section


@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_kernel_and_function_names_are_demangled(cubin, tmp_path):
    kernel = kernel_of(cubin).symbol
    offset = memory_access_offset(cubin)
    fault_dump(cubin, offset, tmp_path / "core.nvcudmp")
    fault = crashlab.inspect(tmp_path / "core.nvcudmp").faults[0]
    assert fault.kernel.mangled == kernel.name
    assert fault.kernel.name != kernel.name
    assert fault.function == fault.kernel.name
    assert fault.function_offset == offset - kernel.start
    gnu = gnu_demangled(kernel.name)
    if gnu is not None:
        assert fault.kernel.name == gnu
    if len(kernel.name) <= 1024:  # the C++ runtime's demangler takes no longer names
        assert fault.kernel.name == cxxfilt.demangle(kernel.name)


def test_cutlass_names_past_the_runtime_demanglers_limit(tmp_path):
    """__cxa_demangle refuses 1,400+ character CUTLASS 3.x names; the report must not show them raw."""
    cubin = "cutlass_mxfp8_grouped_gemm.sm_100.cubin"
    kernel = kernel_of(cubin).symbol
    assert len(kernel.name) >= 1400
    with pytest.raises(cxxfilt.InvalidName):
        cxxfilt.demangle(kernel.name)
    fault_dump(cubin, memory_access_offset(cubin), tmp_path / "core.nvcudmp")
    report = crashlab.inspect(tmp_path / "core.nvcudmp", sass=False)
    name = report.faults[0].kernel.name
    assert name != kernel.name and not name.startswith("_Z")
    assert name.startswith("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<")
    assert "cutlass::gemm::MainloopSm100ArrayTmaUmmaWarpSpecializedBlockScaled<6, 8, 2," in name
    assert report.kernels[0].name == name


def test_names_neither_demangler_reads_come_back_as_they_are(monkeypatch):
    """Dump strings come from strangers: a name nested 100,000 deep is no crash, and without the
    long-name demangler (Linux on ARM has no wheel of it) a CUTLASS name stays mangled."""
    from crashlab import demangle as names

    hostile = "_Z1f" + "P" * 100_000 + "i"
    assert names.demangle(hostile) == hostile
    cutlass = kernel_of("cutlass_mxfp8_grouped_gemm.sm_100.cubin").symbol.name
    monkeypatch.setattr(names, "cpp_demangle", None)
    names.demangle.cache_clear()
    try:
        assert names.demangle(cutlass) == cutlass
        assert names.demangle("_Z3fooi") == "foo(int)"
    finally:
        names.demangle.cache_clear()


@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_pc_inside_an_internal_callee_is_named_as_that_function(cubin, tmp_path):
    kernel = kernel_of(cubin)
    callee = kernel.callees[-1]
    offset = callee.start + 0x10
    pc = fault_dump(cubin, offset, tmp_path / "core.nvcudmp")
    fault = crashlab.inspect(tmp_path / "core.nvcudmp", context=CONTEXT).faults[0]
    own_name = callee.name.rsplit("$", 1)[-1]  # $__internal_<n>_$<function>
    assert fault.function == own_name and own_name.startswith("__cuda_")
    assert fault.function_offset == 0x10
    assert fault.kernel.mangled == kernel.symbol.name
    got = [(int(ins.address, 16), ins.text) for ins in fault.sass.instructions]
    assert got == expected_window(cubin, offset, pc - offset)


@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_real_cuda_gdb_agrees_on_the_faulting_instruction(cubin, tmp_path, real_cuda_gdb):
    offset = memory_access_offset(cubin)
    dump = tmp_path / "core.nvcudmp"
    pc = fault_dump(cubin, offset, dump)
    fault = crashlab.inspect(dump, context=CONTEXT).faults[0]
    done = subprocess.run([real_cuda_gdb, "-nx", "-batch", "-ex", f"target cudacore {dump}",
                           "-ex", "x/1i $errorpc", "-ex", "bt 1"],
                          capture_output=True, text=True, timeout=300)
    shown = re.search(r"^\*?=>\s*(0x[0-9a-f]+) <(\S+)\+(\d+)>:\s*(.*?)\s*$", done.stdout, re.M)
    assert shown, done.stdout + done.stderr
    address, symbol, symbol_offset, text = shown.groups()
    faulting = [ins for ins in fault.sass.instructions if ins.faulting]
    assert len(faulting) == 1, fault.sass.unavailable_reason
    faulting = faulting[0]
    assert int(address, 16) == pc == int(faulting.address, 16)
    assert text == faulting.text
    assert symbol == kernel_of(cubin).symbol.name and int(symbol_offset) == fault.function_offset
    frame = re.search(r"^#0\s+0x[0-9a-f]+ in (.*)<<<", done.stdout, re.M)
    assert frame and frame[1] == fault.kernel.name
