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
from functools import cache

import cxxfilt
import pytest
from elftools.elf.elffile import ELFFile

import crashlab
from crashlab.sass.listing import find_nvdisasm
from tests.conftest import run_cli
from tests.coredump_builder import (
    CTA,
    CUBINS,
    SM,
    Context,
    Device,
    Grid,
    Lane,
    Module,
    Spec,
    Warp,
    relocate,
    write,
)

PRODUCTION = CUBINS / "production"
CODE_BASE = 0x7FFF_3A00_0000
MODULE = 0x5550_0000
WARP_ILLEGAL_ADDRESS = 14
CONTEXT = 8
#: a GPU of each arch, for the device row (crashlab reports it; nothing depends on it)
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


@cache
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


@cache
def original_disassembly(cubin: str) -> str:
    """nvdisasm's listing of the kernel's section of the ORIGINAL cubin."""
    tool, why = find_nvdisasm()
    if tool is None:
        pytest.fail(f"the test environment must have nvdisasm (pip install '.[sass]'): {why}")
    return subprocess.run([tool, "-c", "-fun", str(kernel_of(cubin).symbol.index), str(PRODUCTION / cubin)],
                          check=True, capture_output=True, text=True).stdout


def original_listing(cubin: str) -> list[tuple[int, str]]:
    """(offset into the section, instruction text) of each instruction."""
    return [(int(m[1], 16), m[2]) for m in map(_INSTRUCTION.match, original_disassembly(cubin).splitlines())
            if m]


def with_addresses(cubin: str, text: str) -> str:
    """nvdisasm's text with its branch labels (``.L_x_6``) as the offsets cuda-gdb prints."""
    labels = {m[1]: int(m[2], 16) for m in re.finditer(r"^(\.L_x_\d+):\n\s*/\*([0-9a-f]+)\*/",
                                                        original_disassembly(cubin), re.M)}
    return re.sub(r"`\((\.L_x_\d+)\)", lambda m: f"{labels[m[1]]:#x}", text)


@dataclass(frozen=True)
class Site:
    """Where the warp faults: an offset into the kernel's section; in a callee, the call's return."""

    offset: int
    symbol: Symbol
    return_offset: int | None = None


def site(cubin: str, where: str) -> Site:
    """``kernel``: the kernel's first global load or store, where kernels fault; ``callee``: the
    second instruction of the last ``$__internal_`` function the kernel calls."""
    kernel = kernel_of(cubin)
    listing = original_listing(cubin)
    if where == "kernel":
        start, end = kernel.symbol.start, kernel.symbol.start + kernel.symbol.size
        return Site(next(offset for offset, text in listing if start <= offset < end
                         and re.match(r"(@!?U?P\w+ )?(LDG|STG)\b", text)), kernel.symbol)
    calls: dict[str, int] = {}  # callee -> offset of the first CALL to it
    for offset, text in listing:
        if text.startswith("CALL"):
            calls.setdefault(text.split("(")[-1].rstrip(")"), offset)
    callee = [c for c in kernel.callees if c.name in calls][-1]
    return Site(callee.start + 0x10, callee, calls[callee.name] + 0x10)


def fault_dump(cubin: str, at: Site, path, base: int = CODE_BASE, **grid) -> int:
    """A dump of one warp faulting at ``at``, relocated as the driver does (its module loaded at
    ``base``); returns the PC. ``grid``: more of the grid row (its parameter buffer)."""
    kernel = kernel_of(cubin)
    code = relocate((PRODUCTION / cubin).read_bytes(), base)
    entry = code.addresses[kernel.symbol.section]
    pc = entry + at.offset
    # (returnAddress, virtualReturnAddress) of the caller: the builder writes it as level 0
    frames = [] if at.return_offset is None else [(at.return_offset, entry + at.return_offset)]
    lanes = [Lane(ln, (ln, 0, 0), pc=pc, exception=WARP_ILLEGAL_ADDRESS if ln == 0 else 0,
                  backtrace=frames, registers=[ln] * 32, predicates=[0] * 7)
             for ln in range(32)]
    warp = Warp(0, lanes, error_pc=pc, broken=1, uniform_registers=[0] * 63, uniform_predicates=[0] * 7)
    device = Device(name=GPUS[kernel.arch], sm_type=kernel.arch,
                    contexts=[Context(0x1000, [Module(MODULE, code.data)])],
                    grids=[Grid(7, kernel.symbol.name, entry, MODULE, block_dim=(32, 1, 1), **grid)],
                    sms=[SM(3, [CTA(7, (1, 0, 0), [warp])])])
    write(Spec([device]), path)
    return pc


def expected_window(cubin: str, offset: int, base: int) -> list[tuple[int, str]]:
    listing = original_listing(cubin)
    at = next(i for i, (address, _) in enumerate(listing) if address == offset)
    return [(base + address, text) for address, text in listing[max(0, at - CONTEXT):at + CONTEXT + 1]]


def gnu_demangled(name: str) -> str | None:
    """GNU c++filt's reading without its length guard, where binutils is installed."""
    if shutil.which("c++filt") is None:
        return None
    done = subprocess.run(["c++filt", "--no-recurse-limit", name], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.mark.parametrize("where", ["kernel", "callee"])
@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_window_is_nvdisasms_listing_of_the_original(cubin, where, tmp_path):
    at = site(cubin, where)
    pc = fault_dump(cubin, at, tmp_path / "core.nvcudmp")
    fault = crashlab.inspect(tmp_path / "core.nvcudmp", context=CONTEXT).faults[0]
    assert fault.sass.unavailable_reason is None
    assert fault.pc == f"{pc:#x}"
    got = [(int(ins.address, 16), ins.text) for ins in fault.sass.instructions]
    assert got == expected_window(cubin, at.offset, pc - at.offset)
    assert [int(ins.address, 16) for ins in fault.sass.instructions if ins.faulting] == [pc]
    assert fault.sass.section == kernel_of(cubin).symbol.section


@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_kernel_and_function_names_are_demangled(cubin, tmp_path):
    at = site(cubin, "kernel")
    kernel = at.symbol
    fault_dump(cubin, at, tmp_path / "core.nvcudmp")
    fault = crashlab.inspect(tmp_path / "core.nvcudmp").faults[0]
    assert fault.kernel.mangled == kernel.name
    assert fault.kernel.name != kernel.name
    assert fault.function == fault.kernel.name
    assert fault.function_offset == at.offset - kernel.start
    gnu = gnu_demangled(kernel.name)
    if gnu is not None:
        assert fault.kernel.name == gnu
    if len(kernel.name) <= 1024:  # the C++ runtime's demangler takes no longer names
        assert fault.kernel.name == cxxfilt.demangle(kernel.name)


def test_cutlass_names_past_the_runtime_demanglers_limit(tmp_path):
    """__cxa_demangle refuses 1,400+ character CUTLASS 3.x names; the report must not show them raw."""
    cubin = "cutlass_mxfp8_grouped_gemm.sm_100.cubin"
    at = site(cubin, "kernel")
    assert len(at.symbol.name) >= 1400
    with pytest.raises(cxxfilt.InvalidName):
        cxxfilt.demangle(at.symbol.name)
    fault_dump(cubin, at, tmp_path / "core.nvcudmp")
    report = crashlab.inspect(tmp_path / "core.nvcudmp", sass=False)
    name = report.faults[0].kernel.name
    assert name != at.symbol.name and not name.startswith("_Z")
    assert name.startswith("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<")
    assert "cutlass::gemm::MainloopSm100ArrayTmaUmmaWarpSpecializedBlockScaled<6, 8, 2," in name
    assert report.kernels[0].name == name
    # the human views print it with its template arguments folded; the JSON keeps it whole
    shown = run_cli("inspect", "--no-sass", tmp_path / "core.nvcudmp", env={"COLUMNS": "120"})
    assert shown.returncode == 0, shown.stderr
    assert "void cutlass::device_kernel<…>(" in shown.stdout.decode()
    assert len(shown.stdout) < len(name)


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
def test_pc_inside_an_internal_callee_is_named_as_that_function_inside_its_kernel(cubin, tmp_path):
    at = site(cubin, "callee")
    kernel = kernel_of(cubin).symbol
    fault_dump(cubin, at, tmp_path / "core.nvcudmp")
    fault = crashlab.inspect(tmp_path / "core.nvcudmp").faults[0]
    own_name = at.symbol.name.rsplit("$", 1)[-1]  # $__internal_<n>_$<function>
    assert own_name.startswith("__cuda_")
    assert (fault.function, fault.function_offset) == (own_name, 0x10)
    without_sass = crashlab.inspect(tmp_path / "core.nvcudmp", sass=False).faults[0]
    assert (without_sass.function, without_sass.function_offset) == (own_name, 0x10)
    assert fault.kernel.mangled == kernel.name
    [caller] = fault.backtrace
    assert (caller.function, caller.function_offset) == (fault.kernel.name,
                                                         at.return_offset - kernel.start)


@pytest.mark.parametrize("where", ["kernel", "callee"])
@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_real_cuda_gdb_agrees_on_the_faulting_instruction(cubin, where, tmp_path, real_cuda_gdb):
    at = site(cubin, where)
    dump = tmp_path / "core.nvcudmp"
    pc = fault_dump(cubin, at, dump)
    fault = crashlab.inspect(dump, context=CONTEXT).faults[0]
    done = subprocess.run([real_cuda_gdb, "-nx", "-batch", "-ex", f"target cudacore {dump}",
                           "-ex", "x/1i $errorpc", "-ex", "bt"],
                          capture_output=True, text=True, timeout=300)
    shown = re.search(r"^\*?=>\s*(0x[0-9a-f]+) <(\S+)\+(\d+)>:\s*(.*?)\s*$", done.stdout, re.M)
    assert shown, done.stdout + done.stderr
    address, symbol, symbol_offset, text = shown.groups()
    faulting = [ins for ins in fault.sass.instructions if ins.faulting]
    assert len(faulting) == 1, fault.sass.unavailable_reason
    assert int(address, 16) == pc == int(faulting[0].address, 16)
    assert text == with_addresses(cubin, faulting[0].text)
    assert symbol == at.symbol.name and int(symbol_offset) == fault.function_offset
    frames = re.findall(r"^#\d+\s+0x[0-9a-f]+ in (.*?)(?:<<<.*)? \(\)$", done.stdout, re.M)
    assert frames[-1] == fault.kernel.name, done.stdout
