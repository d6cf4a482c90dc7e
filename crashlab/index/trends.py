"""Crashes counted over time and by uptime, for the web view's home and signature pages.

The database counts (one ``sum(CASE ...)`` per time bucket, the same SQL on SQLite and
PostgreSQL), so a page over 100,000 crashes moves a few rows, not the crashes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .store import iso

if TYPE_CHECKING:
    from .store import Index


@dataclass(frozen=True)
class SignatureTrend:
    """One signature's crashes within a window, and how many fell in each of its buckets."""

    hash: str
    title: str
    count: int
    first_seen: str  # ISO 8601, UTC
    last_seen: str
    buckets: list[int]  # oldest first


@dataclass(frozen=True)
class History:
    """A signature's crashes per bucket of time, from its first crash to its last."""

    starts: list[float]  # each bucket's start, seconds since the epoch
    counts: list[int]


@dataclass(frozen=True)
class UptimeHour:
    """How many crashes came after HOUR full hours of their server's uptime."""

    hour: int
    crashes: int


def edges(start: float, end: float, buckets: int) -> list[float]:
    """BUCKETS equal buckets from START to END (seconds): their starts, then one past END."""
    width = max(end - start, 1.0) / buckets
    return [start + i * width for i in range(buckets)] + [end + 1]


def _bucket_sql(bounds: list[float]) -> tuple[str, list[float]]:
    """One count per bucket of [bounds[i], bounds[i+1]) of c.crashed_at, as SQL columns."""
    columns = ", ".join("sum(CASE WHEN c.crashed_at >= ? AND c.crashed_at < ? THEN 1 ELSE 0 END)"
                        for _ in bounds[1:])
    params = [value for pair in zip(bounds, bounds[1:], strict=False) for value in pair]
    return columns, params


def oldest(index: Index) -> float | None:
    """When the index's first crash happened; None for an empty index."""
    return index.backend.execute("SELECT min(crashed_at) FROM crashes").fetchone()[0]


def top_signatures(index: Index, start: float, end: float, buckets: int,
                   limit: int) -> list[SignatureTrend]:
    """The LIMIT signatures with the most crashes from START, each counted over BUCKETS buckets
    of START to END; most crashes first."""
    columns, bucket_params = _bucket_sql(edges(start, end, buckets))
    rows = index.backend.execute(
        f"SELECT c.signature_hash, s.title, count(*), min(c.crashed_at), max(c.crashed_at), "
        f"{columns} FROM crashes c JOIN signatures s ON s.hash = c.signature_hash "
        "WHERE c.crashed_at >= ? GROUP BY c.signature_hash, s.title "
        "ORDER BY count(*) DESC, c.signature_hash LIMIT ?",
        (*bucket_params, start, limit)).fetchall()
    return [SignatureTrend(hash=row[0], title=row[1], count=row[2], first_seen=iso(row[3]),
                           last_seen=iso(row[4]), buckets=[int(n) for n in row[5:]])
            for row in rows]


def history(index: Index, key: str, buckets: int) -> History:
    """Signature KEY's crashes over BUCKETS buckets of its first to its last crash."""
    first, last = index.backend.execute(
        "SELECT min(crashed_at), max(crashed_at) FROM crashes WHERE signature_hash = ?",
        (key,)).fetchone()
    bounds = edges(first, last, buckets)
    columns, params = _bucket_sql(bounds)
    counts = index.backend.execute(f"SELECT {columns} FROM crashes c WHERE c.signature_hash = ?",
                                   (*params, key)).fetchone()
    return History(starts=bounds[:-1], counts=[int(n or 0) for n in counts])


def uptime_hours(index: Index, key: str) -> list[UptimeHour]:
    """Signature KEY's crashes whose uptime is known, per hour of uptime: counted by the
    database without the facet's limit of listed values, so no hour is left out."""
    return [UptimeHour(hour=int(hour), crashes=count) for hour, count in index.backend.execute(
        "SELECT c.uptime_s / 3600, count(*) FROM crashes c WHERE c.signature_hash = ? "
        "AND c.uptime_s IS NOT NULL GROUP BY c.uptime_s / 3600", (key,)).fetchall()]
