"""Terminal and JSON renderings of a CrashDump and a ReplayResult (prompts shortened)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import overload

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..console import line, plain, wrapped
from ..escape import escape, printable
from ..report.tool import Tool
from ..stdout import write as written
from ..textsize import with_bytes
from ..version import __version__
from ..wrap import fitted
from .records import CrashDump, Request
from .result import Attempt, DumpListing, Minimization, ReplayResult, RequestOutcome

TEXT_CHARS = 80
IDS_SHOWN = 16
_PROBLEM_ROWS = 20


@overload
def short_text(text: str, limit: int = TEXT_CHARS) -> str: ...
@overload
def short_text(text: None, limit: int = TEXT_CHARS) -> None: ...
def short_text(text: str | None, limit: int = TEXT_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} chars)"


def _ids_json(ids) -> tuple[list | None, int | None]:
    """The first IDS_SHOWN ids as JSON and how many there are; a batch as one such pair per row."""
    if ids is None:
        return None, None
    if len(ids) and not isinstance(ids[0], int):
        return [row[:IDS_SHOWN].tolist() for row in ids], sum(len(row) for row in ids)
    return ids[:IDS_SHOWN].tolist(), len(ids)


def _texts_shortened(holder: dict) -> None:
    value = holder["text"]
    holder["text"] = ([short_text(item) for item in value] if isinstance(value, list)
                      else short_text(value))


def request_json(request: Request) -> dict:
    """One request as --json prints it, built without turning its token ids into a list."""
    data = request.model_dump(mode="json", exclude={"input_ids": True,
                                                    "output": {"output_ids"}})
    for holder, key, ids in ((data, "input_ids", request.input_ids),
                             (data["output"], "output_ids", request.output.output_ids)):
        holder[key], count = _ids_json(ids)
        if count is not None:
            holder[f"{key}_count"] = count
        _texts_shortened(holder)
    return data


def dump_json_lines(dump: CrashDump) -> Iterator[str]:
    """The dump as --json prints it (a DumpListing: texts cut to 80 characters, id lists to their
    first 16), a line at a time: the dump's fields indented, then one request per line. One
    request per line keeps a 30,000-request dump quick to print (json's C encoder does not
    indent) and to grep."""
    listing = {"schema_version": DumpListing.model_fields["schema_version"].default,
               "tool": Tool(version=__version__).model_dump(),
               **dump.model_dump(mode="json", exclude={"requests"})}
    head = json.dumps(listing, indent=2)
    yield head[:-2] + ',\n  "requests": ['
    last = len(dump.requests) - 1
    for position, request in enumerate(dump.requests):
        yield f"    {json.dumps(request_json(request))}{',' if position < last else ''}"
    yield "  ]\n}"


def _prompt(request: Request) -> str:
    if request.input_ids is not None:
        ids = request.input_ids
        shown = " ".join(map(str, ids[:6])) if len(ids) and isinstance(ids[0], int) else "batch"
        return f"ids[{len(ids)}] {shown}{' …' if len(ids) > 6 else ''}"
    text = request.text if isinstance(request.text, str) else f"batch of {len(request.text or [])}"
    return short_text(text.replace("\n", "⏎"), 40) or ""


def _flags(request: Request) -> str:
    flags = ["stream"] if request.stream else []
    flags += [f"{kind}×{count}" for kind, count in request.multimodal.items()]
    if request.lora_path:
        flags.append(f"lora={request.lora_path}")
    if request.logprob.return_logprob:
        flags.append("logprob")
    return " ".join(flags)


#: One listing line: fixed-width columns, then the prompt and flags (a format string is ten
#: times cheaper per line than padding each cell, which a 30,000-request dump notices). Below
#: ``WIDE`` columns the rid and the state are narrower, so that an 80-column terminal keeps
#: room for the prompt; the prompt and flags wrap as every view's lines do (crashlab.wrap),
#: under their column.
_ROW = "{:<6.6} {:<10.10} {:<4.4} {:<24.24} {:<7.7} {:<5.5} {:<12.12} {}"
_NARROW_ROW = "{:<5.5} {:<8.8} {:<4.4} {:<17.17} {:<5.5} {:<4.4} {:<10.10} {}"
_HEADINGS = ("#", "+t s", "kind", "rid", "max new", "temp", "state tokens", "prompt · flags")
_NARROW_HEADINGS = ("#", "+t s", "kind", "rid", "max", "temp", "state tok", "prompt · flags")
#: What the listing's columns hold that their headings cannot say, under the rows.
_LEGEND = ("rows above in the dump's order; +t: seconds after the first; state: how each ended, "
           "and the tokens it generated")
#: Below this many columns a row takes the narrow layout.
WIDE = 120


class RequestLister:
    """Prints a dump's requests one line each as the loader reads them (a long dump lists at
    once), then the dump's summary. Rows are plain lines written straight to the console's file
    (Rich costs 0.1 ms a line: seconds for a 30,000-request dump), with the dump's text escaped
    (no terminal control sequence from a stranger's file reaches the terminal); the summary is
    escaped Rich text that wraps as inspect's does. Nothing from the dump is ever read as markup."""

    def __init__(self, console: Console):
        self.console = console
        self.first_created: float | None = None
        self.count = 0
        wide = console.width >= WIDE
        self.row_format = _ROW if wide else _NARROW_ROW
        #: a longer rid keeps its start and its end around "…" (short_rid): rids that differ
        #: only in their suffix (``r05-parallel_0.s0``, ``.s1``) stay told apart
        self.rid_room = 24 if wide else 17
        heading = self.row_format.format(*(_HEADINGS if wide else _NARROW_HEADINGS))
        self.heading = heading + "\n"
        #: columns before the prompt, and the room the prompt and flags have
        self.indent = len(heading) - len(_HEADINGS[-1])
        self.room = max(console.width - self.indent, 20)

    def row(self, request: Request) -> None:
        lines = []
        if self.first_created is None:  # the heading waits for a row: a refused file prints none
            lines.append(self.heading)
            self.first_created = request.created
        params, done = request.sampling_params, request.output
        state = "in flight" if request.in_flight else \
            escape(f"{done.finish_reason or ''} {done.completion_tokens or ''}".strip())
        flags = _flags(request)
        described = printable(f"{_prompt(request)} · {flags}" if flags else _prompt(request))
        first, *rest = fitted(described, self.room) if len(described) > self.room else [described]
        lines.append(self.row_format.format(
            str(self.count), f"{request.created - self.first_created:+.3f}", request.kind[:3],
            short_rid(request.rid, self.rid_room), escape(str(params.get("max_new_tokens", ""))),
            escape(str(params.get("temperature", ""))), state, first).rstrip() + "\n")
        lines += [" " * self.indent + more + "\n" for more in rest]
        written(self.console.file, "".join(lines))
        self.count += 1

    def summary(self, dump: CrashDump) -> None:
        self._print(line(
            (dump.path, "bold"), f": {dump.layout}, {len(dump.requests)} requests, "
            f"{unfinished(dump)}; {with_bytes(dump.size_bytes)} ({_LEGEND})"))
        if dump.server_args:
            args = dump.server_args
            self._print(plain(f"server: {args.get('model_path')}  tp={args.get('tp_size')}  "
                              f"port={args.get('port')}  ({dump.server_args_class or 'plain dict'})"))
        if dump.launch_command:
            self._print(plain(f"launched as: {dump.launch_command}"))
        for warning in dump.warnings:
            if dump.partial is not None and warning == dump.partial.line():
                continue  # on stderr, once (replay.command)
            self._print(line(("warning: ", "yellow"), warning))

    def _print(self, text: Text) -> None:
        """A summary line wraps as inspect's footer does on a terminal, its lines after the first
        indented under it; into a pipe it stays one line, as the rows do, for grep."""
        if self.console.is_terminal:
            self.console.print(wrapped(text, indent=2))
        else:
            self.console.print(text, soft_wrap=True)


def unfinished(dump: CrashDump) -> str:
    """How many of the dump's requests had not finished, named for when the dump was written:
    in flight at the crash for a crash dump; for a request dump, written without a crash,
    unfinished when SGLang wrote it."""
    count = len(dump.in_flight)
    if dump.written_at_crash:
        return f"{count} in flight at the crash"
    if dump.written_at_crash is False:
        return f"{count} unfinished when SGLang wrote it (a request dump: no crash)"
    return f"{count} unfinished when it was written"


_VERDICT_STYLE = {"reproduced": "bold red", "crashed": "bold red", "different crash": "bold yellow",
                  "unconfirmed": "yellow", "no crash": "green"}


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f}"


def verdict_line(result: ReplayResult) -> str:
    """The result in one line, the first of its view as inspect's summary is of its own:
    ``reproduced 1/2: attempt 1 crashed, attempt 2 no crash``."""
    summary = f"reproduced {result.reproductions}/{len(result.attempts)}"
    if len(result.attempts) != result.repeat:
        summary += f" (asked for {result.repeat})"
    attempts = ", ".join(f"attempt {a.number} {a.verdict}" for a in result.attempts)
    return f"{summary}: {attempts}" if attempts else summary


def short_rid(rid: object, limit: int = 20) -> str:
    """A request's id (escaped) whole where it has ``limit`` characters or fewer, else its
    first and last characters around an ellipsis (``3f2a9c0e81…c47d``), as a hash is
    shortened: both ends stay to match it against the listing and the JSON."""
    shown = escape(str(rid))
    if len(shown) <= limit:
        return shown
    tail = max(limit // 4, 1)
    return f"{shown[:limit - tail - 1]}…{shown[-tail:]}"


def render_result(result: ReplayResult, console: Console, said: str | None = None) -> None:
    """The result as text, its verdict line first (whole, for grep and head); strings from the
    dump, the server and its log are printed as data. SAID is a warning already on stderr (a
    cut dump's partial line), not printed again."""
    console.print(plain(verdict_line(result), style="bold red" if result.reproduced else "bold"),
                  soft_wrap=True)
    _print_setup(result, console)
    for attempt in result.attempts:
        _print_attempt(attempt, console)
    if result.minimization:
        _print_minimization(result.minimization, console)
    _print_closing(result, console, said)


def _print_setup(result: ReplayResult, console: Console) -> None:
    """How the replay was run: the crash it looked for, the decode forcing, the hardening."""
    if result.expected:
        e = result.expected
        wanted = [f"class {e.fault_class}" if e.fault_class else "", f"kernel {e.kernel}" if e.kernel else ""]
        wanted += [f"/{pattern}/" for pattern in e.patterns]
        console.print(wrapped(line("expected crash: ", ", ".join(filter(None, wanted)),
                                   f" (from {e.source})"), indent=2))
    if result.force_decode:
        f = result.force_decode
        console.print(wrapped(line("forced decode: ", (f.used, "bold"),
                                   f" ({f.requests} requests): {f.reason}"), indent=2))
        if f.probe:
            console.print(wrapped(line("  probe: ", f.probe), indent=4))
    if result.harden:
        env = " ".join(f"{key}={value}" for key, value in result.harden.env.items())
        console.print(wrapped(line("hardened (", result.harden.profile, "): ",
                                   env + " " if env else "", result.harden.command), indent=2))


def _print_attempt(attempt: Attempt, console: Console) -> None:
    """One attempt: its verdict and counts, its schedule, what it saw, its failed requests."""
    console.print(wrapped(line(
        f"attempt {attempt.number}: ", (attempt.verdict, _VERDICT_STYLE[attempt.verdict]),
        f" — {attempt.answered} answered, {attempt.failed_after_send} failed after send, "
        f"{attempt.never_sent} never sent (of {len(attempt.requests)}); {attempt.ok} ok, "
        f"{attempt.divergences} diverged, {attempt.duration_s:.2f} s"), indent=2))
    if attempt.schedule and attempt.schedule.late_p50_s is not None:
        sched = attempt.schedule
        kept = {True: ("kept", "green"), False: ("NOT KEPT", "bold yellow"),
                None: ("no schedule", "")}[sched.kept]
        console.print(wrapped(line(f"  schedule: late p50 {_ms(sched.late_p50_s)} ms, p99 "
                                   f"{_ms(sched.late_p99_s)} ms, max {_ms(sched.late_max_s)} ms "
                                   f"(threshold p99 {_ms(sched.threshold_s)} ms): ", kept), indent=4))
    if attempt.mismatch:
        console.print(wrapped(line("  ", ("mismatch", "yellow"), ": ", attempt.mismatch), indent=4))
    for signal in attempt.signals:
        console.print(wrapped(line("  ", (signal.kind, "red"), f" at {signal.at_s:.2f} s: ",
                                   signal.detail), indent=4))
    problems = [o for o in attempt.requests if o.status != "ok" or o.divergence]
    if problems:
        console.print(_problem_table(problems[:_PROBLEM_ROWS]))
        if len(problems) > _PROBLEM_ROWS:
            console.print(f"  … and {len(problems) - _PROBLEM_ROWS} more (--json has them all)")


def _problem_table(problems: list[RequestOutcome]) -> Table:
    """The requests that failed or diverged: status, delivery, and the error or difference."""
    table = Table(show_edge=False, pad_edge=False)
    for column in ("#", "rid", "status", "delivery"):
        table.add_column(column, no_wrap=True)
    table.add_column("detail")
    for outcome in problems:
        detail = outcome.error or ""
        if outcome.divergence:
            d = outcome.divergence
            detail = (f"{d.compared} differ at {d.first_difference}: "
                      f"recorded {d.recorded!r}, replayed {d.replayed!r}")
        table.add_row(str(outcome.index), Text(short_rid(outcome.rid)),
                      plain(outcome.status), plain(outcome.delivery), wrapped(plain(detail)))
    return table


def _print_minimization(m: Minimization, console: Console) -> None:
    if m.minimal:
        console.print(wrapped(line(("minimal reproducer:", "bold"),
                                   f" {len(m.minimal)} of {m.original} requests (indices "
                                   f"{m.minimal[:20]}{' …' if len(m.minimal) > 20 else ''}), "
                                   "written to ", str(m.output)), indent=2))
    elapsed = "" if m.elapsed_s is None else f" in {m.elapsed_s:,.1f} s"
    left = f"; {m.budget_left}" if m.budget_left else ""
    console.print(wrapped(plain(f"trials used: {m.trials}{elapsed} (budget {m.budget}"
                                f"{', exhausted' if m.budget_exhausted else ''}{left})"), indent=2))


def _print_closing(result: ReplayResult, console: Console, said: str | None = None) -> None:
    """The server's output and the warnings (but SAID)."""
    if result.server_log:
        console.print(wrapped(line("server output: ", result.server_log), indent=2))
    for warning in result.warnings:
        if warning == said:
            continue
        console.print(wrapped(line(("warning:", "yellow"), " ", warning), indent=2))
    if result.schedule_kept is False:
        console.print(wrapped(line(("warning:", "yellow"), " the schedule was not kept (p99 "
                                   "lateness over --late-threshold): a non-reproduction may be "
                                   "the replay's timing"), indent=2))
