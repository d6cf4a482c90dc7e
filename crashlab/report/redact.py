"""Masking of secrets before anything is written to a run directory or a report.

Run directories and reports get attached to bug reports, so a value is masked when its *name*
says it is a secret (a word of the name ends in PASSWORD, PASSWD, TOKEN, SECRET, KEY or
CREDENTIAL(S): ``HF_TOKEN``, ``PGPASSWORD``, ``--api-key``, ``aws_secret_access_key``), and
credentials written inside URLs (``https://user:pw@host``) are masked wherever they appear.

Words, not substrings: SGLang's own flags and server_info fields are full of ``tokens`` and
``tokenizer`` (``--max-total-tokens 4096``, ``tokenizer_path``), whose values a triage needs.
"""

from __future__ import annotations

import re

MASK = "***"

_SECRET_WORD = re.compile(r"(password|passwd|token|secret|key|credentials?)$", re.IGNORECASE)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")


def is_secret_name(name: str) -> bool:
    return any(_SECRET_WORD.search(word) for word in _WORD_SPLIT.split(name) if word)


def mask_text(text: str) -> str:
    """Mask the credentials inside URLs: ``scheme://user:pw@`` -> ``scheme://user:***@``."""
    def _mask(match: re.Match) -> str:
        user, colon, _ = match["userinfo"].partition(":")
        return f"{match['scheme']}{user + ':' + MASK if colon else MASK}@"
    return _URL_USERINFO.sub(_mask, text)


def mask_environment(env: dict[str, str]) -> dict[str, str]:
    return {name: (MASK if value and is_secret_name(name) else mask_text(value))
            for name, value in env.items()}


def mask_argv(argv: list[str]) -> list[str]:
    """Mask ``--api-key X`` and ``--api-key=X`` (any secret-named option) and URL credentials."""
    masked: list[str] = []
    hide_next = False
    for token in argv:
        if hide_next and not token.startswith("-"):
            masked.append(MASK)
            hide_next = False
            continue
        hide_next = False
        if token.startswith("-"):
            name, equals, _ = token.partition("=")
            if is_secret_name(name.lstrip("-")):
                if equals:
                    masked.append(f"{name}={MASK}")
                    continue
                hide_next = True
        masked.append(mask_text(token))
    return masked


def mask_json(value):
    """A copy of a JSON value with secret-named members and URL credentials masked."""
    if isinstance(value, dict):
        return {key: (MASK if item not in (None, "", [], {}) and is_secret_name(str(key))
                      else mask_json(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [mask_json(item) for item in value]
    if isinstance(value, str):
        return mask_text(value)
    return value
