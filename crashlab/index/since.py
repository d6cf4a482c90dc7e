"""``--since``: an age (90s, 30m, 2h, 3d, 1w) or an ISO 8601 date or time (2026-11-23,
2026-11-23T20:15, UTC unless it names a zone), as seconds since the epoch."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from ..errors import BadInput

_AGE = re.compile(r"^(?P<count>\d+(?:\.\d+)?)\s*(?P<unit>[smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse(text: str, now: float | None = None) -> float:
    age = _AGE.match(text.strip().lower())
    if age:
        return (time.time() if now is None else now) - float(age["count"]) * _SECONDS[age["unit"]]
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(f"--since {text}: neither an age (2h, 3d) nor an ISO date (2026-11-23)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()
