"""Every published schema explains itself: each property of each object, and each object, carries a
description (attribute and class docstrings, which pydantic turns into them), on one line.

A field added without a docstring fails here, so the schema pages generated from ``crashlab
schema`` never show a bare name.
"""

from __future__ import annotations

import importlib

import pytest

from crashlab.cli.schema import SCHEMAS
from tests.schema_check import published


def objects(schema: dict) -> dict[str, dict]:
    """The document's own object and each of its $defs, by name."""
    return {"(root)": schema, **schema.get("$defs", {})}


@pytest.mark.parametrize("which", sorted(SCHEMAS))
def test_every_property_has_a_description(which):
    bare = [f"{name}.{key}" for name, obj in objects(published(which)).items()
            for key, prop in obj.get("properties", {}).items()
            if not prop.get("description", "").strip()]
    assert bare == []


@pytest.mark.parametrize("which", sorted(SCHEMAS))
def test_every_model_has_a_description(which):
    module, name = SCHEMAS[which].split(":")
    root = getattr(importlib.import_module(module), name)
    assert root.model_json_schema().get("description", "").strip()  # the root's own docstring
    bare = [name for name, obj in published(which).get("$defs", {}).items()
            if obj.get("type") == "object" and not obj.get("description", "").strip()]
    assert bare == []


@pytest.mark.parametrize("which", sorted(SCHEMAS))
def test_descriptions_are_one_line(which):
    wrapped = [name for name, obj in objects(published(which)).items()
               for text in [obj.get("description", "")] + [p.get("description", "") for p in
                                                           obj.get("properties", {}).values()]
               if "\n" in text or "  " in text]
    assert wrapped == []


def test_an_attribute_docstring_is_the_published_description():
    triage = published("triage")
    fault = triage["$defs"]["Fault"]["properties"]
    assert fault["pc_source"]["description"].startswith("Which table the PC was read from")
    assert triage["properties"]["omitted_faults"]["description"] == (
        "Fault groups past the first 256, counted but not listed.")
