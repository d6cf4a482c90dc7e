"""The prefixes a server's logger puts before a line's message, in one place: the log scanner
reads ranks from them, the headline and the report's folding of repeats look past them.

torch.distributed prefixes every line of a rank with ``[rankN]:``; SGLang's logger starts a
record with ``[2026-01-01 12:00:00 TP0 EP0]`` (the tags only in multi-rank processes).
"""

from __future__ import annotations

import re

TORCH_RANK = re.compile(r"^\[(?P<rank>rank\d+)\]: ?")
#: Searched, not matched: when a scheduler dies, nanobind's leak report can end without a newline,
#: and SGLang's next record is glued to it ("...leaked 3 types![2026-... TP0] SIGQUIT received").
SGLANG_TAGS = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?P<tags>(?: [A-Z_]+\d+)+)\]")
#: SGLang's logger prefix ("[2026-06-01 12:00:01 TP0] ") with anything glued before it.
SGLANG_PREFIX = re.compile(r"^.*?\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]\s*")


def message(text: str) -> str:
    """A line without its rank prefix and SGLang's time and tags: the same message printed by
    several ranks, or at several times, reads the same."""
    return SGLANG_PREFIX.sub("", TORCH_RANK.sub("", text.strip()), count=1)
