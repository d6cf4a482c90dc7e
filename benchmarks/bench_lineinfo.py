"""What reading a cubin's line table natively costs (crashlab.cubin.lines), against nvdisasm -gi.

    python benchmarks/bench_lineinfo.py [--repeat 50]

Inputs: the largest fixture cubin with line info (fixtures/cubins), the bundled SYNTHETIC MoE dump
(the line table read from the dump's relocated cubin, then the faulting PC's chain), and, where
nvcc is installed, the cubins tests/line_tables.py builds, CUB's block sort, reduce and scan
among them (the largest line table made here). Figures: the median (and best) of --repeat
reads after one unmeasured read; the agreement with nvdisasm on every instruction; and for
comparison what one nvdisasm -gi run of the same cubin takes.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from elftools.elf.elffile import ELFFile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_env import timed  # noqa: E402
from crashlab.coredump.core import CoreDump  # noqa: E402
from crashlab.coredump.fault import locate  # noqa: E402
from crashlab.cubin import Cubin  # noqa: E402
from crashlab.sass.finder import CodeFinder  # noqa: E402
from crashlab.sass.listing import find_nvdisasm  # noqa: E402
from tests.coredump_builder import CUBINS  # noqa: E402
from tests.line_tables import FIXTURES_WITH_LINES, Agreement, agreement, build, nvcc  # noqa: E402

MOE_DUMP = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"


def figure(times: list[float]) -> str:
    return f"{statistics.median(times) * 1e3:8.2f} / {min(times) * 1e3:7.2f} ms"


def line_table_size(path: Path) -> int:
    return ELFFile(io.BytesIO(path.read_bytes())).get_section_by_name(".debug_line")["sh_size"]


def describe(path: Path) -> str:
    size = path.stat().st_size
    return f"{path.name} ({size / 1024:.0f} KiB, .debug_line {line_table_size(path) / 1024:.1f} KiB)"


def nvdisasm_once(path: Path) -> float:
    tool, why = find_nvdisasm()
    assert tool, why
    start = time.perf_counter()
    subprocess.run([tool, "-c", "-gi", str(path)], check=True, capture_output=True)
    return time.perf_counter() - start


def _line_table(data: bytes) -> None:
    """The cubin opened and its line table read, as inspect does once per faulting cubin."""
    Cubin(data).line_table  # noqa: B018


def dump_read() -> None:
    """What inspect adds without nvdisasm: the fault's cubin's table and the PC's chain."""
    with CoreDump(MOE_DUMP) as core:
        site = locate(core).faults[0].site
        finder = CodeFinder(core)
        location = finder.locate(site.pc, site.grid)
        assert finder.source_lines(location)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    repeat = parser.parse_args().repeat
    cubins = [CUBINS / name for name in FIXTURES_WITH_LINES]
    with tempfile.TemporaryDirectory() as folder:
        if nvcc():
            cubins += build(Path(folder), cub=True)
        else:
            print("no nvcc: only the fixture cubins")
        total = Agreement()
        for path in cubins:
            total = total.add(agreement(path.read_bytes()))
        print(f"agreement with nvdisasm -gi over {len(cubins)} cubins: {total}")
        largest_fixture = max((CUBINS / name for name in FIXTURES_WITH_LINES), key=line_table_size)
        largest = max(cubins, key=line_table_size)
        for path in dict.fromkeys([largest_fixture, largest]):
            data = path.read_bytes()
            table = Cubin(data).line_table
            rows = sum(len(s.rows) for sequences in table.sequences.values() for s in sequences)
            print(f"{describe(path)}: {rows} rows in {len(table.sections)} function sections")
            print(f"  open + line table     {figure(timed(partial(_line_table, data), repeat))}")
            print(f"  nvdisasm -gi, one run {statistics.median(nvdisasm_once(path) for _ in range(5)) * 1e3:8.2f} ms")
    print(f"{MOE_DUMP.name}: open, locate the fault, read its cubin's table, chain at the PC")
    print(f"  with the reader       {figure(timed(dump_read, repeat))}")


if __name__ == "__main__":
    main()
