"""The fleet's view of one crash for ``crashlab report``: where the index already holds the
crash (serve recorded it), the facets of its signature across every crash of it, and the
triage it keeps of a coredump (so that report does not inspect it again). The report stands
without them: no index, or an index that cannot be read, costs at most one warning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .copies import sha256_of
from .facets import facets_of
from .location import first_line, resolve, shown
from .store import Index, NoIndex
from .triage import of_dump

if TYPE_CHECKING:
    from ..report.model import TriageReport
    from .records import Facets, NewCrash


def facets_of_recorded(crash: NewCrash, db: str | None, runs_dir: Path,
                       warn: Callable[[str], None]) -> Facets | None:
    """The facets of CRASH's signature, where the index (DB, or the default one) holds CRASH;
    None where it does not, where there is no index, or where it cannot be read (one warning)."""
    address = resolve(db, runs_dir, warn)
    try:
        with Index(address, create=False) as index:
            crash_id = index.recorded_id(crash)
            found = None if crash_id is None else index.backend.execute(
                "SELECT signature_hash FROM crashes WHERE id = ?", (crash_id,)).fetchone()
            return facets_of(index, found[0]) if found else None
    except NoIndex:
        return None
    except Exception as exc:  # noqa: BLE001 - the report must stand whatever the index does
        warn(f"warning: the fleet's facets were not read from the index {shown(address)}: "
             f"{first_line(exc, address)}")
        return None


def kept_triage(core: Path, db: str | None, runs_dir: Path) -> tuple[TriageReport, str] | None:
    """The triage the index (DB, or the default one) keeps of the coredump CORE, known by its
    contents, and how it names it ("crash N of INDEX, made by crashlab V"); None where it keeps
    none, or where there is no index or it cannot be read (then the dump is inspected, as it
    would be without an index: nothing to warn of)."""
    address = resolve(db, runs_dir, lambda _: None)  # _fleet says where an old index lies
    try:
        with Index(address, create=False, read_only=True) as index:
            found = of_dump(index, sha256_of(core))
            if found is None:
                return None
            crash_id, kept = found
            return kept.report, f"crash {crash_id} of {index.address}, made by crashlab {kept.version}"
    except Exception:  # noqa: BLE001 - an index of an older schema, or none: the dump is read
        return None
