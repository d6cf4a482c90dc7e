"""Wall time of ``crashlab env``: a fresh ``crashlab env --json`` process, and ``capture()`` alone
in this process, on this machine with three kinds of GPU tool:

- none: no nvidia-smi on PATH (a machine without the driver's tools);
- stand-in: tests/standin_tools/nvidia-smi, which answers the three questions (a Python script:
  each answer pays an interpreter start, where the real tool pays the driver's);
- hung: the same stand-in ignoring SIGTERM and never answering (nvidia-smi on a wedged GPU).

    python benchmarks/bench_env.py [--repeat 10] [--timeout 2] [--python PATH]

Each figure is the median (and best) of --repeat runs after one unmeasured run. PATH keeps this
machine's own tools (nvcc) after the stand-in's folder. ``--python`` also asks that interpreter
for its packages, as ``crashlab serve`` asks the server's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.env import capture  # noqa: E402
from crashlab.env.host import Host  # noqa: E402

STANDIN_TOOLS = ROOT / "tests" / "standin_tools"


def environments() -> dict[str, dict[str, str]]:
    own = os.environ.get("PATH", os.defpath)
    without = os.pathsep.join(folder for folder in own.split(os.pathsep)
                              if not Path(folder, "nvidia-smi").exists())
    with_standin = os.pathsep.join([str(STANDIN_TOOLS), without])
    base = {key: value for key, value in os.environ.items() if key != "CRASHLAB_STANDIN_NVIDIA_SMI"}
    return {"none": {**base, "PATH": without},
            "stand-in": {**base, "PATH": with_standin},
            "hung": {**base, "PATH": with_standin, "CRASHLAB_STANDIN_NVIDIA_SMI": "hang"}}


def timed(action, repeat: int) -> list[float]:
    action()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def figure(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:7.0f} / {min(times) * 1000:5.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--python", help="an interpreter to ask for its packages")
    options = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, timeout {options.timeout:g} s, "
          f"{options.repeat} runs each, median / best"
          + (f", packages of {options.python}" if options.python else ""))
    print(f"{'GPU tool':<10} {'crashlab env --json (process)':>30} {'capture() alone':>22}")
    extra = ["--python", options.python] if options.python else []
    for name, environ in environments().items():
        command = [sys.executable, "-m", "crashlab", "env", "--json", "--timeout",
                   str(options.timeout), *extra]
        process = timed(partial(subprocess.run, command, cwd=ROOT, env=environ, check=True,
                                stdout=subprocess.DEVNULL), options.repeat)
        host = Host(environ=environ)
        alone = timed(partial(capture, host, python=options.python, timeout=options.timeout),
                      options.repeat)
        print(f"{name:<10} {figure(process):>30} {figure(alone):>22}")


if __name__ == "__main__":
    main()
