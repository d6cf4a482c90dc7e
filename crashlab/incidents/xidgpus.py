"""Which GPU, and which rank, an Xid line is about: the line names a PCI address, the operator
acts on a UUID, an nvidia-smi index or a CUDA_VISIBLE_DEVICES entry, and a report reads ranks.

Only what the run recorded places a GPU: its GPU table (environment.json: nvidia-smi's index,
UUID and PCI address), the server's CUDA_VISIBLE_DEVICES as launched (the CUDA device number is
the GPU's place in it), and which rank used it: the process the driver names on the line
(``pid=``) when it is one of the server's tagged processes, else SGLang's own placement of a
single-node launch (tensor-parallel rank r on CUDA device ``--base-gpu-id + r * --gpu-id-step``,
``gpu_id`` in SGLang's ``launch_server``). Where none applies the GPU is named without a rank,
and the reason is said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..report.kernellog import KernelLog, XidGpu

#: The PCI address in an Xid line's parentheses: domain, bus and device (the function is 0).
_PCI = re.compile(r"(?:PCI:)?(?P<domain>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})")


@dataclass(frozen=True)
class RunGpu:
    """One GPU of the run's machine (nvidia-smi's index, PCI address and UUID)."""

    bus_id: str  # 0000:3b:00.0
    index: int | None
    uuid: str | None


@dataclass(frozen=True)
class SGLangPlacement:
    """A single-node SGLang launch's GPU per tensor-parallel rank."""

    tp_size: int
    base_gpu_id: int = 0
    gpu_id_step: int = 1

    def rank_on(self, cuda_index: int) -> str | None:
        offset = cuda_index - self.base_gpu_id
        if offset < 0 or offset % self.gpu_id_step:
            return None
        rank = offset // self.gpu_id_step
        return f"TP{rank}" if rank < self.tp_size else None


@dataclass(frozen=True)
class RunPlaces:
    """What a run recorded of its GPUs and ranks; each part empty where it was not recorded."""

    where: str  # the run, in words ("run directory X")
    gpus: tuple[RunGpu, ...] = ()
    visible: str | None = None  # CUDA_VISIBLE_DEVICES as launched; None: not set
    ranks_by_pid: dict[int, str] = field(default_factory=dict)  # the server's tagged processes
    sglang: SGLangPlacement | None = None  # None: not a single-node SGLang launch


def place(log: KernelLog, run: RunPlaces | None) -> list[XidGpu]:
    """Each GPU the log's Xid lines name, in the order first named, placed where RUN knows it."""
    devices = list(dict.fromkeys(event.device for event in log.xids))
    return [_placed(device, log, run) for device in devices]


def pci_of(device: str) -> str | None:
    """``PCI:0000:3b:00`` (or ``0000:3b:00 GPU-I:05``) as ``0000:3b:00``; None for another form."""
    found = _PCI.search(device)
    if found is None:
        return None
    return f"{int(found['domain'], 16):04x}:{found['bus'].lower()}:{found['dev'].lower()}"


def _placed(device: str, log: KernelLog, run: RunPlaces | None) -> XidGpu:
    if run is None:
        return XidGpu(device=device, unmapped="no run directory was given, and a log alone names no rank")
    pci = pci_of(device)
    gpu = next((g for g in run.gpus if pci is not None and g.bus_id.lower().startswith(pci)), None)
    if gpu is None:
        return XidGpu(device=device, unmapped=f"{run.where} lists no GPU at {pci or device} "
                                              "(another machine's log, or its GPU table was not taken)")
    cuda_index = _cuda_index(gpu, run.visible)
    pids = {event.pid for event in log.xids if event.device == device and event.pid is not None}
    ranks = sorted({run.ranks_by_pid[pid] for pid in pids if pid in run.ranks_by_pid})
    unmapped = None
    if not ranks and cuda_index is not None and run.sglang is not None:
        ranks = [rank] if (rank := run.sglang.rank_on(cuda_index)) else []
    if not ranks:
        unmapped = _why_no_rank(run, cuda_index, bool(pids))
    return XidGpu(device=device, bus_id=gpu.bus_id, index=gpu.index,
                  cuda_index=cuda_index, ranks=ranks, unmapped=unmapped)


def _cuda_index(gpu: RunGpu, visible: str | None) -> int | None:
    """The GPU's CUDA device number in the server: its place in CUDA_VISIBLE_DEVICES (entries
    are nvidia-smi indices or UUIDs, a UUID's prefix enough), else nvidia-smi's index."""
    if visible is None:
        return gpu.index
    for place, entry in enumerate(part.strip() for part in visible.split(",")):
        if entry.isdigit() and gpu.index is not None and int(entry) == gpu.index:
            return place
        if entry.startswith("GPU-") and gpu.uuid and gpu.uuid.startswith(entry):
            return place
        if not entry.isdigit() and not entry.startswith("GPU-"):
            break  # a MIG instance or a word CUDA stops at: no device past it is visible
    return None


def _why_no_rank(run: RunPlaces, cuda_index: int | None, pid_named: bool) -> str:
    if cuda_index is None:
        return f"the server could not see this GPU (CUDA_VISIBLE_DEVICES={run.visible})"
    said = "the process the driver names is none of the server's ranks; " if pid_named else ""
    if run.sglang is None:
        return (f"{said}the launch does not say which rank used CUDA device {cuda_index} (not a "
                "single-node SGLang launch)")
    return f"{said}no tensor-parallel rank of the launch runs on CUDA device {cuda_index}"
