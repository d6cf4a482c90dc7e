"""The table of known upstream fixes (fixes.json, shipped as package data) and how a fix stands
against the version that crashed (syzbot's "patched on / missing on")."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from urllib.parse import urlsplit

from packaging.version import InvalidVersion, Version
from pydantic import field_validator, model_validator

from ..published import ClosedModel
from ..report.model import FixStatus, KnownFix
from .names import UNKNOWN


def is_web_link(text: str) -> bool:
    """An http(s) address with a host: a page may make a link of it (a javascript: or data:
    link from a report read from elsewhere would run in the reader's page)."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return text == text.strip() and parts.scheme in ("http", "https") and bool(parts.netloc)


class FixEntry(ClosedModel):
    """One row of fixes.json: what it matches, and the fix (docs/owner.md)."""

    artifact: str
    """The artifact the fix is in, as Owner.artifact names it."""
    kernel_pattern: str | None = None
    """A regular expression searched in the demangled kernel name, its return type taken off."""
    signature: str | None = None
    """A crash signature hash, or its prefix."""
    fixed_in: str | None = None
    """The first release of the artifact holding the fix (PEP 440); absent where no release
    holds one yet (a row for its workaround, or to mark the crash fatal)."""
    link: str
    """The upstream pull request, issue or release note."""
    summary: str
    """One line on what was fixed."""
    source: str
    """Where the row came from: what says that this release holds the fix."""
    workaround: str | None = None
    """A flag, setting or release that avoids the crash until the fix is in."""
    workaround_source: str | None = None
    """The page that gives the workaround (an http(s) address); required with a workaround."""
    fatal: bool = False
    """The crash comes back on every start: advice says stop, not restart."""

    @field_validator("artifact")
    @classmethod
    def _named(cls, value: str) -> str:
        if value == UNKNOWN:
            raise ValueError(f"a fix is in a named artifact, not {UNKNOWN!r}")
        return value

    @field_validator("kernel_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"kernel_pattern {value!r} is not a regular expression: {exc}") from None
        return value

    @field_validator("link", "workaround_source")
    @classmethod
    def _web(cls, value: str | None) -> str | None:
        if value is not None and not is_web_link(value):
            raise ValueError(f"{value!r} is not an http(s) address")
        return value

    @field_validator("fixed_in")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None:
            Version(value)
        return value

    @model_validator(mode="after")
    def _matches_something(self) -> FixEntry:
        if self.kernel_pattern is None and self.signature is None:
            raise ValueError("a fix needs a kernel_pattern or a signature to match")
        if self.fixed_in is None and self.workaround is None and not self.fatal:
            raise ValueError("a row needs a fixed_in release, a workaround or fatal: true")
        if (self.workaround is None) != (self.workaround_source is None):
            raise ValueError("a workaround and its workaround_source come together")
        return self

    def matches(self, artifact: str, kernel: str, signature: str | None) -> bool:
        if artifact != self.artifact:
            return False
        if self.signed(signature):
            return True
        return self.kernel_pattern is not None and re.search(self.kernel_pattern, kernel) is not None

    def signed(self, signature: str | None) -> bool:
        """The row is keyed on SIGNATURE's hash (or a prefix of it)."""
        return self.signature is not None and signature is not None and \
            signature.startswith(self.signature)

    def known(self) -> KnownFix:
        return KnownFix.model_construct(artifact=self.artifact, fixed_in=self.fixed_in, link=self.link,
                        summary=self.summary, workaround=self.workaround,
                        workaround_source=self.workaround_source, fatal=self.fatal)


class FixTable(ClosedModel):
    """fixes.json: a note on the table, then its rows."""

    about: str
    """What the table is and what was left out of it, and why."""
    fixes: list[FixEntry]
    """The known fixes, first match wins."""


def parse(text: str) -> FixTable:
    return FixTable.model_validate_json(text)


@lru_cache(maxsize=1)
def shipped() -> FixTable:
    """The table crashlab ships."""
    return parse(resources.files(__package__).joinpath("fixes.json").read_text(encoding="utf-8"))


def find(table: FixTable, artifact: str, kernel: str, signature: str | None) -> FixEntry | None:
    return next((fix for fix in table.fixes if fix.matches(artifact, kernel, signature)), None)


def by_signature(table: FixTable, signature: str) -> FixEntry | None:
    """The first row keyed on SIGNATURE, whatever its artifact: a crash with no GPU dump has no
    owner to match a row by (a Python exception, a host signal)."""
    return next((fix for fix in table.fixes if fix.signed(signature)), None)


def status(fix: FixEntry | None, version: str | None) -> FixStatus:
    if fix is None:
        return "no-known-fix"
    if fix.fixed_in is None:
        return "not-released"
    try:
        running = Version(version) if version else None
    except InvalidVersion:
        running = None
    if running is None:
        return "version-unknown"
    return "fixed-in-later" if running < Version(fix.fixed_in) else "fixed-in-this"
