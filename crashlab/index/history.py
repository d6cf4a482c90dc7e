"""What the index knows that the advice weighs (crashlab.advice): how often a crash's signature
was seen before it, and what crashed on its GPU, where the index knows the GPU's UUID.

A COLLATERAL dump (a rank waiting in a collective for the faulting one) is left out of the GPU's
signatures: it is another rank's fault seen from this GPU, not this GPU's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..advice.decide import GpuHistory
from .location import resolve
from .store import Index


@dataclass(frozen=True)
class History:
    earlier: int  # crashes of the signature that first failed before this one
    gpu: GpuHistory | None  # None where the crash's GPU UUID is unknown


def of_crash(index: Index, crash_id: int) -> History:
    db = index.backend
    signature, at, uuid = db.execute(
        "SELECT signature_hash, COALESCE(first_failure_at, crashed_at), gpu_uuid FROM crashes "
        "WHERE id = ?", (crash_id,)).fetchone()
    earlier = db.execute(
        "SELECT count(*) FROM crashes WHERE signature_hash = ? AND id <> ? AND "
        "COALESCE(first_failure_at, crashed_at) < ?", (signature, crash_id, at)).fetchone()[0]
    if uuid is None:
        return History(earlier=earlier, gpu=None)
    only_here = [row[0] for row in db.execute(
        "SELECT DISTINCT c.signature_hash FROM crashes c WHERE c.gpu_uuid = ? AND "
        "COALESCE(c.label, '') <> 'COLLATERAL' AND NOT EXISTS (SELECT 1 FROM crashes o WHERE "
        "o.signature_hash = c.signature_hash AND COALESCE(o.label, '') <> 'COLLATERAL' AND "
        "o.gpu_uuid IS NOT NULL AND o.gpu_uuid <> ?) ORDER BY c.signature_hash",
        (uuid, uuid)).fetchall()]
    others = db.execute("SELECT count(DISTINCT gpu_uuid) FROM crashes WHERE gpu_uuid <> ?",
                        (uuid,)).fetchone()[0]
    return History(earlier=earlier, gpu=GpuHistory(gpu=uuid, only_here=tuple(only_here),
                                                   other_gpus=others))


def of_run(db: str | None, runs_dir: Path, run_dir: Path, incarnation: int) -> History | None:
    """The history of a serve incarnation's crash as the index recorded it (its FAULT dump's,
    else its first); None where the index holds none of it or cannot be read: the recording
    just before said why, and the advice stands without the history."""
    address = resolve(db, runs_dir)
    try:
        with Index(address, create=False, read_only=True) as index:
            found = index.backend.execute(
                "SELECT id FROM crashes WHERE run_dir = ? AND incarnation = ? "
                "ORDER BY CASE WHEN label = 'FAULT' THEN 0 ELSE 1 END, id LIMIT 1",
                (str(Path(run_dir).absolute()), incarnation)).fetchone()
            return of_crash(index, found[0]) if found else None
    except Exception:  # noqa: BLE001 - the advice stands without the index's history
        return None

