"""Load speed and peak memory of `crashlab replay --json` and `--list` on large crash dumps.

    python benchmarks/bench_load.py                        # 5,000 and 28,000 x 2,000 tokens
    python benchmarks/bench_load.py --dump crash_dump.pkl  # any dump (a real one: see below)
    python benchmarks/bench_load.py --only 5000x2000/32000 --where  # and where the memory goes

Each figure is one fresh process (`python -m crashlab ...`), best of --repeat, timed from start
to exit (the API row: from before `import crashlab.replay` to the end of `load`, as the process
measures it); CPU is the child's user and system time, start-up included (on a machine shared
with other work it moves less than the wall time); peak RSS is the child's ru_maxrss. The yardstick is ``pickle.load`` of
the same bytes in a fresh process, with every class the dump names mapped to a do-nothing class
(the stdlib loader would need sglang installed, and would run it): it is timed the same way.

Without --dump, the dumps are SYNTHETIC: SGLang 0.5.23 layout built with the stand-in classes
of tests/standin (tests/standin/README), N finished requests of T input ids drawn over a
vocabulary of V ids (128,256 as Llama 3's: BININT1/BININT2/BININT mixed; 32,000 as Llama 2's or
Mistral's: BININT1/BININT2 only, 3 bytes a token), a 400-character output text with 100 output
ids, streamed every tenth request, the last 32 in flight. Real dumps of that size come from
fixtures/sglang_dumps/make_real_dumps.py --scale (needs its environments).

--where prints, for the same dump in a fresh process, the peak RSS once the command's modules are
imported and where the memory of a load goes: the allocation sites tracemalloc finds holding the
most at the end of ``crashlab.replay.load`` (what a listing holds while it prints).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_YARDSTICK = """
import pickle, sys
class Anything:
    def __init__(self, *args, **kwargs): pass
    def __setstate__(self, state): pass
class Loader(pickle.Unpickler):
    def find_class(self, module, name):
        return Anything
with open(sys.argv[1], "rb") as file:
    Loader(file).load()
"""


#: The synthetic cases: (requests, input ids each, vocabulary).
CASES = ((5000, 2000, 128_256), (5000, 2000, 32_000), (28000, 2000, 128_256))


def build(requests: int, tokens: int, path: Path, vocabulary: int = 128_256) -> None:
    os.environ["SGLANG_STANDIN_VERSION"] = "0.5.23"
    sys.path.insert(0, str(ROOT / "tests" / "standin"))
    import pickle

    from sglang.srt.managers.io_struct import GenerateReqInput

    rng = random.Random(0)
    records = []
    for index in range(requests):
        ids = [rng.randrange(vocabulary) for _ in range(tokens)]
        request = GenerateReqInput(rid=f"req-{index:06d}", input_ids=ids, stream=index % 10 == 0,
                                   sampling_params={"temperature": 0, "max_new_tokens": 100})
        request.normalize()
        created = 1780315200.0 + index * 0.06
        output_ids = [rng.randrange(vocabulary) for _ in range(100)]
        in_flight = index >= requests - 32
        meta = {"id": request.rid, "finish_reason": None if in_flight else {"type": "length"},
                "prompt_tokens": tokens, "completion_tokens": 100, "cached_tokens": 0}
        if not in_flight:
            request.input_ids = tuple(ids)  # 0.5.23 keeps finished prompts as tuples
        records.append((request, {"text": "x" * 400, "output_ids": output_ids, "meta_info": meta},
                        created, created + 1.5))
    with open(path, "wb") as out:
        pickle.dump({"server_args": None, "config_updates": [], "resolved_config": None,
                     "requests": records, "launch_command": "python -m sglang.launch_server"}, out)


_WHERE = """
import resource, sys, tracemalloc
import crashlab.cli.replay, crashlab.replay.command  # what `crashlab replay --json` imports
print(f"  imported: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
tracemalloc.start()
dump = crashlab.replay.load(sys.argv[1])
held, peak = tracemalloc.get_traced_memory()
print(f"  load: {held / 2**20:.1f} MiB held at the end, {peak / 2**20:.1f} MiB at most (tracemalloc)")
for stat in tracemalloc.take_snapshot().statistics("lineno")[:8]:
    frame = stat.traceback[0]
    where = frame.filename.split("site-packages/")[-1].split("crashlab/", 1)[-1]
    print(f"    {stat.size / 2**20:6.1f} MiB in {stat.count:7,} blocks  {where}:{frame.lineno}")
"""

_API = """
import sys, time
started = time.perf_counter()
import crashlab.replay
crashlab.replay.load(sys.argv[1])
print(time.perf_counter() - started)
"""


def timed(command: list[str], repeat: int, own_clock: bool = False) -> tuple[float, float, float]:
    """(best seconds, best CPU seconds, peak RSS MiB) of ``command`` run ``repeat`` times in fresh
    processes: wall time from start to exit, or with ``own_clock`` the seconds the command prints
    itself; CPU time (user and system) of the whole process, start-up included, which a machine
    shared with other work disturbs less than the wall time."""
    best, best_cpu, peak = float("inf"), float("inf"), 0.0
    for _ in range(repeat):
        with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
            started = time.perf_counter()
            child = subprocess.Popen(command, stdout=out if own_clock else subprocess.DEVNULL,
                                     stderr=err)
            _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not all children's
            elapsed = time.perf_counter() - started
            if own_clock:
                out.seek(0)
                elapsed = float(out.read().split()[-1])
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                err.seek(0)
                raise SystemExit(f"{command} failed: {err.read().decode()[-500:]}")
        best = min(best, elapsed)
        best_cpu = min(best_cpu, usage.ru_utime + usage.ru_stime)
        peak = max(peak, usage.ru_maxrss / 1024)
    return best, best_cpu, peak


def measure(path: Path, repeat: int) -> None:
    size = path.stat().st_size / 1e6
    python = sys.executable
    rows = [("pickle.load (yardstick)", [python, "-c", _YARDSTICK, str(path)]),
            ("crashlab.replay.load (API)", [python, "-c", _API, str(path)]),
            ("crashlab replay --json", [python, "-m", "crashlab", "replay", str(path), "--json"]),
            ("crashlab replay --list", [python, "-m", "crashlab", "replay", str(path), "--list"])]
    print(f"{path.name}: {size:.1f} MB")
    yardstick = None
    for label, command in rows:
        seconds, cpu, rss = timed(command, repeat, own_clock="(API)" in label)
        yardstick = yardstick or seconds
        print(f"  {label:26s} {seconds:6.2f} s  {size / seconds:6.1f} MB/s  "
              f"{seconds / yardstick:4.2f}x pickle.load  CPU {cpu:5.2f} s ({size / cpu:5.1f} MB/s)  "
              f"peak RSS {rss:7.0f} MiB ({rss * 1.048576 / size:4.1f}x the file)")


def where(path: Path) -> None:
    """Where a load's memory goes, in a fresh process (_WHERE)."""
    subprocess.run([sys.executable, "-c", _WHERE, str(path)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, action="append", help="measure this dump instead")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", action="append", metavar="NxT/V",
                        help="only this synthetic case, e.g. 5000x2000/32000 (repeatable)")
    parser.add_argument("--where", action="store_true",
                        help="also print where the memory of a load goes")
    parser.add_argument("--build", nargs=4, metavar=("REQUESTS", "TOKENS", "VOCABULARY", "OUT"),
                        help=argparse.SUPPRESS)  # internal: the dump is built in its own process
    args = parser.parse_args()
    if args.build:
        build(int(args.build[0]), int(args.build[1]), Path(args.build[3]), int(args.build[2]))
        return
    if args.dump:
        for path in args.dump:
            measure(path, args.repeat)
            if args.where:
                where(path)
        return
    cases = [case for case in CASES if not args.only or f"{case[0]}x{case[1]}/{case[2]}" in args.only]
    with tempfile.TemporaryDirectory() as folder:
        for requests, tokens, vocabulary in cases:
            path = Path(folder) / f"synthetic_{requests}x{tokens}_vocabulary{vocabulary}.pkl"
            # Built in a child: a child forked from a big parent would report the parent's pages.
            subprocess.run([sys.executable, __file__, "--build", str(requests), str(tokens),
                            str(vocabulary), str(path)], check=True)
            measure(path, args.repeat)
            if args.where:
                where(path)
            path.unlink()


if __name__ == "__main__":
    main()
