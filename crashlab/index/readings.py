"""What the facets of a signature allow one to say, each with the facts it rests on, never more
than the data does: nothing from one crash, nothing from a field whose value some crashes lack
where that could change it, and "only on driver X" (or "suspect the device") only where the index
holds crashes of other signatures on other drivers (GPUs): else every crash of the fleet is on X,
and it says nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..notation import counted

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
    found = [_not_one_device(index, rows, by), _one_device(index, where, params, by),
             _one_driver(index, where, params, by),
             _after_uptime(index, rows)]
    return [reading for reading in found if reading is not None] + _co_resident(by)


def _reading(kind: str, text: str, evidence: list[str]) -> Reading:
    from .records import Reading

    return Reading(kind=kind, text=text, evidence=evidence)


def _total(facet: Facet) -> int:
    """The crashes a single-valued facet is taken over (its values' counts, unknown included)."""
    return sum(v.count for v in facet.values) + facet.others


def _known_value(facet: Facet) -> str | None:
    """The value of a constant facet: its one known value (the unknown row may sort before it)."""
    return next(v.value for v in facet.values if v.value is not None)


def _not_one_device(index: Index, rows: Rows, by: dict[str, Facet]) -> Reading | None:
    """The devices are counted over the crashes whose PC is the constant one: a crash of unknown
    PC on another GPU says nothing of whether that PC faults there."""
    pc = by["pc"]
    if not (pc.constant and pc.known >= MIN_CRASHES):
        return None
    value = _known_value(pc)
    gpus, hosts, ranks, gpus_known = index.backend.execute(
        "SELECT count(DISTINCT gpu_uuid), count(DISTINCT host), count(DISTINCT rank), "
        f"count(gpu_uuid) FROM {rows.sql} r WHERE pc = ?", (*rows.params, value)).fetchone()
    if gpus < 2 and hosts < 2:
        return None
    spread = [f"{count} {what}" for count, what in ((gpus, "GPUs"), (hosts, "hosts"),
                                                    (ranks, "ranks")) if count >= 2]
    return _reading("not-one-device", f"same PC across {', '.join(spread)}: not one bad device", [
        f"pc {value} in all {pc.known} crashes whose PC is known",
        f"{counted(gpus, 'GPU UUID')} over the {gpus_known} of them whose GPU is known",
        f"{counted(hosts, 'host')}, {counted(ranks, 'rank') if ranks else 'rank unknown'}"])


def _one_device(index: Index, where: str, params: tuple, by: dict[str, Facet]) -> Reading | None:
    gpus = by["gpu_uuid"]
    if not (gpus.constant and gpus.known == _total(gpus) >= ONE_DEVICE_MIN):
        return None
    value = _known_value(gpus)
    # a fleet of one GPU (a developer's box) has every crash on it: that says nothing
    if not _elsewhere(index, "gpu_uuid", value, where, params):
        return None
    hosts = [str(v.value) for v in by["host"].values if v.value]
    if by["host"].others:
        hosts.append(f"{counted(by['host'].others, 'crash', 'crashes')} on hosts past these")
    unknown = _total(by["host"]) - by["host"].known
    if unknown:
        hosts.append(f"unknown for {counted(unknown, 'crash', 'crashes')}")
    return _reading("one-device", "one GPU serial only: suspect the device", [
        f"GPU {value} in all {gpus.known} crashes", f"{'host' if len(hosts) == 1 else 'hosts'}: {', '.join(hosts)}"])


def _elsewhere(index: Index, column: str, value: str | None, where: str,
               params: tuple) -> list[str]:
    """A few values of COLUMN other than VALUE on crashes of other signatures than WHERE's:
    they tell that the fleet has others; the first found end the scan."""
    return [row[0] for row in index.backend.execute(
        f"SELECT DISTINCT c.{column} FROM crashes c WHERE c.{column} <> ? AND NOT ({where}) "
        "LIMIT 3", (value, *params)).fetchall()]


def _one_driver(index: Index, where: str, params: tuple, by: dict[str, Facet]) -> Reading | None:
    driver = by["driver"]
    if not (driver.constant and driver.known == _total(driver) >= MIN_CRASHES):
        return None
    value = _known_value(driver)
    elsewhere = _elsewhere(index, "driver", value, where, params)
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
