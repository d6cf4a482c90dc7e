"""Fault patterns in a server's log stream, found without slowing the stream down.

A server can print tens of thousands of lines a second; the scanner is fed raw chunks and
searches each chunk with one compiled alternation (C speed). Only a chunk that matches, or that
continues a Python traceback, is walked line by line. Each match becomes a Finding, stamped
with the time it was read, the lines before it and (filled in as they arrive) the lines after.

Every text a Finding takes from the log (its line, the lines around it, its frames) goes
through ``redact`` first: findings reach the manifest, the report and the terminal, and only
findings pay for it, never the stream as a whole.

Tracebacks are assembled frame by frame, per rank: torch.distributed prefixes every line with
``[rankN]:`` and ranks interleave, so frames are grouped by that prefix and kept in order.
SGLang's logger tags only a record's first line (``[2026-01-01 12:00:00 TP0] Scheduler hit an
exception: Traceback ...``); its traceback lines follow unprefixed and inherit the tags.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from functools import lru_cache

from ..logpatterns import ANCHORS as CRASH_ANCHORS
from ..logpatterns import CRASH_LINES, QUOTED_RAISE, TRACEBACK_STARTS, entry
from ..privacy.redact import PLAIN
from ..report.logline import SGLANG_TAGS, TORCH_RANK
from ..report.run import NO_EXCEPTION_LINE, Finding, TracebackFrame
from ..vocabulary import TRACEBACK
from . import timestamps

CONTEXT_LINES = 5
MAX_FRAMES = 200
#: A traceback whose rank has printed nothing for this many lines is finished without an
#: exception line (an excerpt, or a rank that died mid-print), so the stream is not walked
#: line by line forever.
TRACEBACK_SILENCE = 50
#: A "line" this long without a newline (a progress bar redrawn with \r for minutes, a blob) is
#: scanned as it is and dropped from memory: the log file keeps every byte regardless.
MAX_LINE = 1 << 16

_FRAME_TEXT = r"^\s*File \"(?P<file>.+)\", line (?P<line>\d+), in (?P<function>.+?)\s*$"


#: What makes a chunk (or a line) worth a closer look: a crash line's anchor, or a traceback's
#: start.
ANCHORS = tuple(sorted({a.encode() for a in CRASH_ANCHORS}
                       | {b"Traceback (most recent call last)", b'File "'}))
_FRAME = re.compile(_FRAME_TEXT)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::|$)")

Sink = Callable[[Finding], None]
Redact = Callable[[str], str]


def split_rank(text: str) -> tuple[str | None, str | None, str]:
    """(per-line rank key, record rank tags, the line without a per-line prefix)."""
    torch = TORCH_RANK.match(text)
    if torch:
        return torch["rank"], torch["rank"], text[torch.end():]
    tags = SGLANG_TAGS.search(text)
    return None, tags["tags"].strip() if tags else None, text


class _Traceback:
    def __init__(self, finding: Finding):
        self.finding = finding
        self.frames: deque[TracebackFrame] = deque(maxlen=MAX_FRAMES)
        self.last_line = finding.line


class StreamScanner:
    """Scans one stream (stdout or stderr) of one process tree; not thread-safe by design."""

    def __init__(self, stream: str, sink: Sink, context: int = CONTEXT_LINES,
                 kinds: frozenset[str] | None = None, redact: Redact = PLAIN.text):
        self.stream = stream
        self._sink = sink
        # a line is the text of one finding and the context of up to 2 * context others; a
        # fault repeated in a loop is the same line again: each is redacted once
        self._redact = lru_cache(maxsize=4 * context + 64)(redact)
        self.context = context
        self.kinds = kinds
        self.lines = 0
        self._tail = b""
        self._before: deque[bytes] = deque(maxlen=context)
        self._waiting: list[Finding] = []  # findings still collecting lines after them
        self._tracebacks: dict[str | None, _Traceback] = {}

    def feed(self, chunk: bytes) -> None:
        data = self._tail + chunk
        end = data.rfind(b"\n") + 1
        self._tail = data[end:]
        if end:
            self._lines(data[:end])
        if len(self._tail) > MAX_LINE:
            tail, self._tail = self._tail, b""
            self._lines(tail + b"\n")
            self.lines -= 1  # the rest of that line, when its newline comes, is the same line

    def close(self) -> None:
        """End of stream: a last unterminated line counts, open tracebacks are finished."""
        if self._tail:
            tail, self._tail = self._tail, b""
            self._lines(tail + b"\n")
        for key in list(self._tracebacks):
            self._finish(key, None)
        self._waiting.clear()

    def _lines(self, block: bytes) -> None:
        lines = block.split(b"\n")[:-1]
        if not self._tracebacks:
            hits = [at for at in (block.find(anchor) for anchor in ANCHORS) if at >= 0]
            if not hits:
                self._fast(lines)
                return
            first = block.count(b"\n", 0, min(hits))  # lines before the first hit: nothing there
            self._fast(lines[:first])
            lines = lines[first:]
        for raw in lines:
            if self._tracebacks or any(anchor in raw for anchor in ANCHORS):
                self._line(raw)
            else:
                self._fast([raw])

    def _fast(self, lines: list[bytes]) -> None:
        if self._waiting:
            for raw in lines[: self.context]:
                self._after(raw.decode("utf-8", "replace").rstrip("\r"))
        self.lines += len(lines)
        self._before.extend(lines[-self.context:])

    def _line(self, raw: bytes) -> None:
        self.lines += 1
        text = raw.decode("utf-8", "replace").rstrip("\r")
        self._after(text)
        key, tags, body = split_rank(text)
        inside = self._tracebacks.get(key)  # a line of a traceback carries the traceback's rank
        rank = tags or (inside.finding.rank if inside is not None else None)
        quoted_source = self._traceback(key, tags, body, text) or QUOTED_RAISE.match(body)
        for stale in [k for k, tb in self._tracebacks.items()
                      if self.lines - tb.last_line > TRACEBACK_SILENCE]:
            self._finish(stale, None)
        match = None if quoted_source else CRASH_LINES.search(text)
        if match:
            finding = self._finding(entry(match).kind, text, rank)
            self._waiting.append(finding)
            self._emit(finding)
        self._before.append(raw)

    def _finding(self, kind: str, text: str, rank: str | None) -> Finding:
        before = [self._redact(line.decode("utf-8", "replace").rstrip("\r")) for line in self._before]
        return Finding(kind=kind, text=self._redact(text), stream=self.stream, line=self.lines,
                       time=timestamps.now(), rank=rank, before=before)

    def _after(self, text: str) -> None:
        if not self._waiting:
            return
        text = self._redact(text)
        for finding in self._waiting:
            finding.after.append(text)
        self._waiting = [f for f in self._waiting if len(f.after) < self.context]

    def _traceback(self, key: str | None, tags: str | None, body: str, text: str) -> bool:
        """Follows the tracebacks; True when the line is source code a traceback quotes (its
        ``raise RuntimeError("CUDA error: ...")`` is not a fault message of its own)."""
        if TRACEBACK_STARTS.search(body):
            self._finish(key, None)
            self._tracebacks[key] = _Traceback(self._finding(TRACEBACK, text, tags))
            return False
        frame = _FRAME.match(body)
        open_one = self._tracebacks.get(key)
        if frame:
            if open_one is None:  # an excerpt that lost its header: still a traceback
                open_one = self._tracebacks[key] = _Traceback(self._finding(TRACEBACK, text, tags))
            open_one.last_line = self.lines
            open_one.frames.append(TracebackFrame(file=self._redact(frame["file"]),
                                                  line=int(frame["line"]),
                                                  function=self._redact(frame["function"])))
        elif open_one is not None:
            if body[:1].isspace():
                open_one.last_line = self.lines
                code = body.strip()
                last = open_one.frames[-1] if open_one.frames else None
                if last is not None and last.code is None and code and set(code) - set("^~ "):
                    last.code = self._redact(code)
                return True
            exception = _EXCEPTION_LINE.match(body) is not None
            if exception:
                open_one.last_line = self.lines
            self._finish(key, body if exception else None)
        return False

    def _finish(self, key: str | None, exception: str | None) -> None:
        done = self._tracebacks.pop(key, None)
        if done is None:
            return
        finding = done.finding
        finding.frames = list(done.frames)
        finding.end_line = done.last_line
        if exception:
            finding.text = self._redact(exception)
        elif finding.frames:
            last = finding.frames[-1]
            finding.text = f"{NO_EXCEPTION_LINE}, innermost frame {last.function} " \
                           f"({last.file}:{last.line})"
        self._emit(finding)

    def _emit(self, finding: Finding) -> None:
        if self.kinds is None or finding.kind in self.kinds:
            self._sink(finding)
