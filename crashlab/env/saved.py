"""environment.json in a run directory: written by ``crashlab serve`` at launch, read back by
``crashlab report``."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from ..errors import BadInput
from .model import Environment

FILE = "environment.json"


class UnusableEnvironment(BadInput):
    """environment.json is there but cannot be used; ``reason`` says why without its path, as a
    predicate of it ("was written by a newer crashlab (...)")."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.reason = reason


def load(run_dir: Path) -> Environment | None:
    """The Environment a run captured at launch; None when it has none (a run of an older
    crashlab, or one whose capture had not ended); UnusableEnvironment when the file is not one
    this crashlab can read (damaged, or written by a newer crashlab with fields it does not know)."""
    path = Path(run_dir) / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableEnvironment(path, f"cannot be read ({exc})") from None
    try:
        return Environment.model_validate(json.loads(text))
    except ValidationError as exc:
        unknown = sorted({".".join(map(str, error["loc"])) for error in exc.errors()
                          if error["type"] == "extra_forbidden"})
        if unknown and len(unknown) == exc.error_count():
            raise UnusableEnvironment(path, "was written by a newer crashlab (fields this one does not "
                                            f"know: {', '.join(unknown)})") from None
        first = str(exc).splitlines()[0]
        raise UnusableEnvironment(path, f"is not an environment crashlab wrote ({first})") from None
    except ValueError as exc:
        raise UnusableEnvironment(path, f"is not an environment crashlab wrote ({exc})") from None
