"""What the facets of a signature allow one to say, each with the facts it rests on, never more
than the data does: nothing from one crash, nothing from a field whose value some crashes lack
where that could change it, and "only on driver X" only where the index holds crashes of other
signatures on other drivers (else every crash of the fleet is on X, and it says nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .records import Facet, Reading, Rows
    from .store import Index

#: No reading rests on fewer crashes.
MIN_CRASHES = 2
#: "Suspect the device" needs this many crashes on the one GPU.
ONE_DEVICE_MIN = 3
#: "Only after uptime > N h" needs the shortest uptime at crash to be over an hour.
HOUR_S = 3600
#: At most this many "only with kernel K co-resident" readings (a kernel always resident, a
#: communication kernel, would otherwise repeat).
MAX_CO_RESIDENT = 3


def readings_of(index: Index, where: str, params: tuple, rows: Rows,
                fields: list[Facet]) -> list[Reading]:
    """The readings the FIELDS of the crashes (c) WHERE selects allow; ROWS is the table of their
    facet values (facets._copied)."""
    by = {facet.name: facet for facet in fields}
    found = [_not_one_device(by), _one_device(by), _one_driver(index, where, params, by),
             _after_uptime(index, rows)]
    return [reading for reading in found if reading is not None] + _co_resident(by)


def _reading(kind: str, text: str, evidence: list[str]) -> Reading:
    from .records import Reading

    return Reading(kind=kind, text=text, evidence=evidence)


def _distinct(facet: Facet) -> str:
    """How many distinct known values a facet has, "more than N" past the listed ones."""
    listed = sum(1 for v in facet.values if v.value is not None)
    return f"more than {listed}" if facet.others else str(listed)


def _spread(facet: Facet) -> int:
    """The distinct known values listed (past MAX_VALUES, at least that many)."""
    return sum(1 for v in facet.values if v.value is not None) + (1 if facet.others else 0)


def _total(facet: Facet) -> int:
    """The crashes a single-valued facet is taken over (its values' counts, unknown included)."""
    return sum(v.count for v in facet.values) + facet.others


def _not_one_device(by: dict[str, Facet]) -> Reading | None:
    pc, gpus, hosts, ranks = by["pc"], by["gpu_uuid"], by["host"], by["rank"]
    if not (pc.constant and pc.known >= MIN_CRASHES and
            (_spread(gpus) >= 2 or _spread(hosts) >= 2)):
        return None
    spread = [f"{_distinct(facet)} {what}" for facet, what in
              ((gpus, "GPUs"), (hosts, "hosts"), (ranks, "ranks")) if _spread(facet) >= 2]
    return _reading("not-one-device", f"same PC across {', '.join(spread)}: not one bad device", [
        f"pc {pc.values[0].value} in all {pc.known} crashes whose PC is known",
        f"{_distinct(gpus)} GPU UUID(s) over {gpus.known} crashes whose GPU is known",
        f"{_distinct(hosts)} host(s), {_distinct(ranks)} rank(s)"])


def _one_device(by: dict[str, Facet]) -> Reading | None:
    gpus = by["gpu_uuid"]
    if not (gpus.constant and gpus.known == _total(gpus) >= ONE_DEVICE_MIN):
        return None
    return _reading("one-device", "one GPU serial only: suspect the device", [
        f"GPU {gpus.values[0].value} in all {gpus.known} crashes",
        f"host(s): {', '.join(str(v.value) for v in by['host'].values if v.value)}"])


def _one_driver(index: Index, where: str, params: tuple, by: dict[str, Facet]) -> Reading | None:
    driver = by["driver"]
    if not (driver.constant and driver.known == _total(driver) >= MIN_CRASHES):
        return None
    value = driver.values[0].value
    # a few other drivers tell that the fleet runs others; the first found end the scan
    elsewhere = [row[0] for row in index.backend.execute(
        f"SELECT DISTINCT c.driver FROM crashes c WHERE c.driver <> ? AND NOT ({where}) LIMIT 3",
        (value, *params)).fetchall()]
    if not elsewhere:  # the fleet's other crashes say nothing of other drivers
        return None
    return _reading("one-driver", f"only on driver {value}", [
        f"driver {value} in all {driver.known} crashes",
        f"other signatures' crashes ran on other drivers: {', '.join(sorted(elsewhere))}"])


def _after_uptime(index: Index, rows: Rows) -> Reading | None:
    shortest, known, total = index.backend.execute(
        f"SELECT min(uptime_exact), count(uptime_exact), count(*) FROM {rows.sql} r",
        rows.params).fetchone()
    if known < MIN_CRASHES or known < total or shortest <= HOUR_S:
        return None
    return _reading("after-uptime", f"only after uptime > {(shortest - 1) // HOUR_S} h", [
        f"shortest uptime at crash {shortest // HOUR_S} h {shortest % HOUR_S // 60} min, over "
        f"all {known} crashes (from the server's start to its first failure)"])


def _co_resident(by: dict[str, Facet]) -> list[Reading]:
    facet = by["co_resident"]
    if facet.known < MIN_CRASHES or facet.known < _total(by["pc"]):
        return []
    always = [v.value for v in facet.values if v.count == facet.known][:MAX_CO_RESIDENT]
    return [_reading("co-resident", f"only with kernel {kernel} co-resident", [
        f"{kernel} was resident on the faulting GPU in all {facet.known} crashes"]) for kernel in always]
