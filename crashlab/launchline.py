"""Reading a server's launch line as its argparse would: what serve launches and what replay's
--restart-cmd starts are the same kind of command, read by the same rules. Also the launch as
serve recorded it (an incarnation's launch.json), read back by one reader."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

#: SGLang's options for the model and the parallel sizes, in every spelling its argparse takes.
SGLANG_MODEL = ("--model-path", "--model")
SGLANG_TP = ("--tensor-parallel-size", "--tp-size", "--tp")
SGLANG_PP = ("--pipeline-parallel-size", "--pp-size", "--pp")
SGLANG_EP = ("--expert-parallel-size", "--ep-size", "--ep")
SGLANG_DP = ("--data-parallel-size", "--dp-size")
#: launch.json holds a command line and an environment: kilobytes. A run directory from another
#: machine with a larger one is not read (memory in proportion to the input, not beyond).
_LAUNCH_LIMIT = 4 << 20


def option_value(argv: list[str], flag: str | tuple[str, ...]) -> str | None:
    """The value of ``flag X`` or ``flag=X``, FLAG one spelling or all of an option's (the last
    one on the line wins, as with argparse, whatever its spelling)."""
    flags = (flag,) if isinstance(flag, str) else flag
    found = None
    for i, token in enumerate(argv):
        if token in flags and i + 1 < len(argv):
            found = argv[i + 1]
        elif "=" in token and token.split("=", 1)[0] in flags:
            found = token.split("=", 1)[1]
    return found


def bearer(argv: list[str], key: str | None = None) -> dict[str, str]:
    """The header SGLang asks of every endpoint but /health*, /ready* and /metrics once it was
    started with ``--api-key`` (``decide_request_auth`` in SGLang's srt/utils/auth.py): for
    ``key``, else for the launch line's own."""
    key = key or option_value(argv, "--api-key")
    return {"Authorization": f"Bearer {key}"} if key else {}


def disaggregation_role(argv: list[str]) -> str:
    """What an SGLang server is in a PD-disaggregated deployment: ``prefill`` or ``decode``
    from its ``--disaggregation-mode`` (SGLang's choices: null, prefill, decode; null, the
    default, is a server that is not disaggregated), else ``plain``."""
    mode = option_value(argv, "--disaggregation-mode")
    return mode if mode in ("prefill", "decode") else "plain"


@dataclass(frozen=True)
class RecordedLaunch:
    """An incarnation's launch.json (crashlab.supervise.rundir): the line and environment as run,
    secrets masked. A missing, damaged or foreign file reads as an empty launch: each reader has
    another source (the manifest's command) or goes without."""

    argv: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> RecordedLaunch:
        try:
            if path.stat().st_size > _LAUNCH_LIMIT:
                return cls()
            found = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return cls()
        if not isinstance(found, dict):
            return cls()
        argv, environment = found.get("argv"), found.get("environment")
        return cls(argv=[a for a in argv if isinstance(a, str)] if isinstance(argv, list) else [],
                   environment={str(k): v for k, v in environment.items() if isinstance(v, str)}
                   if isinstance(environment, dict) else {})
