"""A run's log findings grouped as a reader takes them in, for report.md.

- In time order (the order the lines were read).
- A traceback is one entry with the findings on its own lines (SGLang's "Scheduler hit an
  exception: Traceback ..." line, a CUDA error in its exception line): one story, one block.
- Findings whose lines of context touch share one block, each matched line marked.
- An entry that says what an earlier one said (the same traceback from seven ranks, the same
  error in a loop) is folded into the earlier one with a count: "same traceback ×7 (ranks 0-6)".
- Identical lines in a row are shown once, with how many more there were.

report.json keeps every finding as found; this is only how the Markdown groups them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import groupby

from ..notation import counted, number_ranges
from ..vocabulary import TRACEBACK
from .logline import message
from .run import NO_EXCEPTION_LINE, Finding

#: Lines of a block are cut to this length (report.json has them whole).
LINE_CHARS = 300
#: A traceback shows its innermost frames, where Python puts the most recent call.
FRAMES_SHOWN = 12
MARK = ">>> "
PAD = " " * len(MARK)
_NUMBERED = re.compile(r"^(?P<prefix>[A-Za-z_]*?)(?P<number>\d+)$")


@dataclass
class Entry:
    """Findings shown together; ``repeats``: later entries that said the same."""

    findings: list[Finding]
    repeats: list[Entry] = field(default_factory=list)

    @property
    def first(self) -> Finding:
        return min(self.findings, key=_when)

    @property
    def traceback(self) -> Finding | None:
        return next((f for f in self.findings if f.kind == TRACEBACK), None)

    @property
    def kinds(self) -> str:
        return ", ".join(dict.fromkeys(f.kind for f in self.findings))

    @property
    def stream(self) -> str:
        return self.findings[0].stream

    @property
    def rank(self) -> str | None:
        return self.first.rank

    @property
    def lines(self) -> str:
        """Which lines of the stream's log it quotes: "line 7", "lines 75-123", "lines 3, 9"."""
        traceback = self.traceback
        if traceback is not None and traceback.end_line and traceback.end_line != traceback.line:
            return f"lines {traceback.line}-{traceback.end_line}"
        numbers = sorted({f.line for f in self.findings})
        return f"line {numbers[0]}" if len(numbers) == 1 else f"lines {number_ranges(numbers)}"

    @property
    def quote(self) -> str:
        """The line that says the most: a traceback's exception, else the first finding's."""
        chosen = self.traceback or self.first
        return chosen.text if chosen.text.startswith(NO_EXCEPTION_LINE) else message(chosen.text)

    def said(self) -> tuple:
        """What the entry says, whoever said it and when: kinds, messages and frames."""
        frames = tuple((f.file, f.line, f.function, f.code) for f in self.traceback.frames) \
            if self.traceback is not None else ()
        return tuple((f.kind, message(f.text)) for f in self.findings), frames

    def repeated(self) -> str:
        """"", or how often and by whom it was said: "×7 (ranks 0-6)", "×3 (stderr lines 9, 19, 29)"."""
        if not self.repeats:
            return ""
        every = [self, *self.repeats]
        ranks = [e.rank for e in every if e.rank]
        if len(ranks) == len(every) and len(set(ranks)) == len(ranks):
            who = _ranks(ranks)
        else:
            where = sorted({(e.stream, e.first.line) for e in every})
            who = "; ".join(f"{stream} line{'s' if len(lines) > 1 else ''} {number_ranges(lines)}"
                            for stream in dict.fromkeys(s for s, _ in where)
                            for lines in [[n for s, n in where if s == stream]])
        return f"×{len(every)} ({who})"

    def block(self) -> list[str]:
        """The lines to show under the entry: the traceback, or the lines around the findings."""
        lines = self._traceback_lines(self.traceback) if self.traceback is not None \
            else self._context_lines()
        return [_cut(line) for line in _folded_runs(lines)]

    def _traceback_lines(self, traceback: Finding) -> list[str]:
        marked = {f.line: f.text for f in self.findings if f is not traceback}
        out = [MARK + marked[traceback.line] if traceback.line in marked
               else PAD + "Traceback (most recent call last):"]
        frames = traceback.frames[-FRAMES_SHOWN:]
        if len(traceback.frames) > len(frames):
            out.append(f"{PAD}  ... {counted(len(traceback.frames) - len(frames), 'outer frame')}")
        for frame in frames:
            out.append(f'{PAD}  File "{frame.file}", line {frame.line}, in {frame.function}')
            if frame.code:
                out.append(f"{PAD}    {frame.code}")
        ended = traceback.end_line
        if ended and ended != traceback.line and not traceback.text.startswith(NO_EXCEPTION_LINE):
            out.append(MARK + marked.get(ended, traceback.text))
        return out

    def _context_lines(self) -> list[str]:
        text: dict[int, str] = {}
        for finding in self.findings:
            start = finding.line - len(finding.before)
            text.update({start + i: line for i, line in enumerate(finding.before)})
            text.update({finding.line + 1 + i: line for i, line in enumerate(finding.after)})
        marked = {f.line: f.text for f in self.findings}
        text.update(marked)
        out, previous = [], None
        for number in sorted(text):
            if previous is not None and number > previous + 1:
                out.append(PAD + "...")
            out.append((MARK if number in marked else PAD) + text[number])
            previous = number
        return out


def entries(findings: list[Finding]) -> list[Entry]:
    """The findings as entries, in time order, repeats folded into their first entry."""
    ordered = sorted(findings, key=_when)
    tracebacks = [Entry([f]) for f in ordered if f.kind == TRACEBACK]
    grouped = list(tracebacks)
    last_block: dict[str, Entry] = {}  # per stream, the block a finding's context may touch
    for finding in ordered:
        if finding.kind == TRACEBACK:
            continue
        owner = next((e for e in tracebacks
                      if e.traceback is not None and _inside(finding, e.traceback)), None)
        if owner is None:
            block = last_block.get(finding.stream)
            if block is not None and _window(finding)[0] <= max(_window(f)[1] for f in block.findings) + 1:
                owner = block
            else:
                owner = last_block[finding.stream] = Entry([])
                grouped.append(owner)
        owner.findings.append(finding)
    for entry in grouped:
        entry.findings.sort(key=lambda f: (f.line, f.kind == TRACEBACK))
    grouped.sort(key=lambda e: _when(e.first))
    return _without_repeats(grouped)


def _without_repeats(grouped: list[Entry]) -> list[Entry]:
    first_of: dict[tuple, Entry] = {}
    kept = []
    for entry in grouped:
        earlier = first_of.get(entry.said())
        if earlier is None:
            first_of[entry.said()] = entry
            kept.append(entry)
        else:
            earlier.repeats.append(entry)
    return kept


def _when(finding: Finding) -> tuple:
    return finding.time, finding.stream, finding.line


def _inside(finding: Finding, traceback: Finding) -> bool:
    """On the lines of that traceback, printed by the same rank."""
    return (finding.stream == traceback.stream and finding.rank == traceback.rank
            and traceback.line <= finding.line <= (traceback.end_line or traceback.line))


def _window(finding: Finding) -> tuple[int, int]:
    return finding.line - len(finding.before), finding.line + len(finding.after)


def _folded_runs(lines: list[str]) -> list[str]:
    out = []
    for line, same in groupby(lines):
        out.append(line)
        more = sum(1 for _ in same) - 1
        if more:
            out.append(f"{PAD}... the line above {counted(more, 'more time')}")
    return out


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…"


def _ranks(ranks: list[str]) -> str:
    """["rank0", ..., "rank6"] -> "ranks 0-6"; ["TP0", "TP1"] -> "TP 0-1"; else as they are."""
    numbered = [m for m in map(_NUMBERED.match, ranks) if m]
    prefixes = {m["prefix"] for m in numbered}
    if len(numbered) == len(ranks) and len(prefixes) == 1:
        prefix = prefixes.pop()
        label = "ranks" if prefix in ("rank", "") else prefix
        return f"{label} {number_ranges([int(m['number']) for m in numbered])}"
    return "ranks " + ", ".join(ranks)
