"""Reading cuda-gdb's live snapshots of a rank (``info cuda kernels`` and ``info cuda warps``):
which kernels run, which warps stand at which PC, and whether they moved between snapshots.

cuda-gdb prints the same tables for a live attach and for ``target cudacore``; ``info cuda
warps`` lists the warps of the SM in focus only. A PC alone is the evidence: the same warps at
the same PCs in every snapshot is "stuck" (a spin loop whose every pass is caught at the same
instruction reads the same, and says so), a warp that left its PC is "progressing".
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from ..notation import counted

_KERNEL = re.compile(r"^\*?\s*(\d+)\s+\S+\s+(\d+)\s+(\d+)\s+(\w+)\s+0x[0-9a-f]+\s+(\(\S+\))\s+"
                     r"(\(\S+\))\s+(.*?)\s*$")
_SM = re.compile(r"^Device (\d+) SM (\d+)\s*$")
_WARP = re.compile(r"^\*?\s*(\d+)\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+(\d+)\s+"
                   r"(\(\S+\))\s+\(\S+\)\s*$")
Motion = Literal["stuck", "progressing", "unknown"]


@dataclass(frozen=True)
class Kernel:
    kernel: int
    device: int
    grid: int
    status: str
    grid_dim: str
    block_dim: str
    invocation: str


@dataclass(frozen=True)
class Warp:
    device: int
    sm: int
    warp: int
    pc: int
    kernel: int
    block: str
    active_mask: int


@dataclass
class Snapshot:
    kernels: list[Kernel] = field(default_factory=list)
    warps: list[Warp] = field(default_factory=list)
    no_kernels: bool = False
    """cuda-gdb said "No CUDA kernels.": no context, or nothing running."""


@dataclass(frozen=True)
class Motions:
    motion: Motion
    evidence: str
    pcs_by_kernel: dict[str, Counter[int]]
    """Per kernel (its invocation), how many warps stand at each PC in the last snapshot."""


def parse(text: str) -> Snapshot:
    snapshot = Snapshot(no_kernels="No CUDA kernels." in text)
    device = sm = None
    for line in text.splitlines():
        if (found := _SM.match(line)):
            device, sm = int(found[1]), int(found[2])
        elif (found := _WARP.match(line)) and device is not None and sm is not None:
            snapshot.warps.append(Warp(device, sm, int(found[1]), int(found[3], 16),
                                       int(found[4]), found[5], int(found[2], 16)))
        elif (found := _KERNEL.match(line)):
            snapshot.kernels.append(Kernel(int(found[1]), int(found[2]), int(found[3]), found[4],
                                           found[5], found[6], found[7]))
    return snapshot


def _by_kernel(snapshot: Snapshot) -> dict[str, Counter[int]]:
    names = {kernel.kernel: kernel.invocation for kernel in snapshot.kernels}
    counts: dict[str, Counter[int]] = {}
    for warp in snapshot.warps:
        counts.setdefault(names.get(warp.kernel, f"kernel {warp.kernel}"), Counter())[warp.pc] += 1
    return counts


def motion(snapshots: list[Snapshot]) -> Motions:
    """Whether the warps moved across SNAPSHOTS (in the order taken), with the evidence."""
    seen = [snapshot for snapshot in snapshots if snapshot.warps]
    last = _by_kernel(seen[-1]) if seen else {}
    if len(seen) < 2:
        said = ("no snapshot saw a CUDA kernel" if not seen else
                "one snapshot with warps: nothing to compare")
        return Motions("unknown", said, last)
    places = [{(w.device, w.sm, w.warp): w.pc for w in snapshot.warps} for snapshot in seen]
    pairs = list(itertools.pairwise(places))
    moved = sorted({key for before, after in pairs
                    for key in before.keys() & after.keys() if before[key] != after[key]})
    if moved:
        device, sm, warp = moved[0]
        return Motions("progressing", f"{counted(len(moved), 'warp')} changed PC between snapshots "
                       f"(first: device {device} SM {sm} warp {warp})", last)
    if any(before.keys() != after.keys() for before, after in pairs):
        return Motions("progressing", "the warps resident on the SM changed between snapshots",
                       last)
    return Motions("stuck", f"the same {counted(len(places[0]), 'warp')} at the same PCs in "
                   f"{counted(len(seen), 'snapshot')}", last)
