"""A value the slice works out (its number where known, its formula, where it came from), and the
record of what a slice found on its way: its roots, its stops, where the dump does not fit the
code, and the story of its loop variables. The slicer and the launch ABI's reader
(crashlab.explain.launch) write to the one record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..report import model


@dataclass(frozen=True)
class Value:
    value: int | None
    text: str
    #: the definition this word came from and that definition's whole (pair-wide) value
    origin: int | None = None
    whole: Value | None = None
    #: a parameter's value: its ordinal (a pointer argument, when it is used as a base)
    param: int | None = None
    #: an element address: (param ordinal, index, element size)
    element: tuple[int, Value, int] | None = None


def total(values: Iterable[int | None]) -> int | None:
    """The sum of ``values``, None where one of them is not known."""
    known = list(values)
    return None if None in known else sum(v for v in known if v is not None)


def number(value: int) -> str:
    """Small numbers (scales, shifts) read better in decimal; offsets and masks in hex."""
    return str(value) if -64 < value < 64 else f"{value:#x}"


@dataclass
class Record:
    """What a slice found so far: roots by name (in the order found), stops and mismatches (each
    said once), and the story lines."""

    roots: dict[str, model.Root] = field(default_factory=dict)
    stops: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    story: list[str] = field(default_factory=list)

    def root(self, root: model.Root) -> None:
        self.roots.setdefault(root.name, root)

    def stop(self, reason: str) -> None:
        if reason not in self.stops:
            self.stops.append(reason)

    def stopped(self, reason: str) -> Value:
        """A stop, its reason's subject kept as an unknown root: the value is not known."""
        self.stop(reason)
        self.root(model.Root.model_construct(kind="unknown", name=reason.split(":")[0]))
        return Value(None, "?")
