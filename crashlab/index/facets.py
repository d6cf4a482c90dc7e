"""What stays and what varies across the crashes of a signature (or of a coarse key): per field,
its distinct values with their counts, counted by the database (one GROUP BY per field over a
temporary copy of the crashes' facet values, or over the same SELECT as a subquery where the index
is open read-only; the same SQL on SQLite and PostgreSQL), at most MAX_VALUES listed, the rest
counted in ``others``.

The readings the facets allow are in readings.py.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .readings import readings_of

if TYPE_CHECKING:
    from .records import Facet, Facets, Rows
    from .store import Index

#: How many distinct values a facet lists; the crashes of the others are counted, not listed.
MAX_VALUES = 8

#: Each facet: its name and the SQL of its value on a crash (c), in the order they are shown.
#: Uptime is counted by whole hours, each value the hour's start in seconds (the integer
#: division holds on both backends): 7200 counts the crashes after 2 to 3 hours of uptime.
FIELDS = (("pc", "c.pc"), ("function_offset", "c.function_offset"), ("kernel", "c.kernel"),
          ("exception", "c.exception"), ("source_line", "c.source_line"), ("xid", "c.xid"),
          ("esr", "c.esr"), ("rank", "c.rank"), ("gpu_index", "c.gpu_index"),
          ("gpu_uuid", "c.gpu_uuid"), ("pci_address", "c.pci_address"), ("host", "c.host"),
          ("driver", "c.driver"), ("cuda", "c.cuda"), ("torch", "c.torch"),
          ("sglang", "c.sglang"), ("flashinfer", "c.flashinfer"), ("sgl_kernel", "c.sgl_kernel"),
          ("model", "c.model"), ("tp_size", "c.tp_size"), ("pp_size", "c.pp_size"),
          ("ep_size", "c.ep_size"), ("server_role", "c.server_role"),
          ("uptime_s", "c.uptime_s / 3600 * 3600"), ("requests_in_dumps", "c.requests_in_dumps"),
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
    with _copied(index, where, params) as rows:
        total, *known = db.execute(  # count(x) counts the crashes whose x is known
            f"SELECT count(*), {', '.join(f'count({name})' for name, _ in FIELDS)} "
            f"FROM {rows.sql} r", rows.params).fetchone()
        fields = [_facet(name, db.execute(
            f"SELECT {name}, count(*) FROM {rows.sql} r GROUP BY {name} "
            f"ORDER BY count(*) DESC, {name} IS NULL, {name} LIMIT {MAX_VALUES}", rows.params).fetchall(),
            total, count)
            for (name, _), count in zip(FIELDS, known, strict=True)]
        fields.append(_facet("co_resident", db.execute(
            f"SELECT k.kernel, count(*) FROM co_resident_kernels k JOIN {rows.sql} r "
            f"ON r.id = k.crash_id GROUP BY k.kernel ORDER BY count(*) DESC, k.kernel "
            f"LIMIT {MAX_VALUES}", rows.params).fetchall(), total, db.execute(
            f"SELECT count(*) FROM {rows.sql} r WHERE EXISTS (SELECT 1 FROM co_resident_kernels k "
            "WHERE k.crash_id = r.id)", rows.params).fetchone()[0], many=True))
        fields.sort(key=lambda facet: not facet.constant)  # stable: constant first, as FIELDS
        readings = readings_of(index, where, params, rows, fields)
    return Facets(crashes=total, fields=fields, readings=readings)


_copies = itertools.count()


@contextmanager
def _copied(index: Index, where: str, params: tuple) -> Iterator[Rows]:
    """A temporary table holding each selected crash's id and facet values, dropped after. Each
    GROUP BY reads it instead of the crashes themselves: reading the wide crash rows of 20,000
    crashes once per field took seconds; copied once, the grouping takes a tenth. A read-only
    index (crashlab ui) cannot make one on PostgreSQL, whose read-only transactions refuse every
    CREATE: there each query runs the SELECT again, slower but writing nothing."""
    columns = ", ".join(f"{sql} AS {field}" for field, sql in FIELDS)
    select = f"SELECT c.id, c.uptime_s AS uptime_exact, {columns} FROM crashes c WHERE {where}"
    from .records import Rows

    if index.read_only:
        yield Rows(f"({select})", params)
        return
    db = index.backend
    name = f"crashlab_facets_{os.getpid()}_{next(_copies)}"
    db.execute(f"CREATE TEMPORARY TABLE {name} AS {select}", params)
    try:
        yield Rows(name)
    finally:
        db.execute(f"DROP TABLE {name}")


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


def _text(name: str, value: object) -> str | None:
    if value is None:
        return None
    if name == "function_offset":
        return hex(value)  # type: ignore[arg-type]
    return str(value)


def shown_value(name: str, value: str | None) -> str:
    """A facet's value as the views print it: an uptime's hour as "2-3 h", unknown as such."""
    if value is None:
        return "unknown"
    if name == "uptime_s" and value.isdigit():
        hours = int(value) // 3600
        return f"{hours}-{hours + 1} h"
    return value
