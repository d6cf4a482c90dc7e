"""A hang capture: k host-side samples of every rank of a live server, then one GPU dump each.

A hung tensor-parallel server answers nothing and every rank waits. What each rank waits in is
spread over several tools, each with its own limits; a capture asks all of them, several times,
at the same moments, and keeps what each gave (or why it gave nothing) in the run directory under
the layout of crashlab.hangs.layout:

- ``py-spy dump --native`` of each rank's process (its Python and native stack; needs ptrace);
- a Flight Recorder dump of each rank, through PyTorch's own pipe (the process lives on);
- one NCCL RAS status query per sample (one job-wide answer);
- the GPUs' activity from NVML (utilisation, clocks, per-process memory);
- then, last and once, a user-triggered GPU dump of every process. On a real driver (an H200,
  580.159.04) the process ENDS right after its dump (SIGABRT after the driver's "All done");
  with ``skip_abort`` it lives but the driver removes its pipe: one GPU dump per process either way.

Every source has a timeout and every file a size cap; the whole capture has a byte budget. A
source that is missing or refuses is a row with its status and a one-line note, never a failed
capture. ``take()`` runs one capture; ``crashlab dump-now`` and ``serve --hang-after`` call it.
"""

from .run import CaptureOptions, CaptureResult, take

__all__ = ["CaptureOptions", "CaptureResult", "take"]
