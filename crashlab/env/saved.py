"""environment.json in a run directory: written by ``crashlab serve`` at launch, read back by
``crashlab report``."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from ..errors import BadInput
from ..published import parse
from .model import Environment

FILE = "environment.json"


class UnusableEnvironment(BadInput):
    """environment.json is there but cannot be used; ``reason`` says why without its path, as a
    predicate of it ("is not an environment crashlab wrote (...)")."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.reason = reason


def load(run_dir: Path) -> Environment | None:
    """The Environment a run captured at launch; None when it has none (a run of an older
    crashlab, or one whose capture had not ended); UnusableEnvironment when the file is not one
    this crashlab can read (damaged). Fields a later crashlab added are left out (crashlab.published)."""
    path = Path(run_dir) / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableEnvironment(path, f"cannot be read ({exc})") from None
    try:
        return parse(Environment, json.loads(text))
    except ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise UnusableEnvironment(path, f"is not an environment crashlab wrote ({first})") from None
    except ValueError as exc:
        raise UnusableEnvironment(path, f"is not an environment crashlab wrote ({exc})") from None
