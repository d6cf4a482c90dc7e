"""The one way times are written in manifests and reports: UTC, ISO 8601, milliseconds."""

from __future__ import annotations

from datetime import datetime, timezone


def of(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="milliseconds")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
