"""A kernel log copied off a node (``dmesg``, ``journalctl -k``, syslog text), read for its Xid
lines within a bound: a stranger's file may be huge, binary or hostile.

Only the first MAX_BYTES are read (the report says the log was cut), a line past MAX_LINE
characters is cut, and at most MAX_XIDS Xid lines are kept (the rest counted). Every line is
redacted before anything keeps it: the driver prints the GPU's UUID and its board serial number
once after boot (``NVRM: GPU at PCI:...: GPU-...``, ``NVRM: GPU Board Serial Number: ...``,
kernel_rc.c's _krcLogUuidOnce in the open kernel module), and reports never carry them.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from ..errors import BadInput
from ..report.kernellog import KernelLog, XidEvent
from .xid import find_xid, prefix_host
from .xiddecode import decode, redact

#: Bytes of a log read: a month of a busy node's kernel messages is far less.
MAX_BYTES = 64 * 1024 * 1024
#: Characters of one line kept (the driver's longest Xid lines are under 400).
MAX_LINE = 4096
#: Xid lines kept; a log with more is a flood, and its first lines are the ones that matter.
MAX_XIDS = 2000


def read_kernel_log(path: str) -> KernelLog:
    """The decoded Xid lines of the kernel log at ``path``. Raises BadInput for a file that
    cannot be read or is not text."""
    shown = os.fspath(path)
    try:
        if not Path(path).is_file():  # a folder, a device or a pipe: nothing to read within a bound
            raise BadInput(f"--kernel-log {shown}: not a file (give a file of dmesg, "
                           "journalctl -k or syslog text)")
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"--kernel-log {shown}: cannot be read: {exc.strerror or exc}") from None
    if b"\0" in data[:65536]:
        raise BadInput(f"--kernel-log {shown}: not text (a kernel log is dmesg, journalctl -k "
                       "or syslog text)")
    cut = len(data) > MAX_BYTES
    return read_kernel_text(data[:MAX_BYTES].decode("utf-8", errors="replace"), shown, cut)


def read_kernel_text(text: str, path: str, cut: bool = False) -> KernelLog:
    """The decoded Xid lines of kernel log text (see read_kernel_log)."""
    log = KernelLog(path=path, lines_read=0, cut=cut)
    withheld: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        log.lines_read = number
        line, found_private = redact(raw[:MAX_LINE])
        withheld.update(found_private)
        found = find_xid(line)
        if found is None:
            continue
        if len(log.xids) >= MAX_XIDS:
            log.omitted_xids += 1
            continue
        match, when = found
        event = decode(int(match["xid"][:6]), match["device"].strip(),
                       line[match.end():].lstrip(", "), number, when.isoformat() if when else None)
        event.host = prefix_host(line)
        log.xids.append(event)
    log.redacted = sorted(withheld)
    log.constant_esr_words = _mark_varying_words(log.xids)
    if cut:
        log.notes.append(f"only the first {MAX_BYTES // (1024 * 1024)} MiB of the log were read")
    if log.omitted_xids:
        log.notes.append(f"{log.omitted_xids} Xid lines past the first {MAX_XIDS} were counted, "
                         "not decoded")
    return log


def _mark_varying_words(xids: list[XidEvent]) -> list[str]:
    """Mark each ESR word as varying or not across the log's ESR lines, keyed by the register's
    offset within its SM (each SM has its own copy); the words that never vary over two lines
    or more, as ``0x…728=value``: constants of the GPU, not the fault's."""
    values: dict[int, set[str]] = defaultdict(set)
    counts: dict[int, int] = defaultdict(int)
    for event in xids:
        for word in event.esr:
            values[_offset(word.register_address)].add(word.value)
            counts[_offset(word.register_address)] += 1
    for event in xids:
        for word in event.esr:
            offset = _offset(word.register_address)
            word.varies = len(values[offset]) > 1 if counts[offset] > 1 else None
    return [f"0x…{offset:03x}={next(iter(seen))}" for offset, seen in values.items()
            if counts[offset] > 1 and len(seen) == 1]


def _offset(register_address: str) -> int:
    return int(register_address, 16) & 0xFFF
