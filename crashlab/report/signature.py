"""CrashSignature: what makes two crashes the same bug, as one versioned object.

The crash index keys on (version, hash) and keeps the whole object; reports carry it as their
optional ``signature`` field (``crashlab schema signature``). Like every published object it is
open: a later crashlab may add fields and kinds.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field

from ..published import ClosedModel, empty_list

#: The rules' version: bumped whenever a rule changes what a signature's text is, so that an
#: index never compares texts made by different rules. 2: a site without a source line is the
#: offset alone (1 added nvdisasm's opcode), and a source line no longer needs nvdisasm.
VERSION = 2
#: What kind of crash a signature names.
SignatureKind = Literal["gpu-fault", "gpu-xid", "gpu-hang", "collateral", "collective-hang",
                        "python-exception", "signal", "nccl-timeout", "cuda-error", "exit", "unknown"]
#: Hex digits of the hash: 48 bits, so that 10^6 distinct signatures collide with odds of about
#: 2 in a million.
HASH_DIGITS = 12


class CrashSignature(ClosedModel):
    """What makes two crashes the same bug: a canonical text made by versioned rules from the
    crash's kind and parts, and its hash."""

    schema_version: Literal[1] = 1
    """Always 1 in this schema; changes only when a field is renamed or removed, or changes type
    or meaning."""
    version: int = VERSION
    """the signature rules' version; texts of different versions are not compared"""
    kind: SignatureKind
    """What kind of crash it names: a GPU fault, a GPU fault known only from the driver's Xid
    lines (no dump), a GPU hang, a collateral dump, a hang across
    ranks (a collective a rank never entered or entered differently), a Python exception, a host
    signal, an NCCL timeout, a CUDA error in the log, a plain exit, or unknown."""
    text: str
    """the canonical text: kind and parts, one line"""
    hash: str = Field(pattern=r"^[0-9a-f]{12}$")
    """first 12 hex digits of SHA-256 over version and text"""
    title: str
    """one line for a human"""
    search: str
    """a query for an issue tracker's search box"""
    parts: list[str]
    """the components of text, in order"""
    notes: list[str] = Field(default_factory=empty_list)
    """why it looks as it does: which rules fired"""
    coarse: str | None = Field(None, pattern=r"^[0-9a-f]{12}$")
    """hash of the signature without its site (source line, offset, innermost frames): the same
    bug across releases, where lines move; absent in signatures made before it existed"""

    @property
    def short(self) -> str:
        """How views print it: hash and title on one line."""
        return f"{self.hash} {self.title}"


def seal(kind: SignatureKind, parts: list[str], title: str, search: str, notes: list[str],
         coarse_parts: list[str] | None = None) -> CrashSignature:
    """The signature of ``parts``: its text, the hash of version and text, and the coarse hash
    of ``coarse_parts``, the parts without their sites (all parts where None: nothing in them
    moves between releases). Made without its validator (inspect's terminal view builds none):
    mypy holds ``kind`` to the set, and the hashes are the digests below."""
    text = f"{kind}: " + " | ".join(parts)
    coarse_text = f"{kind}: " + " | ".join(parts if coarse_parts is None else coarse_parts)
    return CrashSignature.model_construct(version=VERSION, kind=kind, text=text, hash=_digest(text),
                          title=" ".join(title.split())[:200], search=search, parts=parts,
                          notes=notes, coarse=_digest(f"coarse\n{coarse_text}"))


def _digest(text: str) -> str:
    return hashlib.sha256(f"{VERSION}\n{text}".encode()).hexdigest()[:HASH_DIGITS]
