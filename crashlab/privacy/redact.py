"""Masking of secrets before anything is written to a run directory, a report or a terminal.

Run directories and reports get attached to bug reports, so three things are masked:

- a value whose *name* says it is a secret (a word of the name ends in PASSWORD, PASSWD, PASS,
  PWD, TOKEN, SECRET, KEY, CREDENTIAL(S), AUTH, COOKIE, SESSION or PRIVATE: ``HF_TOKEN``,
  ``PGPASSWORD``, ``--api-key``, ``aws_secret_access_key``, ``HF_ENDPOINT_AUTH``; the shell's
  PWD and OLDPWD are folders), in argv, the environment, JSON, and in log text written as
  ``name=value`` or ``name: value``, quoted or not (``api_key='sk-...'``, ``"token": "..."``,
  ``--api-key sk-...``);
- credentials wherever they appear: inside URLs (``https://user:pw@host``), after
  ``Authorization:`` or ``Bearer``, and tokens of a well-known shape (``hf_...``, ``sk-...``,
  ``ghp_...``, ``github_pat_...``, ``AKIA...``, ``xoxb-...``, JWTs);
- the secret values of the launch itself (a :class:`Redactor` made by :meth:`Redactor.for_launch`
  knows them), wherever they appear, whatever surrounds them.

Words, not substrings: SGLang's own flags and server_info fields are full of ``tokens`` and
``tokenizer`` (``--max-total-tokens 4096``, ``tokenizer_path``), whose values a triage needs;
in log text the secret word must end the name (``KeyError: 'x'`` stays). Bare numbers, None,
null, true and false are not credentials (``#new-token: 6`` stays).

Every expression here runs in linear time on hostile input: no nested quantifiers, a quoted
value runs to its closing quote or the end of the line, never back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from ..errors import BadInput

#: How deep redaction walks a JSON document: the reports it cleans are a few levels deep, the
#: values of a crash dump inside them at most 64 more (picklesafe.bounds refuses deeper ones).
JSON_DEPTH = 128


def descend_json(path: tuple[int, ...], value) -> tuple[int, ...]:
    """The path inside a document's ``value`` (the ids of the lists and dicts the walk is in);
    one line (exit 2) for a value the walk is already inside, which it would walk forever, or
    a path past JSON_DEPTH, which would end in RecursionError."""
    if id(value) in path:
        raise BadInput(f"refused: a JSON {type(value).__name__} that contains itself")
    if len(path) >= JSON_DEPTH:
        raise BadInput(f"refused: a JSON document nested more than {JSON_DEPTH} deep")
    return (*path, id(value))


MASK = "***"
#: Launch secrets shorter than this are not searched for in free text: a secret-named variable
#: set to "1" or "false" would otherwise mask every 1 and every false of a log.
MIN_KNOWN_LENGTH = 6

_SECRET_WORDS = r"(?:password|passwd|pass|pwd|token|secret|key|credentials?|auth|cookie|session|private)"
_SECRET_WORD = re.compile(_SECRET_WORDS + "$", re.IGNORECASE)
#: The shell's working folders: a path, not a password, whatever their names say.
_NOT_SECRET_NAMES = {"PWD", "OLDPWD"}
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")

#: A value in log text: quoted (to its closing quote, or the end of the line when there is
#: none) or bare (to the next space or delimiter).
_VALUE = r"""(?P<value>'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?|[^\s'",;)}\]&]+)"""
#: ``name=value``, ``name: value``, ``'name': value``, ``"name": value``; the name starts at a
#: word start (linear time) and ends with a secret word; ``==`` is a comparison, not a value.
_ASSIGNMENT = re.compile(r"(?<![\w.-])(?P<lead>['\"]?)(?P<name>[\w.-]*?(?i:" + _SECRET_WORDS
                         + r"))(?P=lead)(?P<sep>\s*[:=](?!=)\s*)" + _VALUE)
#: ``--api-key sk-...`` in a command line a log prints.
_OPTION = re.compile(r"(?<![\w.-])(?P<name>--[\w.-]*?(?i:" + _SECRET_WORDS + r"))"
                     r"(?P<sep>\s+)(?!-)" + _VALUE)
_AUTHORIZATION = re.compile(r"(?i)(?P<name>\b(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?"
                            r"(?:(?:bearer|basic|token|digest|negotiate)\s+)?)"
                            r"(?P<value>[^\s'\",;)}\]]+)")
_BEARER = re.compile(r"(?i)(?P<name>\bbearer\s+)(?P<value>[A-Za-z0-9._~+/-]{8,}=*)")
#: (anchors, expression): tokens of a well-known shape. Every match starts with one of its
#: anchors, plain substrings that ``in`` looks for far faster than the expression could.
_SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("hf_",), r"\bhf_[A-Za-z0-9]{20,}"),                               # Hugging Face
    (("sk-",), r"\bsk-[A-Za-z0-9_-]{20,}"),                             # OpenAI, Anthropic
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    (("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),               # AWS access key ids
    (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),                     # Slack
    (("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),  # JWT
)
_SHAPE_ANCHORS = tuple(anchor for anchors, _ in _SHAPES for anchor in anchors)
_TOKEN_SHAPES = re.compile("|".join(expression for _, expression in _SHAPES))
_SECRET_WORD_ANCHORS = ("pass", "pwd", "token", "secret", "key", "credential", "auth", "cookie",
                        "session", "private")
#: Where _ASSIGNMENT could mask something: a secret word, its separator, and a value that is not
#: a bare number. Searched first, it spares the full expression the lines SGLang prints by the
#: thousand (``#token: 52,``), whose only secret word holds a count.
_ASSIGNMENT_HINT = re.compile(r"(?i:" + _SECRET_WORDS + r")['\"]?\s*[:=](?!=)"
                              r"(?!\s*['\"]?-?\d+(?:\.\d+)?(?:['\"\s,;)}\]&]|$))", re.MULTILINE)
_NOT_A_SECRET = re.compile(r"(?:None|null|none|true|false|True|False|-?\d+(?:\.\d+)?|\**)")


def is_secret_name(name: str) -> bool:
    if name in _NOT_SECRET_NAMES:
        return False
    return any(_SECRET_WORD.search(word) for word in _WORD_SPLIT.split(name) if word)


def _url_secrets(text: str) -> Iterator[str]:
    """The passwords (or lone tokens) of the URLs in ``text``."""
    for match in _URL_USERINFO.finditer(text):
        user, colon, password = match["userinfo"].partition(":")
        yield password if colon else user


def _mask_urls(text: str) -> str:
    """``scheme://user:pw@`` -> ``scheme://user:***@``; ``scheme://token@`` -> ``scheme://***@``."""
    def _mask(match: re.Match) -> str:
        user, colon, _ = match["userinfo"].partition(":")
        return f"{match['scheme']}{user + ':' + MASK if colon else MASK}@"
    return _URL_USERINFO.sub(_mask, text)


def _option_secrets(argv: list[str]) -> Iterator[tuple[int, str]]:
    """(index, kept prefix) of each secret option value: ``--api-key X`` -> (i + 1, ""),
    ``--api-key=X`` -> (i, "--api-key=")."""
    hide_next = False
    for index, token in enumerate(argv):
        if hide_next and not token.startswith("-"):
            yield index, ""
        hide_next = False
        if token.startswith("-"):
            name, equals, _ = token.partition("=")
            if is_secret_name(name.lstrip("-")):
                if equals:
                    yield index, name + "="
                else:
                    hide_next = True


def _mask_value(match: re.Match) -> str:
    value = match["value"]
    quote = value[0] if value[0] in "'\"" else ""
    closed = bool(quote) and len(value) > 1 and value.endswith(quote)
    if _NOT_A_SECRET.fullmatch(value[len(quote):len(value) - closed]):
        return match[0]
    return match[0][:match.start("value") - match.start()] + quote + MASK + (quote if closed else "")


def mask_rules(text: str) -> str:
    """Log text with the credentials the rules recognise masked (no launch secrets known).
    Each rule runs only where its anchor is in the text: most lines of a log have none."""
    lower = text.lower()
    if "@" in text:
        text = _mask_urls(text)
    if "authorization" in lower:
        text = _AUTHORIZATION.sub(_mask_value, text)
    if "bearer" in lower:
        text = _BEARER.sub(_mask_value, text)
    if any(anchor in text for anchor in _SHAPE_ANCHORS):
        text = _TOKEN_SHAPES.sub(MASK, text)
    if any(word in lower for word in _SECRET_WORD_ANCHORS):
        if "--" in text:
            text = _OPTION.sub(_mask_value, text)
        if _ASSIGNMENT_HINT.search(text):
            text = _ASSIGNMENT.sub(_mask_value, text)
    return text


class Redactor:
    """Masks the rules' secrets and, wherever they appear, the secret values it was given."""

    def __init__(self, known: Iterable[str] = ()):
        values = {value for value in known if len(value) >= MIN_KNOWN_LENGTH and value != MASK}
        self.known = sorted(values, key=len, reverse=True)  # a secret inside another: longest first
        #: the same values as they appear inside a JSON string (quotes, backslashes escaped)
        escaped = {json.dumps(v, ensure_ascii=ascii)[1:-1] for v in values for ascii in (True, False)}
        self._serialized = sorted(values | escaped, key=len, reverse=True)

    @classmethod
    def for_launch(cls, argv: list[str], env: dict[str, str]) -> Redactor:
        """One that knows the secrets of this command and environment."""
        known = [argv[index][len(prefix):] for index, prefix in _option_secrets(argv)]
        known += [value for name, value in env.items() if is_secret_name(name)]
        for text in [*argv, *env.values()]:
            known += _url_secrets(text)
        return cls(known)

    def _known(self, text: str, values: list[str]) -> str:
        for value in values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def text(self, text: str) -> str:
        """Text from outside (a log line, a traceback's code, a command string), masked."""
        return mask_rules(self._known(text, self.known))

    def serialized(self, text: str) -> str:
        """A document crashlab is about to write (JSON, Markdown), with every known secret masked:
        the last line of defence for text that came in by a way no rule foresaw."""
        return self._known(text, self._serialized)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        return {name: (MASK if value and is_secret_name(name) else self.text(value))
                for name, value in env.items()}

    def argv(self, argv: list[str]) -> list[str]:
        """``--api-key X`` and ``--api-key=X`` (any secret-named option) masked, each token
        masked as text (``sh -c '... --api-key X'``)."""
        masked = list(argv)
        hidden = dict(_option_secrets(argv))
        for index, token in enumerate(argv):
            masked[index] = hidden[index] + MASK if index in hidden else self.text(token)
        return masked

    def json(self, value, path: tuple[int, ...] = ()):
        """A copy of a JSON value with secret-named members masked and every string masked as
        text; one that holds itself or is nested past JSON_DEPTH is refused (descend_json)."""
        if isinstance(value, dict):
            path = descend_json(path, value)
            return {key: (MASK if item not in (None, "", [], {}) and is_secret_name(str(key))
                          else self.json(item, path))
                    for key, item in value.items()}
        if isinstance(value, list):
            path = descend_json(path, value)
            return [self.json(item, path) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value


#: For text whose launch crashlab does not know: the rules alone.
PLAIN = Redactor()
