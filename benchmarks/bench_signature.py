"""What a crash signature costs: ``crashlab.signature.compute`` on the reports it is made from,
the name rules alone on the longest real kernel name at hand (compute caches a name's
normalised form, so only a fleet's first dump of a kernel pays them), and what importing the package
adds to a fresh process (``crashlab inspect`` computes one for every report).

    python benchmarks/bench_signature.py [--repeat 2000]

Inputs: the bundled SYNTHETIC MoE dump's TriageReport; the CUTLASS 3.x production kernel
(fixtures/cubins/production, an 8,234-character demangled name) faulted in a SYNTHETIC dump;
incidents scanned from the real SGLang 0.5.23 logs of fixtures/logs. Each figure is the median
(and best) of --repeat calls after one unmeasured call; the import is the median of 10 fresh
interpreters' -X importtime for the package's own modules.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import crashlab  # noqa: E402
from benchmarks.bench_env import timed  # noqa: E402
from crashlab.demangle import demangle  # noqa: E402
from crashlab.signature import compute  # noqa: E402
from crashlab.signature.names import _normalised  # noqa: E402
from tests.test_production_cubins import fault_dump, kernel_of, site  # noqa: E402
from tests.test_run_report_md import EXCEPTION_LOG, SEGV_LOG, scan  # noqa: E402
from tests.test_signature_logs import incident  # noqa: E402

CUTLASS = "cutlass_mxfp8_grouped_gemm.sm_100.cubin"


def figure(times: list[float]) -> str:
    return f"{statistics.median(times) * 1e6:9.1f} / {min(times) * 1e6:7.1f} µs"


def import_cost(runs: int = 10) -> float:
    """Median over fresh interpreters of the time Python's -X importtime gives crashlab.signature's
    own modules (the rest of crashlab.report.model's imports are paid without it too)."""
    def once() -> float:
        done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                               "import crashlab.report.model, crashlab.signature.signing"],
                              capture_output=True, text=True, check=True, cwd=ROOT)
        rows = [line.split("|") for line in done.stderr.splitlines() if "crashlab.signature" in line]
        return sum(int(row[0].split(":")[1]) for row in rows) / 1e6
    return statistics.median(once() for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    repeat = parser.parse_args().repeat
    moe = crashlab.inspect(ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp")
    with tempfile.TemporaryDirectory() as folder:
        dump = Path(folder) / "cutlass.nvcudmp"
        fault_dump(CUTLASS, site(CUTLASS, "kernel"), dump)
        cutlass = crashlab.inspect(dump)
    name = demangle(kernel_of(CUTLASS).symbol.name)
    exception = incident(scan(EXCEPTION_LOG.read_bytes()))
    segv = incident(scan(SEGV_LOG.read_bytes()))
    rows = [
        ("compute(TriageReport), MoE fixture", lambda: compute(moe)),
        ("compute(TriageReport), CUTLASS kernel", lambda: compute(cutlass)),
        (f"name rules on the CUTLASS name ({len(name):,} chars), uncached",
         lambda: _normalised.__wrapped__(name)),
        ("compute(Incident), scheduler exception log", lambda: compute(exception)),
        ("compute(Incident), detokenizer SIGSEGV log", lambda: compute(segv)),
    ]
    print(f"{'what':<52} {'median / best':>21}")
    for label, action in rows:
        print(f"{label:<52} {figure(timed(action, repeat)):>21}")
    print(f"importing crashlab.signature's modules: {import_cost() * 1000:.0f} ms")


if __name__ == "__main__":
    main()
