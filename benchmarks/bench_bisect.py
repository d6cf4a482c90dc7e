"""Steps and wall time ``crashlab bisect`` takes over N commits, and the confidence it reached.

    python benchmarks/bench_bisect.py [--sizes 8,32,128] [--flaky] [--releases 8]

Each case is a SYNTHETIC history (tests/bisect_history.py): N commits after a good one, the crash
brought by the commit at 2/3 of the way, around the stand-in SGLang server; each run a real
server under crashlab serve and a real replay of a 3-request synthetic dump, with bisect's
defaults for the statistics (--repeat 4, --confidence 0.95, --max-runs 30): a crash in all 4
runs on --bad bounds its rate at 0.47, so a good verdict takes 5 clean runs. --flaky makes every
commit from the crash on crash on every other start (2/4 on --bad: a rate bounded at 0.10, so a
good verdict takes 30 clean runs). Printed per case: steps, server starts, log2(N) for
reference, the wall time, the confidence a good step reached, and whether the planted commit
was found.

--releases N bisects N SYNTHETIC releases instead (tests/release_wheels.py: wheels of the same
stand-in, installed by pip into environments bisect keeps), twice: the first bisect makes each
environment it needs, the second reuses them. Printed: steps, seconds of install per release
made, and the wall time of each bisect.
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

from tests.bisect_history import CRASH, FAST, commit, git, launch  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.release_wheels import install_template, wheel  # noqa: E402
from tests.replay_support import synthetic  # noqa: E402


def case(size: int, flaky: bool, folder: Path) -> dict:
    repo = folder / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    good = commit(repo, "app: serve")
    planted_at = max(1, (2 * size) // 3)
    planted = ""
    for number in range(1, size + 1):
        crashes = number >= planted_at
        made = commit(repo, f"change {number}", crash=CRASH if crashes else None,
                      flaky=flaky and crashes, touch=f"file{number}")
        planted = made if number == planted_at else planted
    port = free_port()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "crashlab", "bisect", "--good", good, "--bad", "main", "--repo",
         str(repo), "--dump", str(synthetic(folder, 3)), "--url", f"http://127.0.0.1:{port}",
         "--out", str(folder / "out"), "--json", *FAST, "--max-runs", "30", "--",
         *launch(repo, port, folder / "starts")], capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - started
    result = json.loads(done.stdout)
    reached = [step["confidence"] for step in result["steps"] if step["verdict"] == "good"]
    return {"commits": size, "flaky": flaky, "steps": len(result["steps"]),
            "server starts": sum(len(step["runs"]) for step in result["steps"]),
            "log2(N)": round(math.log2(size), 1), "wall s": round(wall, 1),
            "bad rate": result["bad_rate"], "runs for good": result["runs_for_good"],
            "confidence reached": min(reached) if reached else None,
            "found planted": (result["first_bad"] or {}).get("hash") == planted}


def releases_case(count: int, folder: Path) -> dict:
    wheels = folder / "wheels"
    wheels.mkdir()
    versions = [f"1.{number}" for number in range(count + 1)]
    planted_at = max(1, (2 * count) // 3)
    for number, version in enumerate(versions):
        wheel(wheels, version, CRASH if number >= planted_at else None)
    dump = synthetic(folder, 3)
    figures: dict = {"releases": count}
    for attempt in ("made", "reused"):
        port = free_port()
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "crashlab", "bisect", "--versions", ",".join(versions),
             "--install", install_template(wheels), "--base-python", sys.executable,
             "--releases-dir", str(folder / "releases"), "--dump", str(dump), "--url",
             f"http://127.0.0.1:{port}", "--out", str(folder / f"out-{attempt}"), "--json",
             "--repeat", "1", *FAST, "--", "{python}", "-m", "standin_app", "--port", str(port),
             "--starts", str(folder / "starts")], capture_output=True, text=True, cwd=ROOT)
        result = json.loads(done.stdout)
        installs = [step["build_s"] for step in result["steps"] if not step["revision"]["reused"]]
        figures[attempt] = {"steps": len(result["steps"]), "wall s": round(time.monotonic() - started, 1),
                            "environments made": len(installs),
                            "install s each": round(sum(installs) / len(installs), 2) if installs else None,
                            "found planted": (result["first_bad"] or {}).get("version") == versions[planted_at]}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,32,128")
    parser.add_argument("--flaky", action="store_true")
    parser.add_argument("--releases", type=int)
    options = parser.parse_args()
    if options.releases:
        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(releases_case(options.releases, Path(folder))))
        return
    for size in map(int, options.sizes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(case(size, options.flaky, Path(folder))))


if __name__ == "__main__":
    main()
