"""One NCCL RAS status query: NCCL's own job-wide view of its communicators.

The exchange is the one NCCL's ``ncclras`` client has (src/ras/client.cc): ``CLIENT PROTOCOL 2``,
the server's ``SERVER PROTOCOL n``, then ``STATUS``, and the report as text until the server
closes the connection. The listener is one per node (the first process to bind NCCL_RAS_ADDR),
so the reply is filed under the rank whose process holds that port, or the lowest rank where
that cannot be told. The query never waits longer than the source timeout, and is never sent to
an NCCL known to crash when polled (crashlab.supervise.hangsources).
"""

from __future__ import annotations

import socket
import time

import psutil

from ...hangs.layout import RankProcess, Source, SourceRecord, Status, source_path
from ..hangsources import RAS_ADDR, RAS_ENABLE, Stack, ras_crashes_when_polled, ras_refusal
from ..manifest import EnvironmentEntry
from .slot import Slot, first_line

NAME: Source = "nccl-ras"
PROTOCOL = 2


def address(value: str) -> tuple[str, int] | None:
    """(host, port) of an NCCL_RAS_ADDR value (``host:port``, ``[v6]:port``); None if unreadable."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    return (host, int(port)) if host and port.isdigit() else None


def holder(ranks: list[RankProcess], port: int) -> int:
    """The rank whose process listens on PORT; the lowest rank where none can be told."""
    for rank in ranks:
        try:
            connections = psutil.Process(rank.pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
               for c in connections):
            return rank.rank
    return min(rank.rank for rank in ranks)


def refusal(environment: dict[str, EnvironmentEntry], stack: Stack) -> tuple[Status, str] | None:
    """(status, note) where RAS must not or cannot be queried in this run; None where it may."""
    enabled = environment.get(RAS_ENABLE)
    if enabled is not None and enabled.value.strip() == "0":
        whose = (f"crashlab's: {ras_refusal(stack.nccl)}" if enabled.set_by == "crashlab"
                 else "the user's")
        return "skipped", f"NCCL_RAS_ENABLE=0 ({whose})"
    if ras_crashes_when_polled(stack.nccl):
        return "skipped", ras_refusal(stack.nccl) or ""
    if RAS_ADDR not in environment:
        return "missing", ras_refusal(stack.nccl) or "this run did not set NCCL_RAS_ADDR"
    return None


def query(environment: dict[str, EnvironmentEntry], stack: Stack, ranks: list[RankProcess],
          slot: Slot) -> SourceRecord:
    refused = refusal(environment, stack)
    lowest = min((rank.rank for rank in ranks), default=None)
    if refused is not None:
        return slot.row(NAME, lowest, *refused)
    where = address(environment[RAS_ADDR].value)
    if where is None:
        return slot.row(NAME, lowest, "failed", f"NCCL_RAS_ADDR={environment[RAS_ADDR].value!r} "
                        "is not host:port")
    rank = holder(ranks, where[1]) if ranks else None
    try:
        reply = _ask(where, slot.timeout, slot.budget.per_file)
    except ConnectionRefusedError:
        return slot.row(NAME, rank, "missing", f"nothing listens on {where[0]}:{where[1]} (no "
                        "NCCL communicator has been made in this run)")
    except TimeoutError:
        return slot.row(NAME, rank, "timeout", f"RAS did not answer within {slot.timeout:g} s")
    except (OSError, ValueError) as exc:
        return slot.row(NAME, rank, "failed", f"RAS: {first_line(str(exc)) or type(exc).__name__}")
    data, whole = reply
    return slot.keep(NAME, rank, source_path(rank if rank is not None else 0, slot.sample, NAME),
                     data, whole)


def _ask(where: tuple[str, int], timeout: float, limit: int) -> tuple[bytes, int]:
    """RAS's status report (at most LIMIT bytes kept) and its whole size."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(where, timeout=timeout) as connection:
        connection.sendall(f"CLIENT PROTOCOL {PROTOCOL}\n".encode())
        greeting = _line(connection, deadline)
        if not greeting.upper().startswith(b"SERVER PROTOCOL"):
            raise ValueError(f"unexpected greeting {greeting[:80]!r}")
        connection.sendall(b"STATUS\n")
        kept, whole = bytearray(), 0
        while chunk := _receive(connection, deadline):
            whole += len(chunk)
            kept.extend(chunk[:max(0, limit - len(kept))])
        return bytes(kept), whole


def _receive(connection: socket.socket, deadline: float) -> bytes:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    connection.settimeout(left)
    return connection.recv(65536)


def _line(connection: socket.socket, deadline: float) -> bytes:
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = _receive(connection, deadline)
        if not chunk:
            break
        line.extend(chunk)
        if len(line) > 4096:
            break
    return bytes(line)
