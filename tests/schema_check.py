"""A report checked as a consumer would check it: jsonschema against what `crashlab schema` prints."""

from __future__ import annotations

import importlib

from jsonschema import Draft202012Validator

from crashlab.cli.schema import SCHEMAS
from crashlab.report.schema import json_schema


def published(which: str) -> dict:
    module, name = SCHEMAS[which].split(":")
    return json_schema(getattr(importlib.import_module(module), name), which)


def errors(data, which: str) -> list[str]:
    """What a consumer's validator says about ``data`` (nothing: it validates)."""
    schema = published(which)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]
