"""Wall time and peak RSS of ``crashlab inspect --json`` on SYNTHETIC dumps from small to huge.

    python benchmarks/bench_inspect.py [--only NAME] [--keep DIR] [--pyelftools]

Dumps are built by tests/coredump_builder.py (cached in --keep, default $TMPDIR/crashlab-bench).
The largest is 8 devices x 132 SMs x 64 warps x 32 lanes, each lane with its register section
(2.25 million sections), plus 4 GiB of global memory written as holes (sparse); --stress adds
one where every lane also has predicate, local-memory and backtrace sections (8.9 million). Two dumps that differ only in their memory sections (0 vs 16 GiB)
show that the time does not depend on the bytes of memory. ``--pyelftools`` also times
pyelftools walking the section headers, the approach crashlab's reader does not take.

The dumps are shaped as a driver writes them, so NVIDIA's cuda-gdb 12.4 opens them too (checked on
h100-full; tests/test_real_cuda_gdb.py checks a small dump of the same shape on every run), and
a benchmark against cuda-gdb can use ``grid_spec`` and ``SIZES`` from here.

Each run is a fresh process; peak RSS comes from os.wait4 on that process alone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import scenarios  # noqa: E402
from tests.coredump_builder import (  # noqa: E402
    CTA,
    SM,
    Context,
    Device,
    Grid,
    Lane,
    Module,
    Spec,
    Warp,
    load_cubin,
    markers,
    relocate,
    write,
)

GIB = 1 << 30
REGISTERS = list(range(255))
PREDICATES = [0, 1, 0, 0, 0, 0, 0]


def grid_spec(devices: int, sms: int, warps: int, lanes: int, *, extras: bool, memory: int) -> Spec:
    """Every SM full of one kernel's warps; one lane of the last device faults."""
    marker = markers()["illegal_address.sm_90.cubin:illegal-address"]
    out = []
    for dev in range(devices):
        code = relocate(load_cubin(marker.cubin), scenarios.CODE_BASE + dev * 0x1000_0000)
        entry = code.addresses[marker.text_section]
        grid = Grid(1, marker.text_section[6:], entry, 0xAB00 + dev, grid_dim=(sms * 16, 1, 1),
                    block_dim=(128, 1, 1))
        device = Device(dev_id=dev, num_sms=sms, contexts=[Context(0x100 + dev, [Module(0xAB00 + dev, code.data)])],
                        grids=[grid])
        for sm_id in range(sms):
            ctas = []
            for block in range(warps // 4):
                cta_warps = []
                for w in range(4):
                    cta_lanes = [
                        Lane(ln, (w * 32 + ln, 0, 0), pc=entry + 0x40, registers=REGISTERS,
                             predicates=PREDICATES if extras else None,
                             local_memory=16 if extras else 0,
                             backtrace=[(0x40, entry + 0x40)] if extras else [])
                        for ln in range(lanes)
                    ]
                    cta_warps.append(Warp(block * 4 + w, cta_lanes,
                                          uniform_registers=[1, 2] if extras else None,
                                          uniform_predicates=[1] if extras else None))
                ctas.append(CTA(1, (sm_id * 16 + block, 0, 0), cta_warps))
            device.sms.append(SM(sm_id, ctas))
        out.append(device)
    victim = out[-1].sms[-1].ctas[-1].warps[-1]
    victim.error_pc = victim.lanes[0].pc = out[-1].grids[0].function_entry + marker.offset
    victim.lanes[0].exception = scenarios.WARP_ILLEGAL_ADDRESS
    chunk = 512 << 20
    regions = [(0x7F00_0000_0000 + i * chunk, chunk) for i in range(memory // chunk)]
    return Spec(out, global_memory=regions)


SIZES = {
    "small": dict(devices=1, sms=4, warps=8, lanes=32, extras=False, memory=0),
    "h100-full": dict(devices=1, sms=132, warps=64, lanes=32, extras=False, memory=0),
    "h100-full+16GiB": dict(devices=1, sms=132, warps=64, lanes=32, extras=False, memory=16 * GIB),
    "2xh100": dict(devices=2, sms=132, warps=64, lanes=32, extras=False, memory=0),
    "8xh100+4GiB": dict(devices=8, sms=132, warps=64, lanes=32, extras=False, memory=4 * GIB),
}
#: --stress: every per-lane and per-warp section type (regs, predicates, local memory,
#: backtrace, uniform registers and predicates) on 8 full H100s: about 8.9 million sections.
STRESS = {"8xh100-every-section+4GiB": dict(devices=8, sms=132, warps=64, lanes=32, extras=True,
                                            memory=4 * GIB)}


def measure(command: list[str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in MiB, exit code) of one fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss // 1024, process.returncode


PYELFTOOLS_WALK = (
    "import sys, collections\n"
    "from elftools.elf.elffile import ELFFile\n"
    "f = open(sys.argv[1], 'rb'); elf = ELFFile(f)\n"
    "print(collections.Counter(s['sh_type'] for s in elf.iter_sections()).most_common(1))\n"
)


def main() -> None:
    if sys.argv[1:2] == ["--build"]:
        _, _, name, path = sys.argv
        write(grid_spec(**{**SIZES, **STRESS}[name]), path)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted({**SIZES, **STRESS}))
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "crashlab-bench")
    parser.add_argument("--pyelftools", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stress", action="store_true", help="also the 8.9-million-section dump")
    args = parser.parse_args()
    sizes = {**SIZES, **(STRESS if args.stress else {})}
    args.keep.mkdir(parents=True, exist_ok=True)
    print(f"{'dump':<28} {'sections':>10} {'on disk':>9} {'apparent':>9} "
          f"{'build s':>8} {'inspect s best/median':>22} {'peak RSS MiB':>13}")
    for name in sizes:
        if args.only and name != args.only:
            continue
        path = args.keep / f"{name}.nvcudmp"
        built_in = 0.0
        if not path.exists():
            # Built in a child process: a parent holding the multi-GB description would make
            # every later child's peak RSS count the pages it inherited at fork.
            start = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--build", name, str(path)], check=True)
            built_in = time.perf_counter() - start
        runs = [measure([sys.executable, "-m", "crashlab", "inspect", "--json", str(path)])
                for _ in range(args.repeat)]
        codes = {code for _, _, code in runs}
        assert codes == {0}, f"crashlab exited {codes} on {path}"
        best = min(runs)
        median = sorted(runs)[len(runs) // 2]
        from crashlab.coredump.elf import ElfImage

        with ElfImage(path) as image:
            count = image.section_count
        stat = path.stat()
        print(f"{name:<28} {count:>10,} {stat.st_blocks * 512 / 2**20:>7.0f}Mi "
              f"{stat.st_size / 2**30:>7.2f}Gi {built_in:>8.1f} {best[0]:>14.2f} / {median[0]:<5.2f} "
              f"{max(r[1] for r in runs):>13}")
        if args.pyelftools:
            elapsed, rss, code = measure([sys.executable, "-c", PYELFTOOLS_WALK, str(path)])
            print(f"  pyelftools iter_sections over the same file: {elapsed:.2f} s, {rss} MiB"
                  f" (exit {code})")


if __name__ == "__main__":
    main()
