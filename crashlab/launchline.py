"""Reading a server's launch line as its argparse would: what serve launches and what replay's
--restart-cmd starts are the same kind of command, read by the same rules."""

from __future__ import annotations


def option_value(argv: list[str], flag: str) -> str | None:
    """The value of ``flag X`` or ``flag=X`` (the last one wins, as with argparse)."""
    found = None
    for i, token in enumerate(argv):
        if token == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif token.startswith(flag + "="):
            found = token[len(flag) + 1:]
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
