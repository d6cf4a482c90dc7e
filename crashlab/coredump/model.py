"""Typed records of a coredump, one class per table row.

A record's fields are made from its table's layout in crashlab.coredump.layouts, so each field
of the format is declared once: a row decodes straight into its record, and a field that rows of
the oldest generation lack is None where the row does not have it. Every record also keeps the
section and row it came from, and a reference to its parent (the annotations a class declares),
so that a fault can be traced back to the bytes.
"""

from __future__ import annotations

import dataclasses
import inspect

from . import layouts

Dim3 = tuple[int, int, int]


def record(layout: layouts.RowLayout):
    """Make the decorated class a record of ``layout``'s rows: a slotted dataclass whose fields
    are ``section`` and ``row``, the class's annotated links to parent records, then the
    layout's fields in order (``str`` for a string-table offset, ``int`` else; ``| None = None``
    for a field the oldest generation lacks). The class body keeps its docstring and
    properties."""

    def build(cls: type) -> type:
        fields: list = [("section", "int"), ("row", "int")]
        fields += inspect.get_annotations(cls).items()
        for f in layout.fields:
            kind = "str" if f.string else "int"
            if layout.optional(f):
                fields.append((f.name, f"{kind} | None", dataclasses.field(default=None)))
            else:
                fields.append((f.name, kind))
        body = {name: value for name, value in vars(cls).items() if not name.startswith("__")}
        body.update(__module__=cls.__module__, __qualname__=cls.__qualname__, __doc__=cls.__doc__)
        return dataclasses.make_dataclass(cls.__name__, fields, namespace=body, slots=True,
                                          eq=False)

    return build


def _dim(x, y, z) -> Dim3 | None:
    return None if x is None else (x, y, z)


@record(layouts.DEVICE)
class Device:
    """A row of the device table (.cudbg.devtbl): one GPU."""


@record(layouts.CONTEXT)
class Context:
    """A row of a device's context table."""

    device: Device


@record(layouts.MODULE)
class Module:
    """A row of a context's module table: one loaded cubin."""

    context: Context


@record(layouts.GRID)
class Grid:
    """A row of a device's grid table: one kernel launch."""

    device: Device

    @property
    def grid_dim(self) -> Dim3:
        return (self.grid_dim_x, self.grid_dim_y, self.grid_dim_z)

    @property
    def block_dim(self) -> Dim3:
        return (self.block_dim_x, self.block_dim_y, self.block_dim_z)

    @property
    def cluster_dim(self) -> Dim3 | None:
        return _dim(self.cluster_dim_x, self.cluster_dim_y, self.cluster_dim_z)


@record(layouts.CONST_BANK)
class ConstBank:
    """A row of a grid's constant bank table."""


@record(layouts.SM)
class SM:
    """A row of a device's SM table."""

    device: Device

    @property
    def valid_error_pc(self) -> int | None:
        return self.error_pc if self.error_pc_valid else None


@record(layouts.CTA)
class CTA:
    """A row of an SM's CTA table: one thread block."""

    sm: SM

    @property
    def block_idx(self) -> Dim3:
        return (self.block_idx_x, self.block_idx_y, self.block_idx_z)

    @property
    def cluster_idx(self) -> Dim3 | None:
        return _dim(self.cluster_idx_x, self.cluster_idx_y, self.cluster_idx_z)

    @property
    def cluster_dim(self) -> Dim3 | None:
        return _dim(self.cluster_dim_x, self.cluster_dim_y, self.cluster_dim_z)


@record(layouts.WARP)
class Warp:
    """A row of a CTA's warp table."""

    cta: CTA

    @property
    def valid_error_pc(self) -> int | None:
        return self.error_pc if self.error_pc_valid else None


@record(layouts.LANE)
class Lane:
    """A row of a warp's lane table: one thread."""

    warp: Warp

    @property
    def thread_idx(self) -> Dim3:
        return (self.thread_idx_x, self.thread_idx_y, self.thread_idx_z)


@record(layouts.BACKTRACE)
class BacktraceFrame:
    """A row of a lane's backtrace."""


@record(layouts.METADATA)
class Metadata:
    """The row of the metadata section (.cudbg.meta): what wrote the dump, and how."""


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryRegion:
    """A memory section, described but not read."""

    section: int
    kind: str
    address: int
    size: int


@dataclasses.dataclass(frozen=True, slots=True)
class ParamBlock:
    address: int
    size: int
    data: bytes
