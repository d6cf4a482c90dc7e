"""Point-to-point operations across ranks: a rank that waits in a recv (or a send) whose peer
never made the matching send (or recv).

Flight Recorder names a point-to-point operation's peers in its profiling name, as ranks of its
process group: ``nccl:send 1->2`` (rank 1 sends to 2), ``nccl:recv 3<-0`` (rank 3 receives from
0), as PyTorch's own flight_recorder tool reads them; pg_config's ranks turn them into global
ranks. Between two ranks of a group, the k-th recv one posts from the other matches the k-th
send the other posts to it. A recv not completed, whose peer's dump holds fewer than k sends to
it, waits on a send the peer never made (a send likewise on a recv). Counting needs every
operation: only where both ranks' buffers still hold the group's point-to-point operations from
the first (p2p_seq_id 1); a ring buffer that forgot some says nothing. Gloo records no
point-to-point operation in Flight Recorder (torch 2.14.1): this reads NCCL's dumps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .flightrecorder import Entry, FlightRecord
from .model import PeerWait
from .rank import done

_PEERS = re.compile(r"(send|recv) (\d{1,7})(->|<-)(\d{1,7})")
_OPPOSITE = {"send": "recv", "recv": "send"}


@dataclass(frozen=True)
class _Transfer:
    op: str
    rank: int
    peer: int
    entry: Entry


def _transfer(entry: Entry, members: list[int]) -> _Transfer | None:
    """A point-to-point entry with its two global ranks; None for any other entry, or one whose
    ranks pg_config cannot place."""
    found = _PEERS.fullmatch(entry.op)
    if not entry.is_p2p or found is None:
        return None
    op, first, arrow, second = found.groups()
    if (op == "send") != (arrow == "->"):
        return None
    me, peer = int(first), int(second)
    if members:
        if max(me, peer) >= len(members):
            return None
        me, peer = members[me], members[peer]
    return _Transfer(op, me, peer, entry)


def _by_group(rank: int, record: FlightRecord) -> dict[tuple[str, str], list[_Transfer]]:
    """A rank's point-to-point operations per group, in their order; a group whose operations
    do not name this rank as theirs (no pg_config to place group ranks) is left out."""
    groups: dict[tuple[str, str], list[_Transfer]] = {}
    for entry in record.entries:
        transfer = _transfer(entry, record.pg_ranks.get(entry.pg_name, []))
        if transfer is not None:
            groups.setdefault((entry.pg_name, entry.pg_desc), []).append(transfer)
    return {key: sorted(found, key=lambda t: t.entry.seq) for key, found in groups.items()
            if all(t.rank == rank for t in found)}


def _whole(transfers: list[_Transfer]) -> bool:
    """Whether a buffer still holds the group's point-to-point operations from the first."""
    return bool(transfers) and transfers[0].entry.seq <= 1


def unmatched(records: dict[int, FlightRecord]) -> list[PeerWait]:
    """Each rank's first pending point-to-point operation, per group, that its peer never
    matched, by each rank's last Flight Recorder dump."""
    per_rank = {rank: _by_group(rank, record) for rank, record in sorted(records.items())}
    found = []
    for rank, groups in per_rank.items():
        for key, mine in groups.items():
            if not _whole(mine):
                continue
            wait = _first_unmatched(rank, mine, per_rank, key)
            if wait is not None:
                found.append(wait)
    return found


def _first_unmatched(rank: int, mine: list[_Transfer],
                     per_rank: dict[int, dict[tuple[str, str], list[_Transfer]]],
                     key: tuple[str, str]) -> PeerWait | None:
    for transfer in mine:
        if done(transfer.entry):
            continue
        nth = sum(1 for t in mine if t.op == transfer.op and t.peer == transfer.peer
                  and t.entry.seq <= transfer.entry.seq)
        theirs = per_rank.get(transfer.peer, {}).get(key)
        if theirs is None or not _whole(theirs):
            continue
        made = sum(1 for t in theirs if t.op == _OPPOSITE[transfer.op] and t.peer == rank)
        if made < nth:
            return PeerWait(pg=key[0], pg_desc=key[1], rank=rank, op=transfer.op,
                            seq=transfer.entry.seq, peer=transfer.peer, nth=nth, peer_made=made,
                            profiling_name=transfer.entry.profiling_name)
    return None
