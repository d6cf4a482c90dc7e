"""The advice for one crash, from its evidence, by rules tried in the order of what it costs to
ignore them: a GPU that is failing (drain) before a crash loop or a fatal crash (stop), those
before a known workaround, and restart last. The first rule that applies gives the action and
the one reason it rests on; none applying is a restart, said with what was (not) found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..notation import counted
from ..report.advice import Advice

if TYPE_CHECKING:  # inspect of a dump alone weighs no Xid: it need not import the catalogue
    from ..incidents.xidcatalog import XidKind
    from ..report.model import FixStatus, KnownFix

HARDWARE = "hardware"
#: NVIDIA's immediate actions that leave the GPU in service.
_APPLICATION_ONLY = ("IGNORE", "RESTART_APP")


@dataclass(frozen=True)
class ClassedXid:
    """An Xid line the crash came with, with what NVIDIA's catalogue says of its number
    (crashlab.incidents.xidcatalog)."""

    xid: int
    #: the GPU as the operator acts on it (UUID, PCI address, nvidia-smi and CUDA_VISIBLE_DEVICES
    #: indices) where the run placed it, else what the line's parentheses name (the PCI address)
    device: str
    kind: XidKind
    #: the line's own word that the GPU must be reset or drained (Xid 94/95's RST or D-RST,
    #: Xid 154's recovery action), as crashlab.incidents.xiddecode reads it; None where silent
    driver_says: str | None = None

    @property
    def drains(self) -> bool:
        """The GPU is to be taken out of service: a hardware Xid whose immediate action NVIDIA
        gives as more than ignoring it (a row remapped, a single-bit ECC rate) or restarting the
        application (a contained ECC error), any Xid whose action resets the GPU or reboots the
        node, or a line that says the GPU needs it."""
        kind = self.kind
        return self.driver_says is not None or kind.takes_gpu_out_of_service or (
            kind.origin == HARDWARE and kind.immediate_action not in _APPLICATION_ONLY)


@dataclass(frozen=True)
class GpuHistory:
    """What the index holds of the crash's GPU: the signatures crashed on it and on no other
    GPU, and how many other GPUs the index knows (a fleet of one GPU tells nothing)."""

    gpu: str  # its UUID
    only_here: tuple[str, ...]  # signature hashes, this crash's included where it is one
    other_gpus: int


@dataclass(frozen=True)
class RecentRestarts:
    """How often serve restarted this server in the last MINUTES before this crash, and the most
    it may (``crashlab serve --crash-loop N/M``): a crash after that many is a crash loop."""

    restarts: int
    limit: int
    minutes: float


@dataclass(frozen=True)
class Evidence:
    """What is known of one crash: each part left at its default where its source was not read
    (a lone dump has no Xid, no index history and no restarts)."""

    kind: str = "crash"  # crash, or dumps (a hang's dumps collected)
    xids: tuple[ClassedXid, ...] = ()
    fix: KnownFix | None = None  # the known-fixes table's row for the faulting kernel
    fix_status: FixStatus = "no-known-fix"
    version: str | None = None  # the running version of the fix's artifact
    earlier: int | None = None  # earlier crashes of the signature in the index; None: not asked
    gpu: GpuHistory | None = None
    recent: RecentRestarts | None = None


def advise(evidence: Evidence) -> Advice:
    for rule in RULES:
        found = rule(evidence)
        if found is not None:
            return found
    return _restart(evidence)


def _hardware_xid(evidence: Evidence) -> Advice | None:
    bad = next((x for x in evidence.xids if x.drains), None)
    if bad is None:
        return None
    kind = bad.kind
    named = f"Xid {bad.xid}" + (f" ({kind.description})" if kind.description else "")
    if bad.driver_says is not None:
        said = f"{named}: the driver says {bad.driver_says}"
    elif kind.origin == HARDWARE:
        said = f"{named} is a hardware fault, NVIDIA's action {kind.immediate_action}"
    else:
        said = f"{named}: NVIDIA's action {kind.immediate_action} takes the GPU out of service"
    return Advice(action="drain", gpu=bad.device,
                  reason=f"{said}; a restart on this GPU meets it again")


def _one_gpu_many_signatures(evidence: Evidence) -> Advice | None:
    history = evidence.gpu
    if history is None or len(history.only_here) < 2 or history.other_gpus < 1:
        return None
    return Advice(action="drain", gpu=history.gpu,
                  reason=f"{len(history.only_here)} different signatures "
                         f"({', '.join(history.only_here)}) crashed on this GPU and on none of the "
                         f"index's {counted(history.other_gpus, 'other GPU')}: the GPU is what "
                         "they share")


def _crash_loop(evidence: Evidence) -> Advice | None:
    recent = evidence.recent
    if recent is None or recent.restarts < recent.limit:
        return None
    return Advice(action="stop",
                  reason=f"a crash loop: it crashed again after "
                         f"{counted(recent.restarts, 'restart')} within {recent.minutes:g} min "
                         f"(the limit is {recent.limit})")


def _fatal(evidence: Evidence) -> Advice | None:
    fix = evidence.fix
    if fix is None or not fix.fatal or evidence.fix_status == "fixed-in-this":
        return None
    return Advice(action="stop", link=fix.link,
                  reason=f"the known-fixes table marks this crash fatal (a restart brings it "
                         f"back): {fix.summary}")


def _workaround(evidence: Evidence) -> Advice | None:
    fix, status = evidence.fix, evidence.fix_status
    if fix is None or status == "fixed-in-this":
        return None
    if status == "fixed-in-later":
        return Advice(action="workaround", workaround=f"{fix.artifact} {fix.fixed_in}",
                      link=fix.link,
                      reason=f"a fix is in {fix.artifact} {fix.fixed_in}, this runs "
                             f"{evidence.version}: {fix.summary}")
    if fix.workaround is None:
        return None
    released = (f"a fix is in {fix.artifact} {fix.fixed_in}" if fix.fixed_in else
                f"no release of {fix.artifact} holds a fix yet")
    return Advice(action="workaround", workaround=fix.workaround, link=fix.workaround_source,
                  reason=f"{fix.summary}; {released}")


def _restart(evidence: Evidence) -> Advice:
    what = "a hang" if evidence.kind == "dumps" else "a crash"
    software = sorted({x.xid for x in evidence.xids if x.kind.origin == "software"})
    if software:
        what += f" (Xid {', '.join(map(str, software))}: software)"
    if evidence.earlier:
        what += f", seen {counted(evidence.earlier, 'time')} before"
    elif evidence.earlier == 0:
        what += ", the first of its signature in the index"
    fix = evidence.fix
    if fix is not None and evidence.fix_status == "fixed-in-this":
        said = f"{fix.artifact} {evidence.version} holds the known fix: another bug, or a regression"
    elif fix is not None and fix.fixed_in is not None:  # the running version is unknown
        said = f"a fix is in {fix.artifact} {fix.fixed_in}, the running version is unknown ({fix.link})"
    elif fix is not None:
        said = f"no release holds a fix yet ({fix.link})"
    else:
        said = "no known fix"
    return Advice(action="restart", reason=f"{what}; {said}")


RULES: tuple[Callable[[Evidence], Advice | None], ...] = (
    _hardware_xid, _one_gpu_many_signatures, _crash_loop, _fatal, _workaround)
