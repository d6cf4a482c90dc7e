"""One rank of a 4-rank torch.distributed program on CPU (gloo) with a planted hang; run by the
SGLang environment's Python: ``python workload.py RANK WORLD MODE FOLDER``.

Every rank loops on ``all_reduce`` of 4 floats. At step PLANTED (its collective #PLANTED + 1;
``GLOO_HANG_PLANTED`` moves it, as a restart that hangs later would),
in mode ``skip`` rank 2 leaves the loop for ``recv_requests`` (a wait for input that never comes,
as a scheduler's), so the others wait in that all_reduce forever; in mode ``size`` rank 2 passes
8 floats where the others pass 4. Each rank serves PyTorch's own debug pipe, its WorkerServer on
a unix socket (``FOLDER/rank-R.sock``): torch's ``fr_trace_json`` handler, and
``fr_trace_pickle``, registered here, which answers ``_dump_fr_trace()`` (the pickled dump, with
the stacks JSON leaves out). ``FOLDER/rank-R.ready`` is written just before the planted step.
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

PLANTED = int(os.environ.get("GLOO_HANG_PLANTED", "5"))
#: The rank's debug pipe, kept for the life of the process.
SERVERS: list = []


def recv_requests() -> None:
    while True:
        time.sleep(0.05)


def serve_pickle(request, response) -> None:
    response.set_content(c10d._dump_fr_trace(), "application/octet-stream")


def main() -> None:
    rank, world, mode, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    c10d._register_handler("fr_trace_pickle", serve_pickle)
    SERVERS.append(c10d._WorkerServer(os.path.join(folder, f"rank-{rank}.sock")))
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"file://{os.path.abspath(folder)}/store",
                            timeout=datetime.timedelta(seconds=600))
    values = torch.ones(4)
    step = 0
    while True:
        if step == PLANTED:
            open(os.path.join(folder, f"rank-{rank}.ready"), "w").close()
            if rank == 2 and mode == "skip":
                recv_requests()
            if rank == 2 and mode == "size":
                values = torch.ones(8)
        dist.all_reduce(values)
        step += 1


if __name__ == "__main__":
    main()
