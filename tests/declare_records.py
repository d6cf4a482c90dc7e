"""Write the layout-made fields of the coredump records (crashlab/coredump/model.py).

    python -m tests.declare_records

Each record class in model.py declares its fields in source, so that a type checker sees them;
the fields that come from a row layout sit between two marker comments that name the layout,
and this script rewrites what lies between them from crashlab/coredump/layouts.py: ``str`` for
a string-table offset, ``int`` else, ``| None = None`` for a field the oldest generation lacks.
tests/test_layouts.py checks that the committed model.py is exactly what this script writes.
"""

from __future__ import annotations

import re
from pathlib import Path

from crashlab.coredump import layouts

MODEL = Path(layouts.__file__).with_name("model.py")
_BLOCK = re.compile(r"(?P<begin>    # -- fields of layouts\.(?P<name>\w+)[^\n]*\n)"
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


def declared(source: str) -> str:
    """``source`` with every marked block of fields written from its layout."""
    return _BLOCK.sub(lambda m: m["begin"] + fields(getattr(layouts, m["name"])) + m["end"], source)


def main() -> None:
    MODEL.write_text(declared(MODEL.read_text()))


if __name__ == "__main__":
    main()
