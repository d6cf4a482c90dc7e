"""crashlab schema: the JSON Schema of each document crashlab prints."""

from __future__ import annotations

import importlib
import json

import click

from ..guard import GuardedCommand

#: crashlab schema WHICH: the model of that JSON ("module:class", imported only when asked
#: for), and what prints it (for schema --help).
SCHEMA_TABLE = (
    ("triage", "crashlab.report.model:TriageReport", "what inspect --json prints; the default"),
    ("run", "crashlab.report.run:RunReport", "serve's report.json"),
    ("replay", "crashlab.replay.result:ReplayResult", "what replay --json prints with --url"),
    ("listing", "crashlab.replay.result:DumpListing",
     "what replay --json prints without --url: the dump's requests"),
    ("environment", "crashlab.env.model:Environment",
     "what env --json prints; serve's environment.json"),
    ("doctor", "crashlab.env.doctor:DoctorReport", "what doctor --json prints"),
    ("report-bundle", "crashlab.issue.model:IssueReport",
     "what report --json prints; report.json in its bundle"),
    ("signature", "crashlab.report.signature:CrashSignature",
     "the crash signature the reports carry and the crash index keeps"),
    ("crash-list", "crashlab.index.records:CrashList", "what list --json prints"),
    ("crash-show", "crashlab.index.records:Shown", "what show --json prints"),
    ("crash-gc", "crashlab.index.records:Collection", "what gc --json prints"),
    ("bisect", "crashlab.bisect.model:BisectResult", "what bisect --json prints"),
    ("incident-list", "crashlab.index.records:IncidentList",
     "what list --incidents --json prints"),
    ("hang", "crashlab.hangs.model:HangReading",
     "what inspect RUN_DIR --json prints: a hang capture read across its ranks"),
    ("xid-triage", "crashlab.report.kernellog:XidTriage",
     "what inspect --kernel-log FILE --json prints with no coredump"),
)

#: crashlab schema WHICH -> the model of that JSON ("module:class").
SCHEMAS = {which: model for which, model, _ in SCHEMA_TABLE}


def _help() -> str:
    """schema's help, its WHICH made from the table so that a schema added there is listed."""
    which = "; ".join(f"{key} ({about})" for key, _, about in SCHEMA_TABLE)
    return f"Print the JSON Schema of a report.\n\nWHICH is one of: {which}."


@click.command(cls=GuardedCommand, help=_help())
@click.argument("which", type=click.Choice(list(SCHEMAS)), default="triage")
def schema(which: str) -> None:
    from ..report.schema import json_schema

    module, name = SCHEMAS[which].split(":")
    click.echo(json.dumps(json_schema(getattr(importlib.import_module(module), name), which),
                          indent=2))
