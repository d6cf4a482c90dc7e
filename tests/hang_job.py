"""A REAL torch.distributed job of N ranks on CPU (gloo), hung on purpose, for the capture tests.

Run by the SGLang environment's Python (it has torch): ``python tests/hang_job.py --world 4
--port P`` is a launcher, as torchrun is, that starts one process per rank with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set. Every rank loops over real ``all_reduce`` calls;
at step ``--hang-step`` rank ``--hang-rank`` leaves the loop for ``wait_for_requests()`` and
never enters that all_reduce, so the other ranks wait in it for ever (the gloo timeout is an
hour). The collectives, the process tree, the Flight Recorder's buffer and its pickles are
PyTorch's own.

STAND-INS, each labelled where it is:
- the Flight Recorder pipe. In PyTorch 2.14 the pipe belongs to ProcessGroupNCCL (its heartbeat
  monitor, libtorch_cuda); gloo has none. A thread of each rank does what that monitor does:
  makes ``<TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe``, reads it about once a second, and on a
  byte writes PyTorch's real trace (``torch._C._distributed_c10d._dump_fr_trace()``, the pickle
  the monitor writes) to ``<TORCH_FR_DUMP_TEMP_FILE><rank>``, the process untouched.
- /health: rank 0 answers 200 while its loop moves (SGLang's /health waits for a generation the
  same way); once the loop stops, it never answers.
- NCCL RAS (``--ras``): gloo makes no NCCL communicator, so no RAS listens. Rank 0 then answers
  NCCL's client protocol (src/ras/client.cc: ``CLIENT PROTOCOL``/``SERVER PROTOCOL``, ``STATUS``,
  the report until close) on NCCL_RAS_ADDR with a report CONSTRUCTED in the shape of NCCL's text
  output (src/ras/client_support.cc), naming the waiting ranks' communicator as incomplete.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STEP_SECONDS = 0.1
#: /health stops answering once the loop has not moved for this long: more than a loaded
#: machine's CPU stall (seconds), which is no hang
LIVELY = 5.0


def wait_for_requests() -> None:
    """Where the planted rank stays: a poll that never finds a request."""
    while True:
        time.sleep(0.2)


def flight_recorder_pipe(rank: int, ready: threading.Event) -> None:
    """STAND-IN for ProcessGroupNCCL's heartbeat monitor's dump pipe (see the module doc)."""
    import torch

    stem, prefix = os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"), \
        os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not stem or not prefix:
        ready.set()
        return
    pipe = f"{stem}{rank}.pipe"
    if os.path.exists(pipe):
        os.unlink(pipe)
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    # Its first call imports the symbolizer's modules (3.4 s on an idle 2-core VM, far more with
    # four ranks importing at once): done before the loop starts, so a capture's dump is not late.
    torch._C._distributed_c10d._dump_fr_trace()
    ready.set()
    while True:
        time.sleep(1.0)
        try:
            if not os.read(fd, 128):
                continue
        except BlockingIOError:
            continue
        trace = torch._C._distributed_c10d._dump_fr_trace()
        with open(f"{prefix}{rank}", "wb") as out:  # as DebugInfoWriter: the whole trace at once
            out.write(trace)


class Health(BaseHTTPRequestHandler):
    last_step = time.monotonic()

    def do_GET(self):  # noqa: N802 (http.server's name)
        if time.monotonic() - Health.last_step > LIVELY:
            threading.Event().wait()  # the loop has stopped: never answer
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


RAS_REPORT = """NCCL version 2.30.7 compiled with CUDA 13.0
CUDA runtime version 13000, driver version 13000

Job summary
===========

  Nodes  Processes         GPUs
(total)    (total)      (total)
      1  {world:9d}  {world:11d}

Communicators... (0.002s)
=============

Group    Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         1  {world:8d}  {world:8d}  {world:8d}   RUNNING  INCOMPLETE

Errors
======

INCOMPLETE
  Missing communicator data from {missing} rank
  The missing rank: {hang_rank}
"""


def ras_standin(address: str, world: int, hang_rank: int) -> None:
    """STAND-IN for NCCL's RAS listener (see the module doc); the report is constructed."""
    host, _, port = address.rpartition(":")
    server = socket.create_server((host, int(port)))
    while True:
        connection, _ = server.accept()
        with connection, connection.makefile("rb") as reader:
            if not reader.readline().startswith(b"CLIENT PROTOCOL"):
                continue
            connection.sendall(b"SERVER PROTOCOL 2\n")
            if reader.readline().strip() == b"STATUS":
                connection.sendall(RAS_REPORT.format(world=world, missing=1,
                                                     hang_rank=hang_rank).encode())


def rank_main(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]),
                            timeout=datetime.timedelta(hours=1))
    tensor = torch.ones(16)
    dist.all_reduce(tensor)  # one entry in the buffer, so the stand-in's first dump symbolizes
    ready = threading.Event()
    threading.Thread(target=flight_recorder_pipe, args=(rank, ready), daemon=True).start()
    ready.wait()
    Health.last_step = time.monotonic()
    if rank == 0:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), Health)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        if args.ras and os.environ.get("NCCL_RAS_ADDR"):
            threading.Thread(target=ras_standin, args=(os.environ["NCCL_RAS_ADDR"], args.world,
                                                       args.hang_rank), daemon=True).start()
    step = 0
    while True:
        if rank == args.hang_rank and step == args.hang_step:
            wait_for_requests()
        dist.all_reduce(tensor)
        Health.last_step = time.monotonic()
        step += 1
        time.sleep(STEP_SECONDS)


def launch(args: argparse.Namespace) -> int:
    """Start the ranks as torchrun would, and wait for them."""
    master_port = args.master_port
    children = []
    for rank in range(args.world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port))
        children.append(subprocess.Popen([sys.executable, __file__, "--rank-process",
                                          *sys.argv[1:]], env=env))
    signal.signal(signal.SIGTERM, lambda *_: [child.terminate() for child in children])
    return max(child.wait() for child in children)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--hang-rank", type=int, default=2)
    parser.add_argument("--hang-step", type=int, default=20)
    parser.add_argument("--ras", action="store_true")
    parser.add_argument("--rank-process", action="store_true")
    args = parser.parse_args()
    if args.rank_process:
        rank_main(args)
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
