"""What every text bound for the issue or its bundle passes through: the redaction the views use,
and with ``--anonymize`` the anonymizer, in that order (a secret is masked before a host inside it
could be renamed around it)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .anonymize import Anonymizer
from .redact import Redactor


@dataclass(frozen=True)
class Privacy:
    redactor: Redactor
    anonymizer: Anonymizer | None = None

    @classmethod
    def for_launch(cls, argv: list[str], env: Mapping[str, str], anonymize: bool,
                   hosts: list[str], paths: list[str]) -> Privacy:
        """For a crash launched with ``argv`` and ``env`` (as recorded, secrets already masked
        there): the secrets of the environment ``crashlab report`` runs in are masked too, since a
        log keeps the values the launch had and the same shell usually still holds them."""
        here = dict(os.environ)
        redactor = Redactor.for_launch(argv, {**env, **here})
        anonymizer = (Anonymizer.for_launch(argv, {**here, **env}, hosts=hosts, paths=paths,
                                            here=here)
                      if anonymize else None)
        return cls(redactor, anonymizer)

    @property
    def anonymized(self) -> bool:
        return self.anonymizer is not None

    def text(self, text: str) -> str:
        masked = self.redactor.text(text)
        return self.anonymizer.text(masked) if self.anonymizer else masked

    def argv(self, argv: list[str]) -> list[str]:
        masked = self.redactor.argv(argv)
        return [self.anonymizer.text(token) for token in masked] if self.anonymizer else masked

    def json(self, value):
        masked = self.redactor.json(value)
        return self.anonymizer.json(masked) if self.anonymizer else masked

    def document(self, value) -> bytes:
        """A JSON value as a file of the bundle: cleaned, then every known secret masked in the
        serialised text (the last line of defence)."""
        return self.redactor.serialized(json.dumps(self.json(value), indent=2)).encode() + b"\n"
