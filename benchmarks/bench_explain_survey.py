"""The explainer's survey of the production cubins (fixtures/cubins/production, every arch): memory
instructions, how many address operands decode, how many are in a descriptor (TMA, tensor memory),
how many backward slices of the address reach their roots with no stop, and why the others stop.
No dump is involved: the slice is structural (values need a dump).

    python benchmarks/bench_explain_survey.py [--markdown] [--timing]

--timing adds, on the bundled MoE fixture, in this process (median of 5): inspect with an empty
SASS cache (one nvdisasm run), with a warm one (none), and the same without the explanation.

docs/benchmarks.md's table comes from --markdown; tests/test_explain_survey.py holds the counts as floors.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.api import inspect  # noqa: E402
from crashlab.explain.survey import survey  # noqa: E402

PRODUCTION = ROOT / "fixtures" / "cubins" / "production"
EXAMPLE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"


def _median(run, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timing() -> None:
    """inspect's time with an empty and a warm SASS cache, and what the explanation adds per
    fault (inspect warm, minus inspect warm with explain=False), on the MoE fixture and on a
    SYNTHETIC dump faulting at the first global access of the largest production kernel."""
    from tests.test_production_cubins import fault_dump, site

    with tempfile.TemporaryDirectory() as folder:
        largest = max(PRODUCTION.glob("*.cubin"), key=lambda p: p.stat().st_size).name
        production = Path(folder) / "production.nvcudmp"
        fault_dump(largest, site(largest, "kernel"), production)
        for name, dump in (("MoE fixture", EXAMPLE), (largest, production)):
            def cold(dump=dump):
                os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(dir=folder)
                inspect(dump)
            cold()  # imports and nvdisasm's --version query out of the figures
            empty = _median(cold)
            os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(dir=folder)
            inspect(dump)
            warm = _median(lambda dump=dump: inspect(dump))
            bare = _median(lambda dump=dump: inspect(dump, explain=False))
            print(f"{name}: inspect {empty:.3f} s with an empty SASS cache, {warm:.3f} s warm; "
                  f"the explanation adds {1000 * (warm - bare):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--markdown", action="store_true", help="print docs/benchmarks.md's table")
    parser.add_argument("--timing", action="store_true", help="also time inspect on the fixture")
    args = parser.parse_args()
    if args.timing:
        timing()
    rows = []
    for path in sorted(PRODUCTION.glob("*.cubin")):
        found = survey(path.name, path.read_bytes())
        if isinstance(found, str):
            sys.exit(f"{path.name}: {found}")
        rows.append(found)
    if args.markdown:
        print("| cubin | memory instructions | lane addresses decoded | constant-bank loads "
              "| in a descriptor (TMA, tensor memory) | not read | slices reaching roots |")
        print("|---|---:|---:|---:|---:|---:|---:|")
    for s in rows:
        if args.markdown:
            print(f"| `{s.cubin}` | {s.memory_instructions} | {s.decoded} | {s.constant} | "
                  f"{s.descriptor} | {len(s.undecoded)} | {s.reached_roots} of {s.slices} |")
        else:
            print(f"{s.cubin}: {s.memory_instructions} memory instructions, {s.decoded} lane addresses "
                  f"decoded, {s.constant} constant-bank loads, {s.descriptor} in a descriptor, {len(s.undecoded)} not read; {s.slices} slices, "
                  f"{s.reached_roots} reach their roots")
            for reason, count in sorted(s.stops.items(), key=lambda kv: -kv[1])[:5]:
                print(f"    {count:5d}  {reason}")


if __name__ == "__main__":
    main()
