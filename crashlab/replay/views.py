"""Terminal and JSON renderings of a CrashDump and a ReplayResult (prompts shortened)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

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


def render_result(result: ReplayResult, console: Console) -> None:
    for attempt in result.attempts:
        verdict = "[bold red]crashed[/]" if attempt.reproduced else "[green]no crash[/]"
        lag = (f", send lag p50 {attempt.lag_p50_s * 1000:.2f} ms p99 {attempt.lag_p99_s * 1000:.2f} ms"
               if attempt.lag_p50_s is not None else "")
        console.print(f"attempt {attempt.number}: {verdict} — {attempt.sent}/{len(attempt.requests)} "
                      f"sent, {attempt.ok} ok, {attempt.divergences} diverged, "
                      f"{attempt.duration_s:.2f} s{lag}")
        for signal in attempt.signals:
            console.print(f"  [red]{signal.kind}[/] at {signal.at_s:.2f} s: {signal.detail}",
                          soft_wrap=True)
        problems = [o for o in attempt.requests if o.status != "ok" or o.divergence]
        if problems:
            table = Table(show_edge=False, pad_edge=False)
            for column in ("#", "rid", "status", "detail"):
                table.add_column(column, overflow="fold")
            for outcome in problems[:_PROBLEM_ROWS]:
                detail = outcome.error or ""
                if outcome.divergence:
                    d = outcome.divergence
                    detail = (f"{d.compared} differ at {d.first_difference}: "
                              f"recorded {d.recorded!r}, replayed {d.replayed!r}")
                table.add_row(str(outcome.index), short_text(str(outcome.rid), 20),
                              outcome.status, detail)
            console.print(table)
            if len(problems) > _PROBLEM_ROWS:
                console.print(f"  … and {len(problems) - _PROBLEM_ROWS} more (--json has them all)")
    if result.minimization:
        m = result.minimization
        if m.minimal:
            console.print(f"[bold]minimal reproducer:[/] {len(m.minimal)} of {m.original} requests "
                          f"(indices {m.minimal[:20]}{' …' if len(m.minimal) > 20 else ''}), "
                          f"written to {m.output}")
        console.print(f"trials used: {m.trials} (budget {m.budget}"
                      f"{', exhausted' if m.budget_exhausted else ''})")
    if result.server_log:
        console.print(f"server output: {result.server_log}")
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    console.print(f"[bold]reproduced {result.reproductions}/{len(result.attempts)}[/]"
                  + (f" (asked for {result.repeat})" if len(result.attempts) != result.repeat else ""))
