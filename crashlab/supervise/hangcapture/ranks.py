"""Which living process of the server holds which rank.

The surest witness is PyTorch itself: each process's NCCL heartbeat monitor opens the Flight
Recorder pipe named after its global rank (``<stem><rank>.pipe``), so the process that holds that
pipe open is that rank. Next, ``RANK`` in a process's environment (torchrun and most launchers
set it; a rank's own children inherit it, so the topmost process with a rank keeps it). Last,
SGLang's process titles (``sglang::scheduler_DP0_TP1``), numbered in DP, PP, TP order as
torch.distributed numbers them. Where nothing names a rank, every living process is one, in pid
order, and the capture says so.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psutil

from ...hangs.layout import RankProcess
from ...report.run import ProcessRecord

#: processes that never hold a rank
NOT_RANKS = frozenset({"resource_tracker"})
_TITLE_RANK = re.compile(r"(ATTN_CP|MOE_DP|DP|PP|TP|EP)(\d+)")
_TITLE_ORDER = ("DP", "ATTN_CP", "PP", "TP", "MOE_DP", "EP")


@dataclass(frozen=True)
class Ranks:
    processes: list[RankProcess]
    how: str
    """How the ranks were told, in one line for the capture's notes."""


def living(records: list[ProcessRecord]) -> list[ProcessRecord]:
    """The records whose process still runs (the same pid and start time, not a zombie)."""
    alive = []
    for record in records:
        if record.exit is not None:
            continue
        try:
            proc = psutil.Process(record.pid)
            started = datetime.fromisoformat(record.started_at).timestamp()
            if abs(proc.create_time() - started) < 1.0 and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(record)
        except (psutil.Error, ValueError):
            continue
    return alive


def pipe_rank(path: str, prefix: str, suffix: str) -> int | None:
    name = path[len(prefix):] if path.startswith(prefix) else ""
    number = name[:-len(suffix)] if name.endswith(suffix) else ""
    return int(number) if number.isdigit() else None


def _holders(records: list[ProcessRecord]) -> dict[str, int]:
    """Every path a process of RECORDS holds open, with its pid (first holder wins)."""
    held: dict[str, int] = {}
    for record in records:
        folder = f"/proc/{record.pid}/fd"
        try:
            descriptors = os.listdir(folder)
        except OSError:
            continue
        for fd in descriptors:
            try:
                held.setdefault(os.readlink(f"{folder}/{fd}"), record.pid)
            except OSError:
                continue
    return held


def _by_pipes(records: list[ProcessRecord], stem: str | None, suffix: str) -> dict[int, int]:
    if not stem:
        return {}
    held = _holders(records)
    ranks = {}
    for path in glob.glob(glob.escape(stem) + "*" + glob.escape(suffix)):
        rank = pipe_rank(path, stem, suffix)
        pid = held.get(os.path.realpath(path), held.get(path))
        if rank is not None and pid is not None:
            ranks[rank] = pid
    return ranks


def _by_environment(records: list[ProcessRecord]) -> dict[int, int]:
    claims: dict[int, list[ProcessRecord]] = {}
    for record in records:
        try:
            value = psutil.Process(record.pid).environ().get("RANK", "")
        except psutil.Error:
            continue
        if value.strip().isdigit():
            claims.setdefault(int(value), []).append(record)
    ranks = {}
    for rank, claimants in claims.items():
        pids = {record.pid for record in claimants}
        topmost = [record for record in claimants if record.ppid not in pids]
        ranks[rank] = min(topmost or claimants, key=lambda record: record.pid).pid
    return ranks


def _by_titles(records: list[ProcessRecord]) -> dict[int, int]:
    titled = []
    for record in records:
        tags = dict(_TITLE_RANK.findall(record.ranks or ""))
        if tags:
            titled.append((tuple(int(tags.get(name, 0)) for name in _TITLE_ORDER), record.pid))
    return {rank: pid for rank, (_, pid) in enumerate(sorted(titled))}


def find(records: list[ProcessRecord], pipe_stem: str | None, pipe_suffix: str,
         host: str | None) -> Ranks:
    """The ranks of the living processes of RECORDS."""
    alive = [record for record in living(records) if record.role not in NOT_RANKS]
    by_pid = {record.pid: record for record in alive}
    ranks = _by_pipes(alive, pipe_stem, pipe_suffix)
    told = ["the Flight Recorder pipe each process holds"] if ranks else []
    from_environment = {rank: pid for rank, pid in _by_environment(alive).items()
                        if rank not in ranks and pid not in ranks.values()}
    if from_environment:
        ranks.update(from_environment)
        told.append("RANK in each process's environment")
    how = "ranks from " + " and ".join(told)
    if not ranks:
        ranks, how = _by_titles(alive), "ranks from SGLang's process titles, in DP, PP, TP order"
    if not ranks:
        ranks = {index: record.pid for index, record in
                 enumerate(sorted(alive, key=lambda record: record.pid))}
        how = "no process names its rank: every living process is one, in pid order"
    return Ranks([RankProcess(rank=rank, pid=pid, host=host, role=by_pid[pid].role)
                  for rank, pid in sorted(ranks.items())], how)


def flight_recorder_stem(value: str | None, cwd: str) -> str | None:
    """The pipe stem a TORCH_NCCL_DEBUG_INFO_PIPE_FILE value names, made absolute as the server
    (started in CWD) reads it."""
    return str(Path(cwd) / value) if value else None
