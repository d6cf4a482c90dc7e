"""Which marked lane's access broke the bound. The driver marks a warp exception (Out-of-range,
Misaligned, Illegal Address) on every lane of the warp and does not say which lane's access
faulted, so each lane's access is judged on its own registers; the lanes are grouped by verdict,
and the verdict that explains the exception heads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..coredump.model import CTA, Lane, Warp
from ..report import model
from ..sass.access import AccessKind

#: verdicts that say the access itself is wrong: a lane with one of these can have faulted
BREAKING = ("out-of-bounds", "null", "not-a-pointer", "misaligned")
#: the order groups are listed in after the headline's
_ORDER = (*BREAKING, "undetermined", "inside")
#: which verdicts each exception is raised for, by CUDBG name less its prefix (a name not here takes any that
#: breaks): a misaligned exception is explained by a misaligned access, an out-of-range one by
#: an access past a window's bound, an illegal address by a pointer that is null, not one, or
#: past a bound; the sm_90 Illegal Instruction at a shared access whose rank bits name a CTA
#: the cluster lacks is an out-of-bounds one
_EXPLAINS = {
    "WARP_MISALIGNED_ADDRESS": ("misaligned",),
    "LANE_MISALIGNED_ADDRESS": ("misaligned",),
    "WARP_OUT_OF_RANGE_ADDRESS": ("out-of-bounds",),
    "CLUSTER_OUT_OF_RANGE_ADDRESS": ("out-of-bounds",),
    "WARP_ILLEGAL_ADDRESS": ("null", "not-a-pointer", "out-of-bounds"),
    "LANE_ILLEGAL_ADDRESS": ("null", "not-a-pointer", "out-of-bounds"),
    "DEVICE_ILLEGAL_ADDRESS": ("null", "not-a-pointer", "out-of-bounds"),
    "WARP_INVALID_ADDRESS_SPACE": ("null", "not-a-pointer", "out-of-bounds"),
    "WARP_ILLEGAL_INSTRUCTION": ("out-of-bounds",),
}
#: the spaces each exception's faulting access goes to, to choose the side of a copy
_SPACES = {
    "WARP_OUT_OF_RANGE_ADDRESS": ("shared", "local", "constant"),
    "CLUSTER_OUT_OF_RANGE_ADDRESS": ("shared",),
    "WARP_ILLEGAL_ADDRESS": ("global", "generic"),
    "LANE_ILLEGAL_ADDRESS": ("global", "generic"),
    "DEVICE_ILLEGAL_ADDRESS": ("global", "generic"),
    "WARP_INVALID_ADDRESS_SPACE": ("global", "generic"),
}


@dataclass
class Reading:
    """One memory operand as one lane's registers give it."""

    position: int
    operand: str
    access: AccessKind
    space: model.MemorySpace
    #: the address, or the window offset for shared and local memory
    address: int | None
    where: int | None
    provenance: str | None
    verdict: model.Verdict


@dataclass
class Judgement:
    """One marked lane: its coordinates, the operand chosen as the one that faulted, the others."""

    cta: CTA
    warp: Warp
    lane: Lane
    reading: Reading
    others: list[Reading]

    @property
    def order(self) -> tuple[int, int, int]:
        """cuda-gdb's order: SM, warp, lane, by id."""
        return (self.cta.sm.sm_id, self.warp.warp_id, self.lane.ln)

    def access(self) -> model.LaneAccess:
        address = self.reading.address
        return model.LaneAccess.model_construct(lane=self.lane.ln, warp=self.warp.warp_id, sm=self.cta.sm.sm_id,
                                block_idx=self.cta.block_idx, thread_idx=self.lane.thread_idx,
                                address=None if address is None else f"{address:#x}")


def _suffix(exception: str) -> str:
    return exception.removeprefix("CUDBG_EXCEPTION_")


def explains(kind: str, exception: str) -> bool:
    """Whether a verdict of ``kind`` is one that raises ``exception`` (its CUDBG name)."""
    return kind in _EXPLAINS.get(_suffix(exception), BREAKING)


def faulting_side(readings: list[Reading], exception: str) -> Reading:
    """Of an instruction's memory operands, the one that faulted: one whose verdict explains the
    exception, then one whose verdict breaks a bound, then one in the space the exception is
    raised for, then the first."""
    spaces = _SPACES.get(_suffix(exception), ())
    return min(readings, key=lambda r: (not explains(r.verdict.kind, exception),
                                        r.verdict.kind not in BREAKING, r.space not in spaces,
                                        r.position))


def culprit(judged: list[Judgement], exception: str, focus: Lane | None) -> tuple[Judgement, bool]:
    """(the lane to explain, whether its access breaks a bound): the first lane, in cuda-gdb's
    order, whose verdict explains the exception, else the first whose verdict breaks a bound,
    else the lane cuda-gdb focuses."""
    ranked = sorted(judged, key=lambda j: (not explains(j.reading.verdict.kind, exception),
                                           j.reading.verdict.kind not in BREAKING, j.order))
    best = ranked[0]
    if best.reading.verdict.kind in BREAKING:
        return best, True
    focused = next((j for j in judged if focus is not None and j.lane is focus), best)
    return focused, False


def grouped(judged: list[Judgement], headline: str) -> list[model.LaneVerdict]:
    """The lanes by verdict, the headline's group first, each with its first lane in cuda-gdb's
    order and, for out-of-bounds, how far past the bound its accesses end."""
    groups: dict[model.VerdictKind, list[Judgement]] = {}
    for judgement in sorted(judged, key=lambda j: j.order):
        groups.setdefault(judgement.reading.verdict.kind, []).append(judgement)
    order = sorted(groups, key=lambda kind: (kind != headline, _ORDER.index(kind)))
    out = []
    for kind in order:
        members = groups[kind]
        past = [j.reading.verdict.past_bound for j in members
                if j.reading.verdict.past_bound is not None]
        out.append(model.LaneVerdict.model_construct(
            kind=kind,
            lanes=sorted({j.lane.ln for j in members}), count=len(members),
            warps=len({(j.cta.sm.sm_id, j.warp.warp_id) for j in members}),
            first=members[0].access(),
            past_bound=[min(past), max(past)] if past else None))
    return out

