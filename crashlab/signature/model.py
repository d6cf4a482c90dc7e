"""CrashSignature: what makes two crashes the same bug, as one versioned object.

The crash index keys on (version, hash) and keeps the whole object; reports carry it as their
optional ``signature`` field (``crashlab schema signature``). Like every published object it is
open: a later crashlab may add fields and kinds.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: The rules' version: bumped whenever a rule changes what a signature's text is, so that an
#: index never compares texts made by different rules.
VERSION = 1
#: What kind of crash a signature names.
SignatureKind = Literal["gpu-fault", "gpu-hang", "collateral", "python-exception", "signal",
                        "nccl-timeout", "cuda-error", "exit", "unknown"]
#: Hex digits of the hash: 48 bits, so that 10^6 distinct signatures collide with odds of about
#: 2 in a million.
HASH_DIGITS = 12


class CrashSignature(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    version: int = Field(VERSION, description="the signature rules' version; texts of different "
                                              "versions are not compared")
    kind: SignatureKind
    text: str = Field(description="the canonical text: kind and parts, one line")
    hash: str = Field(pattern=r"^[0-9a-f]{12}$",
                      description="first 12 hex digits of SHA-256 over version and text")
    title: str = Field(description="one line for a human")
    search: str = Field(description="a query for an issue tracker's search box")
    parts: list[str] = Field(description="the components of text, in order")
    notes: list[str] = Field(default_factory=list,
                             description="why it looks as it does: which rules fired")

    @property
    def short(self) -> str:
        """How views print it: hash and title on one line."""
        return f"{self.hash} {self.title}"


def seal(kind: str, parts: list[str], title: str, search: str, notes: list[str]) -> CrashSignature:
    """The signature of ``parts``: its text, and the hash of version and text."""
    text = f"{kind}: " + " | ".join(parts)
    digest = hashlib.sha256(f"{VERSION}\n{text}".encode()).hexdigest()[:HASH_DIGITS]
    return CrashSignature(version=VERSION, kind=kind, text=text, hash=digest, title=" ".join(title.split())[:200],
                          search=search, parts=parts, notes=notes)
