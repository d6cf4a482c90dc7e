"""The profiles ``crashlab replay --harden`` names, and what each turns on.

A leaf: the command line lists the profiles as --harden's choices without importing the replay
package (--help stays light); crashlab.replay.harden turns a profile into the command to run.
"""

from __future__ import annotations

from typing import NamedTuple


class Profile(NamedTuple):
    #: run the command under compute-sanitizer's memcheck, coredumps on
    sanitizer: bool
    #: SGLang's own debug switches (a poisoned KV pool, strict memory checks, the KV canary)
    sglang: bool


#: --harden NAME -> what it turns on; --harden alone is "all".
PROFILES = {
    "sanitizer": Profile(sanitizer=True, sglang=False),
    "sglang": Profile(sanitizer=False, sglang=True),
    "all": Profile(sanitizer=True, sglang=True),
}
