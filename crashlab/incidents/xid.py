"""Driver Xid lines, from a run's kernel-log findings or from ``dmesg``-style text.

The NVIDIA kernel module prints ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., text``;
older drivers write the address without ``PCI:`` and leave out pid and name
(``NVRM: Xid (0000:03:00): 14, Channel 00000001``, NVIDIA's Xid documentation), and on a MIG
partition the parentheses name the GPU instance too (``(PCI:0000:01:00 GPU-I:05)``,
``_gpuGenerateErrorLog`` in NVIDIA's open-gpu-kernel-modules). The number after the colon is
the Xid. A line is only useful for grouping with a wall-clock time, taken from the prefix the
tool that printed it left: ``dmesg --time-format=iso``, ``dmesg -T``/``--ctime``, syslog or
``journalctl`` (``Nov 23 10:15:02 host kernel:``, whose year and host are not in the line),
or ``dmesg``'s seconds since boot (``[ 1234.567890]``, with the boot time given).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from ..report.run import Finding
from ..vocabulary import XID
from .records import XidLine

_XID = re.compile(r"NVRM: Xid \((?P<device>[^)]*)\): (?P<xid>\d+)")
_ISO = re.compile(r"^\s*(?P<t>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?)\s")
_CTIME = re.compile(r"^\s*\[(?P<t>\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")
_SYSLOG = re.compile(r"^\s*(?P<t>\w{3} +\d+ \d\d:\d\d:\d\d) (?P<host>\S+) kernel:")
_SINCE_BOOT = re.compile(r"^\s*(?:<\d+>)?\[\s*(?P<t>\d+\.\d+)\]")


@dataclass
class XidReading:
    """The Xid lines read with their time, and those whose time could not be told (they
    cannot be placed in a window, so they join no incident)."""

    lines: list[XidLine] = field(default_factory=list)
    undated: list[str] = field(default_factory=list)


def from_findings(findings: list[Finding], host: str, run_dir: str | None = None) -> list[XidLine]:
    """A run's ``xid`` findings (read from /dev/kmsg by crashlab serve, at the time it read them)."""
    lines = []
    for finding in findings:
        found = _XID.search(finding.text)
        if finding.kind == XID and found:
            lines.append(_line(found, finding.text, datetime.fromisoformat(finding.time), host,
                               run_dir))
    return lines


def from_dmesg(text: str, host: str, boot_time: datetime | None = None,
               year: int | None = None, tz: timezone = timezone.utc) -> XidReading:
    """Every Xid line of a kernel log as a tool printed it. ``boot_time`` places dmesg's
    seconds since boot; ``year`` completes syslog's dates; ``tz`` is the zone of the local
    times that ``dmesg -T`` and syslog print (ISO times carry their own)."""
    reading = XidReading()
    for raw in text.splitlines():
        found = _XID.search(raw) if "NVRM: Xid" in raw else None
        if found is None:
            continue
        when, line_host = _time(raw, boot_time, year, tz)
        if when is None:
            reading.undated.append(raw[found.start():])
        else:
            reading.lines.append(_line(found, raw, when, line_host or host))
    return reading


def find_xid(raw: str) -> tuple[re.Match, datetime | None] | None:
    """An Xid line's match (its device and number) and its time where its prefix carries a
    date (ISO or ``dmesg -T``); None for a line that is not an Xid line."""
    found = _XID.search(raw) if "NVRM: Xid" in raw else None
    if found is None:
        return None
    return found, _time(raw, None, None, timezone.utc)[0]


def prefix_host(raw: str) -> str | None:
    """The host a syslog or ``journalctl`` prefix names (``Nov 23 10:15:02 node7 kernel:``);
    None for the prefixes that name none (dmesg's)."""
    found = _SYSLOG.match(raw)
    return found["host"] if found else None


def _line(found: re.Match, raw: str, when: datetime, host: str,
          run_dir: str | None = None) -> XidLine:
    return XidLine(time=when, host=host, xid=int(found["xid"]), text=raw[found.start():].rstrip(),
                   device=found["device"].strip(), run_dir=run_dir)


def _time(raw: str, boot_time: datetime | None, year: int | None,
          tz: timezone) -> tuple[datetime | None, str | None]:
    if found := _ISO.match(raw):
        stamp = datetime.fromisoformat(found["t"].replace(",", "."))
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=tz)), None
    if found := _CTIME.match(raw):
        return datetime.strptime(found["t"], "%a %b %d %H:%M:%S %Y").replace(tzinfo=tz), None
    if (found := _SYSLOG.match(raw)) and year is not None:
        stamp = datetime.strptime(f"{year} {found['t']}", "%Y %b %d %H:%M:%S")
        return stamp.replace(tzinfo=tz), found["host"]
    if (found := _SINCE_BOOT.match(raw)) and boot_time is not None:
        return boot_time + timedelta(seconds=float(found["t"])), None
    return None, None
