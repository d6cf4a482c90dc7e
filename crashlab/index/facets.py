"""What stays and what varies across the crashes of a signature (or of a coarse key): per field,
its distinct values with their counts, counted by the database (one GROUP BY per field, the same
SQL on SQLite and PostgreSQL), at most MAX_VALUES listed, the rest counted in ``others``.

The readings the facets allow are in readings.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .readings import readings_of

if TYPE_CHECKING:
    from .records import Facet, Facets
    from .store import Index

#: How many distinct values a facet lists; the crashes of the others are counted, not listed.
MAX_VALUES = 8

#: Each facet: its name and the SQL of its value on a crash (c), in the order they are shown.
#: Uptime is counted by whole hours (the integer division holds on both backends).
FIELDS = (("pc", "c.pc"), ("function_offset", "c.function_offset"), ("kernel", "c.kernel"),
          ("exception", "c.exception"), ("source_line", "c.source_line"), ("xid", "c.xid"),
          ("esr", "c.esr"), ("rank", "c.rank"), ("gpu_index", "c.gpu_index"),
          ("gpu_uuid", "c.gpu_uuid"), ("pci_address", "c.pci_address"), ("host", "c.host"),
          ("driver", "c.driver"), ("cuda", "c.cuda"), ("torch", "c.torch"),
          ("sglang", "c.sglang"), ("flashinfer", "c.flashinfer"), ("sgl_kernel", "c.sgl_kernel"),
          ("model", "c.model"), ("tp_size", "c.tp_size"), ("pp_size", "c.pp_size"),
          ("ep_size", "c.ep_size"), ("server_role", "c.server_role"),
          ("uptime_h", "c.uptime_s / 3600"), ("requests_in_flight", "c.requests_in_flight"),
          ("owner", "c.owner"))


def scope(column: str, key: str) -> tuple[str, tuple]:
    """The SQL condition on crashes c of one signature ("hash") or coarse key ("coarse")."""
    if column == "hash":
        return "c.signature_hash = ?", (key,)
    return "c.signature_hash IN (SELECT hash FROM signatures WHERE coarse = ?)", (key,)


def facets_of(index: Index, key: str, coarse: bool = False) -> Facets:
    """The facets of the crashes of signature KEY (a full hash), or with COARSE of coarse key
    KEY, and the readings they allow."""
    from .records import Facets

    where, params = scope("coarse" if coarse else "hash", key)
    db = index.backend
    total, *known = db.execute(  # count(x) counts the crashes whose x is known
        f"SELECT count(*), {', '.join(f'count({sql})' for _, sql in FIELDS)} FROM crashes c "
        f"WHERE {where}", params).fetchone()
    fields = [_facet(name, db.execute(
        f"SELECT {sql}, count(*) FROM crashes c WHERE {where} GROUP BY {sql} "
        f"ORDER BY count(*) DESC, {sql} LIMIT {MAX_VALUES}", params).fetchall(), total, count)
        for (name, sql), count in zip(FIELDS, known, strict=True)]
    fields.append(_facet("co_resident", db.execute(
        "SELECT k.kernel, count(*) FROM co_resident_kernels k JOIN crashes c ON c.id = k.crash_id "
        f"WHERE {where} GROUP BY k.kernel ORDER BY count(*) DESC, k.kernel LIMIT {MAX_VALUES}",
        params).fetchall(), total, _with_co_resident(index, where, params), many=True))
    fields.sort(key=lambda facet: not facet.constant)  # stable: constant first, in FIELDS' order
    return Facets(crashes=total, fields=fields, readings=readings_of(index, where, params, fields))


def _facet(name: str, rows: list[tuple], total: int, known: int, many: bool = False) -> Facet:
    """A facet from its GROUP BY rows (value, count), most first, over TOTAL crashes of which
    KNOWN have a value. A field of MANY values per crash (co-resident kernels) counts crashes
    per value and is constant where one value is in every crash that has any."""
    from .records import Facet, FacetValue

    values = [FacetValue(value=_text(name, value), count=count) for value, count in rows]
    if many:
        return Facet(name=name, known=known, values=values,
                     constant=known > 0 and any(v.count == known for v in values))
    listed = [v for v in values if v.value is not None]
    return Facet(name=name, known=known, values=values,
                 others=total - sum(v.count for v in values),
                 constant=len(listed) == 1 and listed[0].count == known > 0)


def _with_co_resident(index: Index, where: str, params: tuple) -> int:
    return index.backend.execute(
        f"SELECT count(*) FROM crashes c WHERE {where} AND EXISTS "
        "(SELECT 1 FROM co_resident_kernels k WHERE k.crash_id = c.id)", params).fetchone()[0]


def _text(name: str, value: object) -> str | None:
    if value is None:
        return None
    if name == "uptime_h":
        return f"{value}-{int(value) + 1} h"  # type: ignore[call-overload]
    if name == "function_offset":
        return hex(value)  # type: ignore[arg-type]
    return str(value)
