"""Trials ``crashlab replay --minimize`` needs, for N = 64, 256, 1024 requests, against the bounds.

    python benchmarks/bench_minimize.py [--sizes 64,256,1024]

Each case is a SYNTHETIC dump (make_dumps.py synthetic, request i starts with token 1000 + i)
and the stand-in server (tests/sglang_server.py) started by --restart-cmd, which SIGKILLs itself
once it has received the culprit request, or both requests of a culprit pair. Every trial is a
real server restart and replay (--max-rate 4000). Printed per case: trials used (the first one
confirms that the whole dump reproduces), the result, wall time, and two references:

  ddmin alone  the trials of the same ddmin over a Python predicate (no server), plus the
               confirming trial: the real runs must match it exactly, the oracle being exact;
  bound        one culprit: 1 + 2*log2(N) (at most two subset tests per halving);
               a pair: 1 + (N^2 + 3N)/2, ddmin's worst case (Zeller and Hildebrandt, 2002).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.replay.minimize import Budget, ddmin  # noqa: E402
from tests.replay_support import FAST_WATCH, free_port, server_command, synthetic  # noqa: E402


def simulated(count: int, culprits: list[int]) -> int:
    budget = Budget()
    found, _ = ddmin(list(range(count)), lambda subset: set(culprits) <= set(subset), budget)
    assert found == culprits
    return budget.used + 1


def bound(count: int, culprits: list[int]) -> int:
    if len(culprits) == 1:
        return 1 + 2 * math.ceil(math.log2(count))
    return 1 + (count * count + 3 * count) // 2


def run_case(work: Path, count: int, culprits: list[int]) -> None:
    dump = synthetic(work, count, "--rate", "4000", name=f"dump-{count}.pkl")
    port = free_port()
    command = server_command(port, "--die-on", ",".join(str(1000 + c) for c in culprits))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "crashlab", "replay", str(dump), "--url", f"http://127.0.0.1:{port}",
         "--minimize", "--restart-cmd", command, "--budget", "2000", "--max-rate", "4000",
         "--output", str(work / "min.pkl"), "--json", *FAST_WATCH],
        capture_output=True, cwd=ROOT)
    wall = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"minimisation failed: {result.stderr.decode()[-2000:]}")
    minimization = json.loads(result.stdout)["minimization"]
    found = minimization["minimal"]
    print(f"N={count:<5} culprits {str(culprits):<12} trials {minimization['trials']:>4}  "
          f"found {str(found):<12} {'ok' if found == culprits else 'WRONG'}  "
          f"ddmin alone {simulated(count, culprits):>4}  bound {bound(count, culprits):>7}  "
          f"{wall:6.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,1024")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crashlab-bench-minimize-") as folder:
        for count in (int(part) for part in args.sizes.split(",")):
            run_case(Path(folder), count, [count // 3])
            run_case(Path(folder), count, [count // 5, 4 * count // 5])


if __name__ == "__main__":
    main()
