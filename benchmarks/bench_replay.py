"""Start-time fidelity and throughput of ``crashlab replay``, and of SGLang's own replay script.

    python benchmarks/bench_replay.py [--seconds 2] [--rates 200,1000,5000]
                                      [--sglang-script PATH/replay_request_dump.py]

For each rate R, a SYNTHETIC dump (fixtures/sglang_dumps/make_dumps.py synthetic) holds R x
--seconds requests recorded at R requests/s; it is replayed at its recorded times against the
test stand-in SGLang server (tests/sglang_server.py: answers at once, records each arrival),
started afresh for each run. Figures, in milliseconds:

  send lag     |actual - scheduled| send time as crashlab's sender measures it (not available
               for SGLang's script, which reports no send times);
  arrival lag  |arrival - scheduled| at the server, with the schedule anchored at the median
               of (arrival - recorded offset) (the same measure for both tools);
  late         the replay result's own schedule figures (attempt.schedule: sent - scheduled,
               p50 / p99 / max) and whether the schedule was kept at the default 50 ms p99.

The figures docs/benchmarks.md quotes for lateness: ``--seconds 4 --rates 500`` (2,000 requests
recorded at 500/s, as ``make_dumps.py synthetic --count 2000 --rate 500``).

"unthrottled" sends 2,000 requests as fast as each tool can (crashlab: --concurrency 512;
SGLang's script: --parallel 512 --speed 1e9) and reports requests/s between the server's first
and last arrival. The stand-in server shares the 2 cores with the sender, so at high rates it is
part of what is measured.

SGLang's scripts/playground/replay_request_dump.py is not in the sglang wheel; pass a checkout's
copy with --sglang-script. It needs sglang importable (plain pickle.load of GenerateReqInput;
set_ulimit and get_exception_traceback): here it runs unmodified on the stand-in package
tests/standin (sglang itself needs torch and CUDA).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.replay_support import MAKE_DUMPS, STANDIN, free_port, wait_healthy  # noqa: E402

UNTHROTTLED = 2000


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]  # noqa: E731
    return pick(0.5) * 1000, pick(0.99) * 1000


class Server:
    def __init__(self, work: Path):
        self.port = free_port()
        self.record = work / f"arrivals-{self.port}.jsonl"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.sglang_server", "--port", str(self.port),
             "--record", str(self.record)], cwd=ROOT, stdout=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_healthy(self.url)

    def arrivals(self) -> list[tuple[float, int]]:
        """(arrival time, request number) of each /generate, number from input_ids[0] - 1000."""
        entries = [json.loads(line) for line in self.record.read_text().splitlines()]
        return sorted((e["t"], e["body"]["input_ids"][0] - 1000) for e in entries)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def _arrival_lag(arrivals, rate: float) -> tuple[float, float]:
    """|arrival - scheduled| with the schedule anchored at the median of arrival - offset (the
    server's clock and the sender's start are unknown to each other; anchoring at the first
    arrival would charge its connection set-up to every other request)."""
    skews = sorted(t - number / rate for t, number in arrivals)
    anchor = skews[len(skews) // 2]
    return _percentiles([abs(skew - anchor) for skew in skews])


def _dump(work: Path, count: int, rate: float) -> Path:
    out = work / f"dump-{count}-{rate:g}.pkl"
    if not out.exists():
        subprocess.run([sys.executable, str(MAKE_DUMPS), "synthetic", "--count", str(count),
                        "--rate", str(rate), "--max-new-tokens", "4", "--out", str(out)],
                       check=True, capture_output=True, cwd=ROOT)
    return out


def run_crashlab(dump: Path, server: Server, *options: str) -> dict:
    result = subprocess.run([sys.executable, "-m", "crashlab", "replay", str(dump), "--url",
                             server.url, "--json", "--settle", "0", "--health-interval", "5",
                             *options], capture_output=True, cwd=ROOT)
    if result.returncode not in (0, 1):
        raise SystemExit(f"crashlab replay failed: {result.stderr.decode()}")
    return json.loads(result.stdout)


def run_sglang(script: Path, dump: Path, server: Server, *options: str) -> None:
    environment = {**os.environ, "PYTHONPATH": str(STANDIN), "SGLANG_STANDIN_VERSION": "0.5.23"}
    subprocess.run([sys.executable, str(script), "--input-file", str(dump), "--host", "127.0.0.1",
                    "--port", str(server.port), *options], env=environment, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)


def fidelity(work: Path, rate: float, seconds: float, script: Path | None) -> None:
    count = int(rate * seconds)
    dump = _dump(work, count, rate)
    server = Server(work)
    try:
        data = run_crashlab(dump, server)
        sent = [o for o in data["attempts"][0]["requests"] if o["sent_s"] is not None]
        send = _percentiles([abs(o["sent_s"] - o["scheduled_s"]) for o in sent])
        arrival = _arrival_lag(server.arrivals(), rate)
        print(f"{rate:>6g}/s {count:>6} req  crashlab   send lag p50 {send[0]:7.2f} p99 {send[1]:8.2f}"
              f"  arrival lag p50 {arrival[0]:7.2f} p99 {arrival[1]:8.2f}  ({len(sent)} sent)")
        schedule = data["attempts"][0]["schedule"]
        print(f"{'':>22} late p50 {schedule['late_p50_s'] * 1000:7.2f} p99 "
              f"{schedule['late_p99_s'] * 1000:8.2f} max {schedule['late_max_s'] * 1000:8.2f}  "
              f"schedule kept: {schedule['kept']}")
    finally:
        server.stop()
    if script is None:
        return
    server = Server(work)
    try:
        run_sglang(script, dump, server)
        arrivals = server.arrivals()
        arrival = _arrival_lag(arrivals, rate)
        print(f"{rate:>6g}/s {count:>6} req  sglang     send lag     n/a          "
              f"  arrival lag p50 {arrival[0]:7.2f} p99 {arrival[1]:8.2f}  ({len(arrivals)} sent)")
    finally:
        server.stop()


def throughput(work: Path, script: Path | None) -> None:
    dump = _dump(work, UNTHROTTLED, 1000.0)
    runs = [("crashlab", lambda server: run_crashlab(dump, server, "--concurrency", "512"))]
    if script is not None:
        runs.append(("sglang", lambda server: run_sglang(script, dump, server, "--parallel", "512",
                                                         "--speed", "1e9")))
    for name, run in runs:
        server = Server(work)
        try:
            started = time.monotonic()
            run(server)
            wall = time.monotonic() - started
            arrivals = server.arrivals()
            span = arrivals[-1][0] - arrivals[0][0]
            print(f"unthrottled {name:<9} {len(arrivals)} requests: {len(arrivals) / span:7.0f} req/s "
                  f"between first and last arrival; {wall:.2f} s for the whole process")
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="recorded length of each dump")
    parser.add_argument("--rates", default="200,1000,5000")
    parser.add_argument("--sglang-script", type=Path,
                        help="scripts/playground/replay_request_dump.py from an SGLang checkout")
    args = parser.parse_args()
    script = args.sglang_script
    if script is None:
        print("SGLang's replay_request_dump.py: not given (--sglang-script), its figures skipped")
    elif not script.is_file():
        raise SystemExit(f"{script}: no such file")
    with tempfile.TemporaryDirectory(prefix="crashlab-bench-replay-") as folder:
        work = Path(folder)
        for rate in (float(part) for part in args.rates.split(",")):
            fidelity(work, rate, args.seconds, script)
        throughput(work, script)


if __name__ == "__main__":
    main()
