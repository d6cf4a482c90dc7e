"""The JSON Schema crashlab publishes for each JSON it prints (``crashlab schema``).

The published schema is a contract with programs that read crashlab's reports, so it states only
what stays true for every report of one ``schema_version``, earlier and later crashlab alike:

- objects are open: a later crashlab adds fields, and a validator of today's schema must accept
  them (the Python models stay closed, ``extra="forbid"``, so that crashlab's own code cannot
  write a field the schema does not describe);
- a set of named values (a status, a kind, a verdict) is published as a string whose
  ``examples`` are the values this crashlab writes, not as an ``enum``: a later crashlab may
  write a new one, and an ``enum`` would make today's validators reject it;
- a field added within a version is not required (reports written before it lack it).

rust-minidump's JSON schema (minidump-processor/json-schema.md) makes the same promises.
"""

from __future__ import annotations

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from ..published import DescribedSchema
from .model import TriageReport

#: The JSON Schema dialect pydantic writes.
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: The rules above, as a consumer reads them at the top of every published schema.
STABILITY = (
    "Stable within a schema_version: fields are added, never renamed, removed or given another "
    "type, and a report may carry fields this schema does not list (objects are open). A field "
    "added within the version is not required: reports older than it lack it. What a report "
    "cannot fill is null or an empty list. Addresses are hex strings ('0x' and hex digits). A "
    "string with 'examples' is a set of named values that may grow: accept a value you do not "
    "know. schema_version changes only when a field is renamed or removed, or changes type or "
    "meaning.")


class _PublishedSchema(DescribedSchema):
    """pydantic's schema, with open objects and named values that may grow."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        published = super().model_schema(schema)
        if published.get("additionalProperties") is False:
            del published["additionalProperties"]
        return published

    def generate(self, schema: core_schema.CoreSchema, mode="validation") -> JsonSchemaValue:
        return _unwrapped(super().generate(schema, mode))

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        values = schema["expected"]
        if not all(isinstance(value, str) for value in values):
            return super().literal_schema(schema)
        return {"type": "string", "examples": list(values)}


def _unwrapped(node):
    """Every description on one line: they are docstrings, wrapped to fit the source, and a
    reader (or a generated reference page) shows each as one paragraph."""
    if isinstance(node, dict):
        return {key: " ".join(value.split()) if key == "description" and isinstance(value, str)
                else _unwrapped(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_unwrapped(value) for value in node]
    return node


def json_schema(model: type[BaseModel] = TriageReport, name: str = "triage") -> dict:
    """The JSON Schema of one of crashlab's JSON outputs, with the ``$schema`` a validator needs
    and an ``$id`` naming the output and its schema_version (a URN: nothing is hosted)."""
    version = model.model_fields["schema_version"].default
    return {"$schema": JSON_SCHEMA_DIALECT, "$id": f"urn:crashlab:schema:{name}:v{version}",
            **model.model_json_schema(schema_generator=_PublishedSchema), "description": STABILITY}
