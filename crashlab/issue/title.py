"""The issue's title, which is what a maintainer reads first on a tracker. It starts with the
crash's signature title (exception, kernel, source line: what makes two reports the same bug),
then the versions that tell whether it may already be fixed (sglang, torch, driver, CUDA), in at
most TITLE_CHARS characters, cut at a word. A pid or a consequence ("scheduler TP0 (pid 5226)
killed by SIGABRT") means nothing on another machine and pushed the kernel past the cut.
"""

from __future__ import annotations

import re

from ..escape import escape

PREFIX = "[Bug] "
#: GitHub shows about this much of a title in its issue list.
TITLE_CHARS = 120
#: The least room the crash keeps in the title: versions that would take more are left to the body.
MIN_HEADLINE = 60
_BOUNDARY = re.compile(r"\b")


def _one_line(text: str) -> str:
    """Outside text as one line: what does not print escaped, runs of white space one space."""
    return escape(" ".join(text.split()))


def _shortened(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters with "…", cut at the last word boundary (a
    space, or the edge of an identifier: ``flashinfer::`` | ``BatchPrefill``), unless that
    loses more than half the room (one very long name): then where it must be."""
    if len(text) <= width:
        return text
    ends = [match.start() for match in _BOUNDARY.finditer(text, 0, width)]
    at = max((end for end in ends if end <= width - 1), default=0)
    cut = text[:at] if at > width // 2 else text[: width - 1]
    return cut.rstrip(" ,;:") + "…"


def _versions(versions: list[str]) -> str:
    return f" ({_one_line(', '.join(versions))})" if versions else ""


def make(headline: str, versions: list[str]) -> str:
    """``[Bug] <headline> (<versions>)``, one line of at most TITLE_CHARS: the versions, most
    telling first, as many as leave the headline MIN_HEADLINE characters (or all of it when it
    is shorter); the rest are in the body's Environment section."""
    shown = _one_line(headline)
    room = TITLE_CHARS - len(PREFIX)
    kept: list[str] = []
    for version in versions:
        if min(len(shown), MIN_HEADLINE) + len(_versions([*kept, version])) > room:
            break
        kept.append(version)
    suffix = _versions(kept)
    return PREFIX + _shortened(shown, room - len(suffix)) + suffix
