"""crashlab doctor's wall time on this machine, and what its ABI check costs on a real torch.

Prints the median and best of N runs of every check (environment capture included) for
crashlab's own Python and, where given, for another interpreter (--python, e.g. a venv with a
real torch); then the torch-abi lookups on that torch's libraries: through their hash tables
(what doctor does) against one walk of every dynamic symbol (what `nm -D` does).

    python benchmarks/bench_doctor.py [--python PATH] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from elftools.elf.elffile import ELFFile

from crashlab.env.checks import builds
from crashlab.env.doctor import machine_for, run_checks
from crashlab.env.elfsyms import missing_from, undefined_torch_symbols


def timed(action, runs: int) -> tuple[float, float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), min(seconds)


def every_defined_symbol(libraries: list[Path]) -> set[str]:
    names = set()
    for library in libraries:
        with open(library, "rb") as handle:
            for symbol in ELFFile(handle).get_section_by_name(".dynsym").iter_symbols():
                if symbol["st_shndx"] != "SHN_UNDEF":
                    names.add(symbol.name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for python in (None, args.python) if args.python else (None,):
        median, best = timed(lambda python=python: run_checks(machine_for(Path("crashlab-runs"),
                                                                          python, None)),
                             args.runs)
        print(f"doctor, {python or 'crashlab own Python'}: median {median * 1000:.0f} ms, "
              f"best {best * 1000:.0f} ms ({args.runs} runs)")
    if not args.python:
        return
    machine = machine_for(Path("crashlab-runs"), args.python, None)
    lib = machine.first_dir("torch", "lib")
    libraries = sorted({*lib.glob("libtorch*.so*"), *lib.glob("libc10*.so*")})
    extensions = [so for module, _ in builds.EXTENSIONS
                  for so in builds.extension_files(machine, module)]
    needed = sorted({name for so in extensions for name in undefined_torch_symbols(so)})
    size = sum(library.stat().st_size for library in libraries) / (1 << 20)
    print(f"torch-abi: {len(extensions)} extension files needing {len(needed)} torch symbols; "
          f"{len(libraries)} torch libraries, {size:,.0f} MiB")
    median, best = timed(lambda: missing_from(libraries, needed), args.runs)
    print(f"  hash-table lookups (doctor): median {median * 1000:.0f} ms, best {best * 1000:.0f} ms")
    median, _ = timed(lambda: every_defined_symbol(libraries), 1)
    print(f"  walk of every dynamic symbol (as nm -D): {median:.1f} s (1 run)")


if __name__ == "__main__":
    main()
