"""Reading a JSON file another crashlab wrote: a manifest, a run report, an environment.

Published objects are open (crashlab.report.schema): a later crashlab of the same
``schema_version`` adds fields. A run directory made by a newer crashlab is read by dropping
what this one does not know, never refused: the fields it knows keep their meaning within a
``schema_version``, and a field it cannot name never reaches a report it cleans for privacy.
crashlab's own writes stay closed (``extra="ignore"``), so it cannot write an undescribed field.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from functools import cache
from itertools import pairwise
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

Model = TypeVar("Model", bound=BaseModel)


class DescribedSchema(GenerateJsonSchema):
    """pydantic's JSON Schema with each field's description taken from the docstring under it.

    Read when a schema is asked for, not when a model class is made: pydantic's own reading
    (``use_attribute_docstrings``) tokenises each class's source at import, about a third of the
    cost of importing the report model, on every command, for a text only a schema shows."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        published = super().model_schema(schema)
        documented = attribute_docstrings(schema["cls"])
        for name, field in published.get("properties", {}).items():
            if name in documented and "description" not in field:
                field["description"] = documented[name]
        return published


def empty_list() -> list[Any]:
    """A new empty list: the default of a model's list field (``Field(default_factory=empty_list)``).

    pydantic reads a default factory's signature each time it builds a schema with the field and
    each time ``model_construct`` leaves the field out; a builtin's (``list``) is parsed from its
    text signature, about half a millisecond each, a Python function's is read at once."""
    return []


class ClosedModel(BaseModel):
    """The base of every model crashlab writes. Closed (``extra="forbid"``): crashlab cannot write
    a field its schema does not describe, while ``parse`` reads a later crashlab's open. A field's
    description may be the docstring under it, as for any attribute (DescribedSchema): the schema
    reads as the code does. A model's validator and serializer are built when first used
    (``defer_build``), so a command that neither validates nor serializes a model, as the terminal
    view of a dump does not, never pays for building them."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("schema_generator", DescribedSchema)
        return super().model_json_schema(*args, **kwargs)


def attribute_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """The docstring under each annotated attribute of ``model`` and of the models it inherits
    from, by attribute name (the nearest class's wins)."""
    documented: dict[str, str] = {}
    for base in reversed(model.__mro__):
        if issubclass(base, BaseModel) and base is not BaseModel:
            documented.update(_own_docstrings(base))
    return documented


@cache
def _own_docstrings(model: type) -> dict[str, str]:
    """The docstrings under the attributes ``model``'s own body annotates; none without source."""
    try:
        source = textwrap.dedent(inspect.getsource(model))
    except (OSError, TypeError):
        return {}
    return _under_attributes(ast.parse(source).body[0])


def _under_attributes(node: ast.stmt) -> dict[str, str]:
    """``{name: docstring}`` for each ``name: type`` of a class body followed by a string."""
    found: dict[str, str] = {}
    body = node.body if isinstance(node, ast.ClassDef) else []
    for statement, following in pairwise(body):
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and \
                isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) and \
                isinstance(following.value.value, str):
            found[statement.target.id] = inspect.cleandoc(following.value.value)
    return found


def parse(model: type[Model], data: str | bytes | dict[str, Any]) -> Model:
    """``model`` from JSON text or parsed JSON, with the fields of a later crashlab left out."""
    if isinstance(data, dict):
        return model.model_validate(data, extra="ignore")
    return model.model_validate_json(data, extra="ignore")
