"""Terminal and JSON renderings of a CrashDump and a ReplayResult (prompts shortened)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .records import CrashDump, Request
from .result import ReplayResult

TEXT_CHARS = 80
IDS_SHOWN = 16
_PROBLEM_ROWS = 20


def short_text(text: str | None, limit: int = TEXT_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} chars)"


def _short_ids(ids):
    if not isinstance(ids, list) or len(ids) <= IDS_SHOWN:
        return ids
    return ids[:IDS_SHOWN]


def dump_json(dump: CrashDump) -> dict:
    """The dump as --json prints it: texts cut to 80 characters, id lists to their first 16."""
    data = dump.model_dump(mode="json")
    for request in data["requests"]:
        for holder, key in ((request, "text"), (request["output"], "text")):
            value = holder[key]
            holder[key] = ([short_text(item) for item in value] if isinstance(value, list)
                           else short_text(value))
        for holder, key in ((request, "input_ids"), (request["output"], "output_ids")):
            if isinstance(holder[key], list):
                holder[f"{key}_count"] = len(holder[key])
                holder[key] = _short_ids(holder[key])
    return data


def _prompt(request: Request) -> str:
    if request.input_ids is not None:
        ids = request.input_ids
        shown = " ".join(map(str, ids[:6])) if ids and isinstance(ids[0], int) else "batch"
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


def render_dump(dump: CrashDump, console: Console) -> None:
    console.print(f"[bold]{dump.path}[/]: {dump.layout}, {len(dump.requests)} requests, "
                  f"{len(dump.in_flight)} in flight at the crash")
    if dump.server_args:
        args = dump.server_args
        console.print(f"server: {args.get('model_path')}  tp={args.get('tp_size')}  "
                      f"port={args.get('port')}" + (f"  ({dump.server_args_class})"
                                                     if dump.server_args_class else "  (plain dict)"))
    if dump.launch_command:
        console.print(f"launched as: {dump.launch_command}", soft_wrap=True)
    table = Table(show_edge=False, pad_edge=False)
    for column in ("#", "+t s", "kind", "rid", "prompt", "max new", "temp", "flags", "state"):
        table.add_column(column, no_wrap=column not in ("prompt", "flags"), overflow="fold",
                         min_width=24 if column == "prompt" else None)
    for request in dump.requests:
        params = request.sampling_params
        done = request.output
        state = f"{done.finish_reason or ''} {done.completion_tokens or ''}".strip()
        table.add_row(str(request.index), f"{request.offset_s:.3f}", request.kind[:3],
                      short_text(str(request.rid), 24), _prompt(request),
                      str(params.get("max_new_tokens", "")), str(params.get("temperature", "")),
                      _flags(request), "[red]in flight[/]" if request.in_flight else state)
    console.print(table)
    for warning in dump.warnings:
        console.print(f"[yellow]warning:[/] {warning}")


_VERDICT_STYLE = {"reproduced": "bold red", "crashed": "bold red", "different crash": "bold yellow",
                  "unconfirmed": "yellow", "no crash": "green"}


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f}"


def _line(*parts) -> Text:
    """A line of (text, style) parts; every text is plain data, never markup."""
    line = Text()
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        line.append(text, style=style)
    return line


def render_result(result: ReplayResult, console: Console) -> None:
    """The result as text; strings from the dump, the server and its log are printed as data."""
    if result.expected:
        e = result.expected
        wanted = [f"class {e.fault_class}" if e.fault_class else "", f"kernel {e.kernel}" if e.kernel else ""]
        wanted += [f"/{pattern}/" for pattern in e.patterns]
        console.print(_line("expected crash: ", ", ".join(filter(None, wanted)), f" (from {e.source})"),
                      soft_wrap=True)
    if result.force_decode:
        f = result.force_decode
        console.print(_line("forced decode: ", (f.used, "bold"),
                            f" ({f.requests} requests): {f.reason}"), soft_wrap=True)
        if f.probe:
            console.print(_line("  probe: ", f.probe), soft_wrap=True)
    if result.harden:
        env = " ".join(f"{key}={value}" for key, value in result.harden.env.items())
        console.print(_line("hardened (", result.harden.profile, "): ", env + " " if env else "",
                            result.harden.command), soft_wrap=True)
    for attempt in result.attempts:
        console.print(_line(f"attempt {attempt.number}: ",
                            (attempt.verdict, _VERDICT_STYLE[attempt.verdict]),
                            f" — {attempt.answered} answered, {attempt.failed_after_send} failed after "
                            f"send, {attempt.never_sent} never sent (of {len(attempt.requests)}); "
                            f"{attempt.ok} ok, {attempt.divergences} diverged, "
                            f"{attempt.duration_s:.2f} s"))
        if attempt.schedule and attempt.schedule.late_p50_s is not None:
            sched = attempt.schedule
            kept = {True: ("kept", "green"), False: ("NOT KEPT", "bold yellow"),
                    None: ("no schedule", "")}[sched.kept]
            console.print(_line(f"  schedule: late p50 {_ms(sched.late_p50_s)} ms, p99 "
                                f"{_ms(sched.late_p99_s)} ms, max {_ms(sched.late_max_s)} ms "
                                f"(threshold p99 {_ms(sched.threshold_s)} ms): ", kept))
        if attempt.mismatch:
            console.print(_line("  ", ("mismatch", "yellow"), ": ", attempt.mismatch), soft_wrap=True)
        for signal in attempt.signals:
            console.print(_line("  ", (signal.kind, "red"), f" at {signal.at_s:.2f} s: ", signal.detail),
                          soft_wrap=True)
        problems = [o for o in attempt.requests if o.status != "ok" or o.divergence]
        if problems:
            table = Table(show_edge=False, pad_edge=False)
            for column in ("#", "rid", "status", "delivery", "detail"):
                table.add_column(column, overflow="fold")
            for outcome in problems[:_PROBLEM_ROWS]:
                detail = outcome.error or ""
                if outcome.divergence:
                    d = outcome.divergence
                    detail = (f"{d.compared} differ at {d.first_difference}: "
                              f"recorded {d.recorded!r}, replayed {d.replayed!r}")
                table.add_row(str(outcome.index), Text(short_text(str(outcome.rid), 20)),
                              outcome.status, outcome.delivery, Text(detail))
            console.print(table)
            if len(problems) > _PROBLEM_ROWS:
                console.print(f"  … and {len(problems) - _PROBLEM_ROWS} more (--json has them all)")
    if result.minimization:
        m = result.minimization
        if m.minimal:
            console.print(_line(("minimal reproducer:", "bold"),
                                f" {len(m.minimal)} of {m.original} requests (indices "
                                f"{m.minimal[:20]}{' …' if len(m.minimal) > 20 else ''}), written to ",
                                str(m.output)), soft_wrap=True)
        console.print(f"trials used: {m.trials} (budget {m.budget}"
                      f"{', exhausted' if m.budget_exhausted else ''})")
    if result.server_log:
        console.print(_line("server output: ", result.server_log), soft_wrap=True)
    for warning in result.warnings:
        console.print(_line(("warning:", "yellow"), " ", warning), soft_wrap=True)
    if result.schedule_kept is False:
        console.print(_line(("warning:", "yellow"), " the schedule was not kept (p99 lateness over "
                            "--late-threshold): a non-reproduction may be the replay's timing"))
    summary = f"reproduced {result.reproductions}/{len(result.attempts)}"
    if len(result.attempts) != result.repeat:
        summary += f" (asked for {result.repeat})"
    console.print(Text(summary, style="bold"))
