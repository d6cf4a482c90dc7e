"""One writer process of the concurrency tests and benchmark: records OWN crashes of its own
(keys w<WORKER>-<i>, spread over SIGNATURES signatures, so that every writer hits the same
signatures at once), and after each of the first SHARED of them a crash every writer also
records (keys shared-<i>: one of them must win each, none doubled).

    python -m tests.index_writer ADDRESS WORKER OWN SHARED SIGNATURES [START]

START (seconds since the epoch) makes every writer open the index at the same moment. With
INDEX_WRITER_GO set (a file's path), the writer says "ready" on stderr once started up and waits
until that file exists instead (120 s at most): a test starts every writer at once without
guessing how long a loaded machine takes to start them. Each says "opening the index" on
stderr just before it opens the index.
"""

from __future__ import annotations

import os
import sys
import time

from crashlab.index import Index
from tests.index_fixtures import crash, signature


def signature_number(i: int, signatures: int) -> str:
    return f"{i % signatures:012x}"


def main(address: str, worker: int, own: int, shared: int, signatures: int,
         start: float = 0.0) -> None:
    go = os.environ.get("INDEX_WRITER_GO")
    if go:
        print("ready", file=sys.stderr, flush=True)
        deadline = time.monotonic() + 120
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
    time.sleep(max(0.0, start - time.time()))
    started = time.perf_counter()
    print("opening the index", file=sys.stderr, flush=True)
    with Index(address) as index:
        for i in range(own):
            sig = signature(signature_number(i, signatures))
            index.record(crash(f"w{worker}-{i}", sig, 1_000_000.0 + i, host=f"node{worker}"))
            if i < shared:
                index.record(crash(f"shared-{i}", sig, 1_000_000.0 + i, host=f"node{worker}"))
    print(f"{time.perf_counter() - started:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:6]), float(sys.argv[6]) if len(sys.argv) > 6 else 0.0)
