"""Classes of where a hung kernel's warps stand, one report.Wait per class, with its evidence.

A warp's class is read from the code at its PC (crashlab.waits.shape) and from its block's warp
table (crashlab.waits.stand): at a barrier while warps of its block exited (a barrier after an
early return), at a barrier with its block whole, spinning in a loop that polls memory, the same
in a collective kernel (NCCL, a custom all-reduce: waiting on a peer), or elsewhere.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..coredump.core import CoreDump
from ..coredump.model import Grid
from ..notation import counted, dim, short_source
from ..report import model
from ..sass.finder import CodeFinder, CodeLocation, function_code
from ..sass.flow import FunctionCode
from ..sass.instruction import Instruction
from .origin import address_origin
from .polled import address_evidence, address_operand, lane_address
from .shape import Polling, is_barrier, polling_loop
from .stand import GridWarps, WarpAt, expected_lanes, resident_warps

#: Kernels that wait on another GPU: NCCL's device kernels, the custom all-reduce kernels of
#: vLLM and SGLang (cross_device_reduce_1stage/2stage) and other all-reduce kernels by name.
COLLECTIVE_NAME = re.compile(r"nccl\w*Kernel|cross_device_reduce|all_?reduce", re.IGNORECASE)
#: Distinct PCs of one kernel whose code is read; warps at others are counted as 'other'.
MAX_PCS_READ = 64
#: Warps whose polled address is read, to tell one flag from many (each register read looks
#: its section up among all the dump's: about a millisecond on a dump of 8,448 warps).
MAX_SAMPLED = 64
#: Blocks (and PCs) named one by one in a class's evidence; the rest are counted.
MAX_LISTED = 4


#: How the code at a PC reads: the warp waits at a barrier, polls memory, or neither.
ReadingKind = Literal["barrier", "polling", "other"]


@dataclass
class Reading:
    """What the code at one PC says a warp there waits for."""

    kind: ReadingKind
    why: str = ""
    location: CodeLocation | None = None
    code: FunctionCode | None = None
    instruction: Instruction | None = None
    polling: Polling | None = None
    #: the PC is the instruction after the barrier the warp waits at (as the GPU reports it)
    after_barrier: bool = False


#: the warps at each PC (None: a warp with no active lane), and what the code at each PC says
ByPc = dict[int | None, list[WarpAt]]
Readings = dict[int | None, Reading]


def read_pc(finder: CodeFinder, pc: int, grid: Grid | None) -> Reading:
    found = function_code(finder, pc, grid)
    if isinstance(found, str):
        return Reading("other", why=found)
    location, code = found
    offset = pc - location.text_address
    at = code.index_of.get(offset)
    if at is None:
        return Reading("other", f"nvdisasm's listing has no instruction at +{offset:#x}", location)
    instruction = code.instructions[at]
    reading = Reading("other", location=location, code=code, instruction=instruction)
    if is_barrier(instruction):
        reading.kind = "barrier"
        return reading
    if at and _holds_the_warp(code.instructions[at - 1]):
        # a warp held at a CTA barrier reports the PC after it (every such warp of the real
        # H200 dumps, and cuda-gdb with them): the barrier is the instruction before its PC
        reading.kind, reading.instruction = "barrier", code.instructions[at - 1]
        reading.after_barrier = True
        return reading
    polling = polling_loop(code, offset)
    if isinstance(polling, str):
        reading.why = polling
    elif is_barrier(polling.load):  # an mbarrier's try-wait loop (SYNCS.PHASECHK): a barrier
        reading.kind, reading.polling = "barrier", polling
    else:
        reading.kind, reading.polling = "polling", polling
    return reading


def explain_waits(core: CoreDump, finder: CodeFinder) -> dict[tuple[int, int], list[model.Wait]]:
    """The wait classes of every launch with resident warps, by (device id, grid id)."""
    return {(g.grid.device.dev_id, g.grid.grid_id): kernel_waits(core, finder, g)
            for g in resident_warps(core)}


def kernel_waits(core: CoreDump, finder: CodeFinder, grid_warps: GridWarps) -> list[model.Wait]:
    by_pc: dict[int | None, list[WarpAt]] = defaultdict(list)
    for at in grid_warps.warps:
        by_pc[at.pc].append(at)
    readings: dict[int | None, Reading] = {}
    for rank, pc in enumerate(sorted(by_pc, key=lambda p: (-len(by_pc[p]), p or 0))):
        if pc is None:
            readings[pc] = Reading("other", why="no active lane: the dump gives no PC")
        elif rank >= MAX_PCS_READ:
            readings[pc] = Reading("other", why=f"not read: only the {MAX_PCS_READ} most "
                                                "populated PCs of a kernel are")
        else:
            readings[pc] = read_pc(finder, pc, grid_warps.grid)
    collective = bool(COLLECTIVE_NAME.search(grid_warps.grid.function or ""))
    waits = [_barrier_wait(grid_warps, by_pc, readings),
             _polling_wait(core, grid_warps, by_pc, readings, collective),
             _other_wait(grid_warps, by_pc, readings, collective)]
    return sorted((w for w in waits if w is not None), key=lambda w: -w.warps)


def _at(reading: Reading, pc: int) -> str:
    source = short_source(reading.instruction.source) if reading.instruction else ""
    offset = f"+{pc - reading.location.text_address:#x}" if reading.location else f"{pc:#x}"
    where = f"{reading.instruction.text if reading.instruction else '?'} at {offset}"
    if reading.after_barrier and reading.instruction is not None:
        where = (f"{reading.instruction.text} (PC {offset}, the next instruction, as the GPU "
                 "reports a warp held at a barrier)")
    return where + (f" ({source})" if source else "")


def _holds_the_warp(instruction: Instruction) -> bool:
    """A CTA barrier a warp waits at until its block arrives (BAR.SYNC, BAR.RED), not one it
    only signals (BAR.ARV)."""
    return instruction.op.family == "BAR" and ".ARV" not in instruction.opcode


def _read_as(readings: Readings, kind: ReadingKind) -> list[int]:
    """The PCs whose code reads as ``kind`` (warps with no PC read as 'other')."""
    return [pc for pc, r in readings.items() if r.kind == kind and pc is not None]


def _pcs(pcs: Iterable[int | None]) -> list[str]:
    return [f"{pc:#x}" for pc in pcs if pc is not None]


def _barrier_wait(grid_warps: GridWarps, by_pc: ByPc, readings: Readings) -> model.Wait | None:
    pcs = _read_as(readings, "barrier")
    if not pcs:
        return None
    waiting = {id(at) for pc in pcs for at in by_pc[pc]}
    evidence = [f"{counted(len(by_pc[pc]), 'warp')} at {_at(readings[pc], pc)}"
                + _retried(readings[pc].polling) for pc in pcs]
    blocks = [block for block in grid_warps.blocks if any(id(at) in waiting for at in block)]
    expected = grid_warps.warps_per_block
    short, exited = _short_blocks(blocks, expected)
    evidence += short
    elsewhere = sum(1 for block in blocks for at in block if id(at) not in waiting)
    if elsewhere:
        evidence.append(f"{counted(elsewhere, 'warp')} of those blocks are not at a barrier: what "
                        "the barrier waits for")
    lanes = _exited_lanes(grid_warps, [at for b in blocks for at in b if id(at) in waiting])
    evidence += [f"{lanes} lanes of the waiting warps exited (their warps' valid-lane masks)"] \
        if lanes else []
    warps = len(waiting)
    first = readings[pcs[0]]
    opcode = _short_opcode(first.polling.load if first.polling else first.instruction)
    at = f"{counted(warps, 'warp')} at {opcode} in {counted(len(blocks), 'block')}"
    if exited or lanes:
        return model.Wait(kind="barrier-after-exit", warps=warps, pcs=_pcs(pcs), evidence=evidence,
                          summary=f"{at} while {_gone(exited, lanes, len(blocks))} exited (a "
                                  "barrier after an early return)")
    evidence.append(f"every block holding them has all {expected} of its warps resident")
    return model.Wait(kind="barrier", warps=warps, pcs=_pcs(pcs), evidence=evidence,
                      summary=f"{at}, none exited")


def _gone(warps: int, lanes: int, blocks: int) -> str:
    """What exited: warps of the waiting blocks, else lanes of the waiting warps."""
    if warps:
        return f"{counted(warps, 'warp')} of {'that block' if blocks == 1 else 'those blocks'}"
    return f"{counted(lanes, 'lane')} of them"


def _short_blocks(blocks: list[list[WarpAt]], expected: int) -> tuple[list[str], int]:
    """Evidence of the blocks that lost warps (the first MAX_LISTED named), and how many warps
    they lost."""
    short = [(block, expected - len(block)) for block in blocks if len(block) < expected]
    evidence = [f"block {dim(block[0].cta.block_idx)}: {len(block)} of {expected} warps resident, "
                f"{missing} exited" for block, missing in short[:MAX_LISTED]]
    if len(short) > MAX_LISTED:
        evidence.append(f"{len(short) - MAX_LISTED} more blocks with exited warps")
    return evidence, sum(missing for _, missing in short)


def _retried(polling: Polling | None) -> str:
    """Where a warp is in a barrier's try-wait loop rather than at the barrier itself."""
    if polling is None:
        return ""
    return (f", in the loop +{polling.loop.head:#x}..+{polling.loop.tail:#x} that retries "
            f"{polling.load.opcode} at +{polling.load.address:#x} until it passes")


def _short_opcode(instruction: Instruction | None) -> str:
    """``BAR.SYNC.DEFER_BLOCKING`` -> ``BAR.SYNC``: the words a reader knows."""
    return instruction.op.shown if instruction else "a barrier"


def _exited_lanes(grid_warps: GridWarps, warps: list[WarpAt]) -> int:
    total = 0
    for at in warps:
        wanted = expected_lanes(at, grid_warps.grid)
        if wanted is not None:
            total += max(0, wanted - bin(at.warp.valid_lanes_mask & 0xFFFFFFFF).count("1"))
    return total


def _polling_wait(core: CoreDump, grid_warps: GridWarps, by_pc: ByPc, readings: Readings,
                  collective: bool) -> model.Wait | None:
    polled = _polled(readings)
    if not polled:
        return None
    pcs = [p.pc for p in polled]
    warps = sum(len(by_pc[pc]) for pc in pcs)
    evidence = _loop_evidence(by_pc, polled)
    first = polled[0]
    operand = address_operand(first.polling.load)
    address, root = None, None
    if operand is None:
        evidence.append(f"the load's address operand ({first.polling.load.text}) is "
                        "not read: polled address undetermined")
    else:
        sample = by_pc[first.pc][0]
        address = lane_address(core, sample, operand)
        evidence.append(address_evidence(sample, operand, address))
        origin = address_origin(core, grid_warps.grid, first.location, first.code,
                                first.polling, operand, sample, address)
        evidence += origin.evidence
        root = origin.root
        evidence += _spread(core, by_pc, polled)
    shown = f"{address:#x}" if address is not None else None
    polls = f"polling {shown}" if shown else "polling memory"
    polls += f" ({root.name})" if root else ""
    if collective:
        evidence.insert(0, f"the kernel's name ({grid_warps.grid.function}) is a collective's: "
                           "its loop waits for a peer's write")
        summary = f"{counted(warps, 'warp')} of a collective kernel waiting on a peer, {polls}"
        kind = "collective-wait"
    else:
        summary, kind = f"{counted(warps, 'warp')} spinning in a loop, {polls}", "polling-memory"
    return model.Wait(kind=kind, warps=warps, pcs=_pcs(pcs), summary=summary, evidence=evidence,
                      address=shown, root=root,
                      value_registers=list(first.polling.load.written_words))


@dataclass(frozen=True)
class _Polled:
    """A PC whose code polls memory, with its reading and what that reading found there."""

    pc: int
    reading: Reading
    location: CodeLocation
    code: FunctionCode
    polling: Polling


def _polled(readings: Readings) -> list[_Polled]:
    """The PCs read as polling, in order (read_pc gives each its function and its loop)."""
    return [_Polled(pc, r, r.location, r.code, r.polling) for pc, r in readings.items()
            if r.kind == "polling" and pc is not None and r.location is not None
            and r.code is not None and r.polling is not None]


def _loop_evidence(by_pc: ByPc, polled: list[_Polled]) -> list[str]:
    """Each polling loop once (its exit, the condition and the load it depends on), then the
    warps at each of its PCs."""
    evidence: list[str] = []
    seen: set[tuple[int, int]] = set()
    for p in polled:
        polling = p.polling
        loop = polling.loop
        if (loop.head, loop.tail) not in seen:
            seen.add((loop.head, loop.tail))
            evidence.append(f"loop +{loop.head:#x}..+{loop.tail:#x} ({len(loop.body)} "
                            f"instructions) leaves by "
                            f"{polling.exit.predicate} {polling.exit.opcode} at "
                            f"+{polling.exit.address:#x} on {polling.condition.opcode} at "
                            f"+{polling.condition.address:#x}, fed by {polling.load.opcode} at "
                            f"+{polling.load.address:#x}")
    evidence += [f"{counted(len(by_pc[p.pc]), 'warp')} at {_at(p.reading, p.pc)}" for p in polled]
    return evidence


def _spread(core: CoreDump, by_pc: ByPc, polled: list[_Polled]) -> list[str]:
    """Whether the warps poll one address or several (a flag per block, a slot per peer), from
    the registers of up to MAX_SAMPLED warps."""
    addresses: dict[int | None, int] = {}
    sampled = 0
    for p in polled:
        operand = address_operand(p.polling.load)
        for at in by_pc[p.pc]:
            if sampled == MAX_SAMPLED or operand is None:
                break
            address = lane_address(core, at, operand)
            addresses[address] = addresses.get(address, 0) + 1
            sampled += 1
    known = [a for a in addresses if a is not None]
    if len(known) <= 1:
        return [f"each of the {counted(sampled, 'warp')} sampled polls that address"] \
            if sampled > 1 else []
    listed = ", ".join(f"{a:#x}" for a in known[:MAX_LISTED])
    more = f" and {len(known) - MAX_LISTED} more" if len(known) > MAX_LISTED else ""
    return [f"{len(known)} distinct polled addresses among the {counted(sampled, 'warp')} sampled: "
            f"{listed}{more}"]


def _other_wait(grid_warps: GridWarps, by_pc: ByPc, readings: Readings,
                collective: bool) -> model.Wait | None:
    pcs = [pc for pc, r in readings.items() if r.kind == "other"]
    if not pcs:
        return None
    warps = sum(len(by_pc[pc]) for pc in pcs)
    evidence = []
    for pc in pcs[:MAX_LISTED]:
        reading = readings[pc]
        where = _at(reading, pc) if pc is not None else "no PC"
        evidence.append(f"{counted(len(by_pc[pc]), 'warp')} at {where}: {reading.why}")
    if len(pcs) > MAX_LISTED:
        evidence.append(f"{len(pcs) - MAX_LISTED} more PCs")
    summary = f"{counted(warps, 'warp')} elsewhere: no barrier or polling loop found where they stand"
    if collective:
        summary += " (a collective kernel: they may still wait on a peer)"
    return model.Wait(kind="other", warps=warps, pcs=_pcs(pcs), summary=summary, evidence=evidence)
