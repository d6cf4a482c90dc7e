"""nvdisasm -gi as the judge of crashlab.cubin.lines, and cubins to judge it on (tests and benchmarks).

The fixture cubins are nvcc's (fixtures/cubins, -lineinfo and -G); ``build`` makes more with the
real nvcc, of shapes the fixtures lack: device functions inlined three deep, a __noinline__
callee, several kernels and template instances per cubin, an -arch other than sm_90, a -G build,
and a cubin nvlink made of two compilation units (two line-program units in one .debug_line).
"""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile

from crashlab.coredump.constants import SHF_EXECINSTR
from crashlab.cubin import Cubin
from crashlab.sass.listing import find_nvdisasm, parse_listing
from tests.coredump_builder import CUBINS

FIXTURES_WITH_LINES = sorted(path.name for path in CUBINS.glob("*.cubin")
                             if b".debug_line" in path.read_bytes())

NESTED = """\
__device__ __forceinline__ int leaf(const int *p, int i) {
  return p[i] * 3 + 1;
}
__device__ __forceinline__ int middle(const int *p, int i) {
  int s = 0;
  for (int k = 0; k < 4; ++k) s += leaf(p, i + k);
  return s;
}
__device__ __forceinline__ int outer(const int *p, int i) {
  return middle(p, i) ^ middle(p, i + 7);
}
__device__ __noinline__ int callee(int *p, int i) {
  atomicAdd(p + (i & 63), outer(p, i));
  return p[i];
}
__global__ void first(const int *in, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = outer(in, i);
}
__global__ void second(int *buf, int n) {
  int i = threadIdx.x;
  if (i < n) buf[i] = callee(buf, i) + middle(buf, i);
}
template <typename T> __global__ void third(T *x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = x[i] * T(2) + T(leaf((const int *)x, i));
}
template __global__ void third<float>(float *, int);
template __global__ void third<double>(double *, int);
"""
#: two compilation units calling each other's device function, linked by nvlink
UNIT_A = """\
__device__ int shared_helper(int *p, int i);
__device__ __forceinline__ int twice(int x) { return 2 * x; }
__global__ void ka(int *p) { p[threadIdx.x] = twice(shared_helper(p, threadIdx.x)); }
"""
UNIT_B = """\
__device__ __forceinline__ int thrice(int x) { return 3 * x; }
__device__ int shared_helper(int *p, int i) { return thrice(p[i + 1]) + p[i]; }
__global__ void kb(int *p) { p[threadIdx.x] += thrice(shared_helper(p, threadIdx.x * 2)); }
"""
#: a header-heavy one (CUB's block algorithms), for the benchmark: the largest table made here
CUB = """\
#include <cub/cub.cuh>
template <int THREADS, int ITEMS, typename T> __global__ void sort_kernel(T *data) {
  using Sort = cub::BlockRadixSort<T, THREADS, ITEMS>;
  __shared__ typename Sort::TempStorage temp;
  T items[ITEMS];
  for (int i = 0; i < ITEMS; ++i) items[i] = data[threadIdx.x * ITEMS + i];
  Sort(temp).Sort(items);
  for (int i = 0; i < ITEMS; ++i) data[threadIdx.x * ITEMS + i] = items[i];
}
template <int THREADS, typename T> __global__ void reduce_kernel(const T *in, T *out) {
  using Reduce = cub::BlockReduce<T, THREADS>;
  __shared__ typename Reduce::TempStorage temp;
  T v = Reduce(temp).Sum(in[threadIdx.x]);
  if (threadIdx.x == 0) atomicAdd(out, v);
}
template <int THREADS, typename T> __global__ void scan_kernel(T *x) {
  using Scan = cub::BlockScan<T, THREADS>;
  __shared__ typename Scan::TempStorage temp;
  T v = x[threadIdx.x];
  Scan(temp).ExclusiveSum(v, v);
  x[threadIdx.x] = v;
}
template __global__ void sort_kernel<128, 4, int>(int *);
template __global__ void sort_kernel<256, 8, float>(float *);
template __global__ void sort_kernel<128, 16, unsigned long long>(unsigned long long *);
template __global__ void reduce_kernel<256, float>(const float *, float *);
template __global__ void reduce_kernel<128, double>(const double *, double *);
template __global__ void scan_kernel<256, int>(int *);
template __global__ void scan_kernel<512, long long>(long long *);
"""


def nvcc() -> str | None:
    return shutil.which("nvcc")


def build(folder: Path, *, cub: bool = False) -> list[Path]:
    """Cubins built here by the real nvcc (and nvlink beside it) in ``folder``."""
    compiler = nvcc()
    assert compiler, "no nvcc"
    (folder / "nested.cu").write_text(NESTED)
    (folder / "unit_a.cu").write_text(UNIT_A)
    (folder / "unit_b.cu").write_text(UNIT_B)
    jobs = {"nested.sm_90.cubin": ["-arch=sm_90", "-lineinfo", "nested.cu"],
            "nested.sm_120.cubin": ["-arch=sm_120", "-lineinfo", "nested.cu"],
            "nested.sm_90.G.cubin": ["-arch=sm_90", "-G", "nested.cu"],
            "unit_a.cubin": ["-arch=sm_90", "-lineinfo", "-rdc=true", "unit_a.cu"],
            "unit_b.cubin": ["-arch=sm_90", "-lineinfo", "-rdc=true", "unit_b.cu"]}
    if cub:
        (folder / "cub.cu").write_text(CUB)
        jobs["cub.sm_90.cubin"] = ["-arch=sm_90", "-lineinfo", "cub.cu"]
    for name, flags in jobs.items():
        subprocess.run([compiler, "-cubin", "-o", name, *flags], cwd=folder, check=True,
                       capture_output=True)
    linker = Path(compiler).resolve().parent / "nvlink"
    subprocess.run([str(linker), "-arch=sm_90", "unit_a.cubin", "unit_b.cubin", "-o",
                    "linked.sm_90.cubin"], cwd=folder, check=True, capture_output=True)
    return sorted(folder / name for name in [*jobs, "linked.sm_90.cubin"]
                  if not name.startswith("unit_"))


def nvdisasm_chains(data: bytes) -> dict[tuple[str, int], tuple[tuple[str, int], ...]]:
    """(section, offset) -> the inline chain nvdisasm -gi shows at every instruction of every
    function section, innermost first (crashlab.sass.listing.parse_listing)."""
    tool, why = find_nvdisasm()
    assert tool, why
    chains = {}
    elf = ELFFile(io.BytesIO(data))
    with tempfile.TemporaryDirectory(prefix="crashlab-judge-") as scratch:
        path = Path(scratch, "judged.cubin")
        path.write_bytes(data)
        for section in elf.iter_sections():
            if not (section["sh_flags"] & SHF_EXECINSTR and section["sh_size"]):
                continue
            function = str(section["sh_info"] & 0xFFFFFF)
            done = subprocess.run([tool, "-c", "-gi", "-ndf", "-fun", function, str(path)],
                                  capture_output=True, text=True, check=True)
            for ins in parse_listing(done.stdout):
                chains[section.name, ins.address] = tuple((s.file, s.line) for s in ins.source)
    return chains


@dataclass
class Agreement:
    instructions: int = 0
    with_lines: int = 0
    chains: int = 0
    outermost: int = 0
    first_difference: str = ""

    def add(self, other: Agreement) -> Agreement:
        return Agreement(self.instructions + other.instructions, self.with_lines + other.with_lines,
                         self.chains + other.chains, self.outermost + other.outermost,
                         self.first_difference or other.first_difference)

    def __str__(self):
        return (f"{self.instructions} instructions ({self.with_lines} with a line): chain "
                f"{self.chains}/{self.instructions}, outermost line {self.outermost}/{self.instructions}")


def agreement(data: bytes, judged: bytes | None = None) -> Agreement:
    """The reader on ``data`` against nvdisasm on ``judged`` (default: the same cubin)."""
    table = Cubin(data).line_table
    result = Agreement()
    for (section, offset), theirs in nvdisasm_chains(judged or data).items():
        ours = tuple((s.file, s.line) for s in table.chain(section, offset)) if table else ()
        result.instructions += 1
        result.with_lines += bool(theirs)
        result.chains += ours == theirs
        result.outermost += ours[-1:] == theirs[-1:]
        if ours != theirs and not result.first_difference:
            result.first_difference = f"{section}+{offset:#x}: nvdisasm {theirs}, reader {ours}"
    return result


def apply_line_relocations(cubin: bytes) -> bytes:
    """``cubin`` (relocated, symbols absolute) with its .rela.debug_line applied, as a driver may
    apply it: each R_CUDA_64 target gets the symbol's value plus the addend (sm_80 cubins have a
    .rel.debug_line instead, whose addends are the bytes at the target)."""
    image = bytearray(cubin)
    elf = ELFFile(io.BytesIO(cubin))
    table = elf.get_section_by_name(".debug_line")
    symbols = elf.get_section_by_name(".symtab")
    relocations = elf.get_section_by_name(".rela.debug_line") or elf.get_section_by_name(".rel.debug_line")
    for relocation in relocations.iter_relocations():
        at = table["sh_offset"] + relocation["r_offset"]
        addend = relocation["r_addend"] if relocation.is_RELA() else struct.unpack_from("<Q", image, at)[0]
        value = symbols.get_symbol(relocation["r_info_sym"])["st_value"] + addend
        struct.pack_into("<Q", image, at, value)
    return bytes(image)
