"""Which torch.distributed collective a Python stack stands in, read from its frames alone.

Where no Flight Recorder dump was taken (not enabled, an older PyTorch, a gloo group: in torch
2.14 the dump pipe is ProcessGroupNCCL's), a rank's py-spy stack is what says it waits in a
collective: a frame of one of torch.distributed's collective functions in
``torch/distributed/distributed_c10d.py``. The innermost such frame names it (``all_gather_object``
calls ``all_gather``: the stack stands in ``all_gather``), as the work on the wire is named. Only
a call that blocks shows: an ``async_op`` call, or an NCCL collective whose host call returns
once enqueued, leaves the stack at the program's next wait, in no collective.
"""

from __future__ import annotations

from .pyspy import StackFrame

#: torch.distributed's collective and point-to-point functions, as distributed_c10d.py names them.
COLLECTIVES = frozenset({
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "_all_gather_base",
    "all_gather_coalesced", "all_gather_object", "all_to_all", "all_to_all_single", "broadcast",
    "broadcast_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor",
    "_reduce_scatter_base", "scatter", "scatter_object_list", "gather", "gather_object", "barrier",
    "monitored_barrier", "send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list",
    "recv_object_list"})
C10D_FILE = "torch/distributed/distributed_c10d.py"
#: Native frames of PyTorch's distributed runtime (under ``--native``): the call's wait in c10d.
C10D_NATIVE = "c10d::"


def collective_call(frames: list[StackFrame]) -> StackFrame | None:
    """The innermost frame of a torch.distributed collective in ``frames`` (innermost first), or
    None where the stack stands in none."""
    return next((frame for frame in frames if not frame.native and frame.function in COLLECTIVES
                 and frame.file is not None and _is_c10d(frame.file)), None)


def _is_c10d(file: str) -> bool:
    """py-spy shortens a site-packages file to ``torch/...``; elsewhere it keeps the whole path."""
    return file == C10D_FILE or file.endswith("/" + C10D_FILE)


def c10d_native(native: list[str]) -> list[str]:
    """The named native frames of PyTorch's distributed runtime among a thread's native frames
    (a binding whose template arguments merely name c10d is not one)."""
    return [frame for frame in native if frame.startswith(C10D_NATIVE)]
