"""environment.json in a run directory: written by ``crashlab serve`` at launch, read back by
``crashlab report``."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from ..errors import BadInput
from .model import Environment

FILE = "environment.json"


def load(run_dir: Path) -> Environment | None:
    """The Environment a run captured at launch; None when it has none (a run of an older
    crashlab, or one whose capture had not ended); BadInput when the file is not one."""
    path = Path(run_dir) / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot be read ({exc})") from None
    try:
        return Environment.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise BadInput(f"{path}: not an environment crashlab wrote ({first})") from None
