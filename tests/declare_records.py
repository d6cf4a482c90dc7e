"""Write the layout-made attributes of the coredump reader's classes in source.

    python -m tests.declare_records

Each record class in crashlab/coredump/model.py declares its fields, and the section header
columns in crashlab/coredump/elf.py theirs, so that a type checker sees them. What comes from a
row layout sits between two marker comments that name the layout, and this script rewrites what
lies between them from crashlab/coredump/layouts.py. A record field is ``str`` for a string-table
offset, ``int`` else, and ``| None = None`` where the oldest generation lacks it; a column is a
``memoryview``. tests/test_layouts.py checks that the committed files are what this writes.
"""

from __future__ import annotations

import re
from pathlib import Path

from crashlab.coredump import layouts

FILES = [Path(layouts.__file__).with_name(name) for name in ("model.py", "elf.py")]
_BLOCK = re.compile(r"(?P<begin>    # -- (?P<form>fields|columns) of layouts\.(?P<name>\w+)[^\n]*\n)"
                    r"(?P<body>.*?)"
                    r"(?P<end>    # -- end of layouts\.(?P=name)\n)", re.S)


def fields(layout: layouts.RowLayout) -> str:
    """The annotated field lines of a record of ``layout``'s rows, in the layout's order."""
    lines = []
    for f in layout.fields:
        kind = "str" if f.string else "int"
        lines.append(f"    {f.name}: {kind} | None = None\n" if layout.optional(f)
                     else f"    {f.name}: {kind}\n")
    return "".join(lines)


def columns(layout: layouts.RowLayout) -> str:
    """The annotated attribute lines of a table of ``layout``'s rows read as columns."""
    return "".join(f"    {f.name}: memoryview\n" for f in layout.fields)


def declared(source: str) -> str:
    """``source`` with every marked block of fields written from its layout."""
    def block(m: re.Match[str]) -> str:
        write = fields if m["form"] == "fields" else columns
        return m["begin"] + write(getattr(layouts, m["name"])) + m["end"]

    return _BLOCK.sub(block, source)


def main() -> None:
    for path in FILES:
        path.write_text(declared(path.read_text()))


if __name__ == "__main__":
    main()
