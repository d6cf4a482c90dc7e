"""Reading a JSON file another crashlab wrote: a manifest, a run report, an environment.

Published objects are open (crashlab.report.schema): a later crashlab of the same
``schema_version`` adds fields. A run directory made by a newer crashlab is read by dropping
what this one does not know, never refused: the fields it knows keep their meaning within a
``schema_version``, and a field it cannot name never reaches a report it cleans for privacy.
crashlab's own writes stay closed (``extra="ignore"``), so it cannot write an undescribed field.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

Model = TypeVar("Model", bound=BaseModel)


class ClosedModel(BaseModel):
    """The base of every model crashlab writes. Closed (``extra="forbid"``): crashlab cannot write
    a field its schema does not describe, while ``parse`` reads a later crashlab's open. A field's
    description may be the docstring under it, as for any attribute (``use_attribute_docstrings``):
    the schema reads as the code does."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def parse(model: type[Model], data: str | bytes | dict[str, Any]) -> Model:
    """``model`` from JSON text or parsed JSON, with the fields of a later crashlab left out."""
    if isinstance(data, dict):
        return model.model_validate(data, extra="ignore")
    return model.model_validate_json(data, extra="ignore")
