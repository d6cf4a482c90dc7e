"""Reading cuda-gdb's live snapshots of a rank (``info cuda kernels``, ``info cuda warps``, and
for a few warps ``info cuda lanes`` and one lane's ``info registers``): which kernels run, which
warps stand at which PC with which registers, and whether they moved between snapshots.

cuda-gdb prints the same tables for a live attach and for ``target cudacore``; ``info cuda
warps`` lists the warps of the SM in focus only. Where the rank's GPU dump says a kernel's warps
poll an address, the registers its loop's load writes hold the value polled last: the same value
in every snapshot is "spinning", a changed one "progressing". Otherwise the same warps at the same
PCs with the same registers is "stuck", a warp that left its PC (or whose registers changed) is
"progressing".
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from ..notation import counted
from ..signature.names import base_name
from .model import GpuWait

_KERNEL = re.compile(r"^\*?\s*(\d+)\s+\S+\s+(\d+)\s+(\d+)\s+(\w+)\s+0x[0-9a-f]+\s+(\(\S+\))\s+"
                     r"(\(\S+\))\s+(.*?)\s*$")
_SM = re.compile(r"^Device (\d+) SM (\d+)\s*$")
_WARP = re.compile(r"^\*?\s*(\d+)\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+(\d+)\s+"
                   r"(\(\S+\))\s+\(\S+\)\s*$")
_FOCUS = re.compile(r"^device (\d+), sm (\d+), warp (\d+), lane (\d+)\s*$")
_LANES = re.compile(r"^Device (\d+) SM (\d+) Warp (\d+)\s*$")
_LANE = re.compile(r"^\*?\s*(\d+)\s+([a-z]+)\s+(0x[0-9a-f]+)\s+(\(\S+\))\s+(.*?)\s*$")
_REGISTER = re.compile(r"^(U?R\d+|U?P\d+)\s+(0x[0-9a-f]+)\s")
Motion = Literal["stuck", "spinning", "progressing", "unknown"]
#: A polling wait's class (crashlab.waits): its warps read a value in a loop.
POLLING_KINDS = ("polling-memory", "collective-wait")
WarpKey = tuple[int, int, int]
"""(device, SM, warp)"""


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


@dataclass(frozen=True)
class Lane:
    lane: int
    state: str
    pc: int
    thread: str
    exception: str


@dataclass
class LaneRegisters:
    """The registers of the one lane cuda-gdb focused on in a warp."""

    lane: int
    values: dict[str, int] = field(default_factory=dict)


@dataclass
class Snapshot:
    kernels: list[Kernel] = field(default_factory=list)
    warps: list[Warp] = field(default_factory=list)
    no_kernels: bool = False
    """cuda-gdb said "No CUDA kernels.": no context, or nothing running."""
    lanes: dict[WarpKey, list[Lane]] = field(default_factory=dict)
    registers: dict[WarpKey, LaneRegisters] = field(default_factory=dict)
    """One lane per warp read; a warp slot that held no warp left the focus where it was, and
    the registers printed again are kept once, under the warp they belong to."""


@dataclass(frozen=True)
class Motions:
    motion: Motion
    evidence: str
    pcs_by_kernel: dict[str, Counter[int]]
    """Per kernel (its invocation), how many warps stand at each PC in the last snapshot."""


def parse(text: str) -> Snapshot:
    snapshot = Snapshot(no_kernels="No CUDA kernels." in text)
    device = sm = None
    lanes_of: WarpKey | None = None
    focus: LaneRegisters | None = None
    for line in text.splitlines():
        if (found := _FOCUS.match(line)):
            key = (int(found[1]), int(found[2]), int(found[3]))
            focus = None if key in snapshot.registers else \
                snapshot.registers.setdefault(key, LaneRegisters(int(found[4])))
        elif (found := _REGISTER.match(line)):
            if focus is not None:
                focus.values[found[1]] = int(found[2], 16)
        elif (found := _LANES.match(line)):
            key = (int(found[1]), int(found[2]), int(found[3]))
            lanes_of = None if key in snapshot.lanes else key
            if lanes_of is not None:
                snapshot.lanes[lanes_of] = []
        elif (found := _LANE.match(line)) and lanes_of is not None:
            snapshot.lanes[lanes_of].append(Lane(int(found[1]), found[2], int(found[3], 16),
                                                 found[4], found[5]))
        elif (found := _SM.match(line)):
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


def _value(registers: LaneRegisters, names: list[str]) -> int | None:
    """The value held in NAMES (low word first, as a load of 64 bits writes a pair); None where
    the snapshot lacks one of them."""
    if not names or any(name not in registers.values for name in names):
        return None
    return sum(registers.values[name] << (32 * k) for k, name in enumerate(names))


def _polled(seen: list[Snapshot], wait: GpuWait) -> dict[WarpKey, list[int]]:
    """Per warp of WAIT's kernel whose registers were read, the value it polled last in each
    snapshot that read it."""
    values: dict[WarpKey, list[int]] = {}
    for snapshot in seen:
        kernels = {k.kernel for k in snapshot.kernels if base_name(k.invocation) == wait.kernel}
        for warp in snapshot.warps:
            key = (warp.device, warp.sm, warp.warp)
            read = snapshot.registers.get(key)
            value = _value(read, wait.value_registers) if read and warp.kernel in kernels else None
            if value is not None:
                values.setdefault(key, []).append(value)
    return values


def _polling(seen: list[Snapshot], waits: list[GpuWait], moved: int) -> tuple[Motion, str] | None:
    """What the value a polling loop reads did over the snapshots, where the GPU dump names the
    loop of one of their kernels and the snapshots read it twice or more."""
    for wait in waits:
        if wait.kind not in POLLING_KINDS or not wait.value_registers:
            continue
        values = {key: seq for key, seq in _polled(seen, wait).items() if len(seq) >= 2}
        if not values:
            continue
        registers = ":".join(reversed(wait.value_registers))
        polls = f"{wait.kernel} polls {wait.address or 'memory'}"
        changed = {key: seq for key, seq in values.items() if len(set(seq)) > 1}
        if changed:
            (device, sm, warp), seq = min(changed.items())
            return "progressing", (f"{polls}, and the value it read ({registers}) changed between "
                                   f"snapshots: {', '.join(f'{v:#x}' for v in seq)} (device "
                                   f"{device} SM {sm} warp {warp})")
        stayed = {seq[0] for seq in values.values()}
        shown = ", ".join(f"{v:#x}" for v in sorted(stayed))
        snapshots = max(len(seq) for seq in values.values())
        pcs = (f"; {counted(moved, 'warp')} changed PC within it" if moved else
               ", at the same PCs")
        return "spinning", (f"{polls} whose value ({registers}) stayed {shown} over "
                            f"{counted(snapshots, 'snapshot')} ({counted(len(values), 'warp')} "
                            f"read){pcs}")
    return None


def _registers_changed(seen: list[Snapshot]) -> str | None:
    """The first register of a lane read in two snapshots that changed, said as evidence."""
    for before, after in itertools.pairwise(seen):
        for key in sorted(before.registers.keys() & after.registers.keys()):
            old, new = before.registers[key], after.registers[key]
            if old.lane != new.lane:
                continue
            for name, value in old.values.items():
                if name in new.values and new.values[name] != value:
                    device, sm, warp = key
                    return (f"device {device} SM {sm} warp {warp} lane {old.lane}: {name} "
                            f"{value:#x} -> {new.values[name]:#x}")
    return None


def motion(snapshots: list[Snapshot], waits: list[GpuWait] | None = None) -> Motions:
    """Whether the warps moved across SNAPSHOTS (in the order taken), with the evidence. WAITS,
    the rank's GPU dump's classes, name the polling loops whose value is followed."""
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
    if (polling := _polling(seen, waits or [], len(moved))):
        return Motions(*polling, last)
    if moved:
        device, sm, warp = moved[0]
        return Motions("progressing", f"{counted(len(moved), 'warp')} changed PC between snapshots "
                       f"(first: device {device} SM {sm} warp {warp})", last)
    if any(before.keys() != after.keys() for before, after in pairs):
        return Motions("progressing", "the warps resident on the SM changed between snapshots",
                       last)
    if (changed := _registers_changed(seen)):
        return Motions("progressing", f"the same PCs, but registers changed between snapshots "
                       f"({changed})", last)
    read = sum(1 for key in seen[0].registers if key in places[0])
    registers = f" and registers ({counted(read, 'lane')} read)" if read else ""
    return Motions("stuck", f"the same {counted(len(places[0]), 'warp')} at the same PCs"
                   f"{registers} in {counted(len(seen), 'snapshot')}", last)
