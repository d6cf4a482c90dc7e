"""Time to load a SYNTHETIC crash dump with crashlab's allowlist interpreter vs stdlib pickle.

    python benchmarks/bench_load.py [--requests 1000] [--tokens 2000]

The dump (built here with the stand-in classes of tests/standin, SGLang 0.5.23
layout) holds --requests requests of --tokens input ids each, a 500-character recorded output
and 128 output ids. crashlab.replay.load (opcode interpreter, bounds walk, typed records) is
timed against stdlib pickle.loads of the same bytes, which runs the classes it names and so is
only a yardstick of speed. Best of 3.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(requests: int, tokens: int) -> bytes:
    os.environ["SGLANG_STANDIN_VERSION"] = "0.5.23"
    sys.path.insert(0, str(ROOT / "tests" / "standin"))
    from sglang.srt.managers.io_struct import GenerateReqInput

    records = []
    for index in range(requests):
        request = GenerateReqInput(rid=f"r{index}", input_ids=tuple(range(index, index + tokens)),
                                   sampling_params={"temperature": 0, "max_new_tokens": 128})
        request.normalize()
        output = {"text": "x" * 500, "output_ids": list(range(128)),
                  "meta_info": {"finish_reason": {"type": "length"}, "prompt_tokens": tokens,
                                "completion_tokens": 128}}
        records.append((request, output, 1.0 + index, 2.0 + index))
    return pickle.dumps({"server_args": None, "requests": records, "launch_command": "x"})


def best(action, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=2000)
    args = parser.parse_args()
    data = build(args.requests, args.tokens)
    sys.path.insert(0, str(ROOT))
    import crashlab.replay

    with tempfile.NamedTemporaryFile(suffix=".pkl") as file:
        file.write(data)
        file.flush()
        ours = best(lambda: crashlab.replay.load(file.name))
    stdlib = best(lambda: pickle.loads(data))
    size = len(data) / 1e6
    print(f"{args.requests} requests x {args.tokens} tokens, {size:.1f} MB: crashlab.replay.load "
          f"{ours:.2f} s ({size / ours:.1f} MB/s), stdlib pickle.loads {stdlib:.2f} s")


if __name__ == "__main__":
    main()
