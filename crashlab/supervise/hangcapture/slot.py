"""One sample of a capture, as each source sees it: where its files go, when it was asked, how
long it may take, and the rows it gives back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...hangs.layout import Source, SourceRecord, Status
from .bounded import Budget

BUDGET_SPENT = "not kept: the capture's size budget is spent"


@dataclass(frozen=True)
class Slot:
    folder: Path
    """The capture folder; rows' paths are relative to it."""
    sample: int
    taken_at: str
    budget: Budget
    timeout: float
    """Seconds each source may take."""

    def row(self, source: Source, rank: int | None, status: Status,
            note: str | None = None) -> SourceRecord:
        return SourceRecord(source=source, rank=rank, sample=self.sample, taken_at=self.taken_at,
                            status=status, note=note)

    def keep(self, source: Source, rank: int | None, relative: str, data: bytes,
             whole_size: int | None = None, note: str | None = None) -> SourceRecord:
        """DATA kept as the capture's file RELATIVE: an ok row, or a skipped one where the
        capture's budget is spent."""
        written = self.budget.write(self.folder / relative, data, whole_size)
        if written is None:
            return self.row(source, rank, "skipped", BUDGET_SPENT)
        row = self.row(source, rank, "ok", note)
        row.path, row.size_bytes, row.truncated_from = relative, written.size, written.truncated_from
        return row


def first_line(text: str, limit: int = 200) -> str:
    """The first non-empty line of a tool's complaint, cut to a readable length."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line[:limit]
