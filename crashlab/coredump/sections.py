"""Which section is which: sections grouped by type, and children found through sh_link/sh_info.

Names such as ``.cudbg.lntbl.dev0.sm3.cta1.wp7`` carry row indices that are easy to misread and
are not unique, so they are never parsed: a child names its parent table in sh_link and its row in
that table in sh_info. Each link is checked against the parent type the format prescribes, which
also rules out link cycles (a cycle would need a section to be its own ancestor type).

A big dump has millions of per-lane sections (registers, predicates, local memory, backtraces).
Nothing here loops over them in Python: sections of one type are found by a C-level byte search
in the sh_type column, and the few per-lane sections a report needs by a search in the sh_link
column for their parent.
"""

from __future__ import annotations

import operator
import re
import struct
from array import array
from collections import defaultdict
from itertools import compress

from ..errors import CoreFormatError
from ..notation import counted
from .constants import PARENT_TYPE, SHT_STRTAB, SectionType
from .elf import ElfImage
from .layouts import TABLE_LAYOUTS

#: Types with one section per lane or per warp: indexed one parent table at a time, when a
#: lane or warp of that table is first asked about, never as a whole.
LEAF_TYPES = frozenset(
    {
        SectionType.DEV_REGS,
        SectionType.DEV_PRED,
        SectionType.LOCAL_MEM,
        SectionType.BT,
        SectionType.DEV_UREGS,
        SectionType.DEV_UPRED,
        SectionType.CBU_BAR,
    }
)


_IS_ZERO = bytes([1] + [0] * 255)
_IS_0X80 = bytes(int(value == 0x80) for value in range(256))


def _plane(column: bytes, index: int, table: bytes) -> int:
    """Byte ``index`` of every little-endian u32 in ``column``, mapped through ``table`` and
    read as one big integer (byte i for value i): the building block of C-level column tests."""
    return int.from_bytes(column[index::4].translate(table), "little")


def _aligned_hits(column: bytes, value: int) -> array:
    """Indices i with column[i] == value, for a column of little-endian u32 values.

    ``re.finditer`` does the scan in C. A match at an unaligned position straddles two values
    and is skipped; it cannot hide an aligned one, because every sh_type value searched for has
    a low byte that occurs nowhere else in its own encoding.
    """
    pattern = re.compile(re.escape(struct.pack("<I", value)))
    return array("I", (m.start() >> 2 for m in pattern.finditer(column) if not m.start() & 3))


class SectionIndex:
    """Sections by type and by parent row. Links that lie are refused (tables) or reported in
    ``warnings`` and ignored (per-lane and per-warp sections, which nothing else needs)."""

    def __init__(self, image: ElfImage, warnings: list[str]):
        self.image = image
        self.warnings = warnings
        self._leaves_checked = False
        self._types = image.sections.type.tobytes()
        self._links: bytes | None = None
        self._by_type: dict[int, array] = {}
        self._children: dict[SectionType, dict[tuple[int, int], list[int]]] = {}
        self._leaves: dict[int, dict[tuple[int, int], list[int]]] = {}
        self.strtab = self._find_strtab()

    def of_type(self, kind: int) -> array:
        kind = int(kind)
        if kind not in self._by_type:
            found = _aligned_hits(self._types, kind)
            skipped = self.image.beyond_end
            if skipped:
                found = array("I", (i for i in found if i not in skipped))
            self._by_type[kind] = found
        return self._by_type[kind]

    def count(self, kind: SectionType) -> int:
        return len(self.of_type(kind))

    def entsize(self, index: int) -> int:
        """A table section's row size. A driver writes the one-row metadata table with
        sh_entsize 0 (r580, fixtures/gpu): its row is then the whole section."""
        columns = self.image.sections
        entsize = columns.entsize[index]
        if entsize == 0 and columns.type[index] == SectionType.META_DATA:
            return columns.size[index]
        return entsize

    def rows(self, index: int, min_entsize: int) -> int:
        """Row count of a table section, after checking that its entry size makes sense."""
        entsize, size = self.entsize(index), self.image.sections.size[index]
        if entsize < min_entsize:
            raise CoreFormatError(
                f"{self.image.path}: section {index} ({self.describe(index)}) has entry size "
                f"{entsize}, smaller than the {min_entsize} bytes of the oldest known row format"
            )
        if size % entsize:
            raise CoreFormatError(
                f"{self.image.path}: section {index} ({self.describe(index)}) is {size} bytes, "
                f"not a whole number of {entsize}-byte rows"
            )
        return size // entsize

    def children(self, kind: SectionType, parent: int, row: int) -> list[int]:
        """Sections of type ``kind`` hanging off row ``row`` of table section ``parent``."""
        if kind in LEAF_TYPES:
            return self._leaf_children(kind, parent, row)
        table = self._children.get(kind)
        if table is None:
            table = self._children[kind] = self._link_all(kind)
        return table.get((parent, row), [])

    def _leaf_children(self, kind: SectionType, parent: int, row: int) -> list[int]:
        if not self._leaves_checked:
            self._leaves_checked = True
            self._check_leaf_links()
        under = self._leaves.get(parent)
        if under is None:
            under = self._leaves[parent] = self._linked_to(parent)
        return under.get((kind, row), [])

    def _linked_to(self, parent: int) -> dict[tuple[int, int], list[int]]:
        """Every section that links to ``parent``, by (type, row): one pass over the link column
        per lane or warp table, where explaining a fault reads the registers of its every lane."""
        if self._links is None:
            self._links = self.image.sections.link.tobytes()
        columns, skipped = self.image.sections, self.image.beyond_end
        found: dict[tuple[int, int], list[int]] = {}
        pattern, position = struct.pack("<I", parent), -1
        while (position := self._links.find(pattern, position + 1)) >= 0:
            index = position >> 2
            if position & 3 == 0 and index not in skipped:
                found.setdefault((columns.type[index], columns.info[index]), []).append(index)
        return found

    def _check_leaf_links(self) -> None:
        """Say so when per-lane or per-warp sections hang from something that is not their
        parent type, or from a row their parent table does not have: they are found by their
        link, so a lie would otherwise only make them vanish. Done once, over all of them, in
        C-level passes (a type mask, compress, set, max); only a dump with offenders is walked."""
        columns = self.image.sections
        links = infos = None
        for parent_type in (SectionType.LN_TABLE, SectionType.WP_TABLE):
            flags = self._type_mask([k for k in LEAF_TYPES if PARENT_TYPE[k] is parent_type])
            if 1 not in flags:
                continue
            if links is None or infos is None:
                links = array("I", columns.link.tobytes())
                infos = array("I", columns.info.tobytes())
            targets = set(compress(links, flags))
            wrong = targets.difference(self.of_type(parent_type))
            if not wrong and max(compress(infos, flags)) < self._fewest_rows(targets):
                continue
            rows = {t: self.rows(t, TABLE_LAYOUTS[parent_type].min_size) for t in targets - wrong}
            found = list(compress(range(columns.count), flags))
            bad_link = [i for i in found if links[i] in wrong]
            beyond = [i for i in found if links[i] in rows and infos[i] >= rows[links[i]]]
            if bad_link:
                first = bad_link[0]
                self.warnings.append(
                    f"{counted(len(bad_link), 'section')} of a kind a {parent_type.name} holds, linked to "
                    f"something else (first: section {first}, {self.describe(first)}, links to "
                    f"section {links[first]}); under no lane or warp, so ignored "
                    "(cuda-gdb cannot place them either)"
                )
            if beyond:
                first = beyond[0]
                self.warnings.append(
                    f"{counted(len(beyond), 'section')} naming a row beyond the parent table (first: "
                    f"section {first}, {self.describe(first)}, names row {infos[first]} of "
                    f"section {links[first]}, which has {rows[links[first]]} rows); ignored"
                )

    def _fewest_rows(self, tables: set[int]) -> int:
        """The smallest row count among ``tables`` (0 if one has no usable entry size)."""
        columns = self.image.sections
        sizes = list(map(columns.size.__getitem__, tables))
        entsizes = list(map(columns.entsize.__getitem__, tables))
        if 0 in entsizes:
            return 0
        return min(map(operator.floordiv, sizes, entsizes))

    def _type_mask(self, kinds: list[SectionType]) -> bytes:
        """One byte per section, 1 where its sh_type is one of ``kinds`` (all 0x800000NN): four
        byte planes of the type column, translated and and'ed as big integers, all in C."""
        low = bytearray(256)
        for kind in kinds:
            low[kind & 0xFF] = 1
        mask = (_plane(self._types, 0, bytes(low)) & _plane(self._types, 1, _IS_ZERO)
                & _plane(self._types, 2, _IS_ZERO) & _plane(self._types, 3, _IS_0X80))
        return mask.to_bytes(self.image.sections.count, "little")

    def _link_all(self, kind: SectionType) -> dict[tuple[int, int], list[int]]:
        columns = self.image.sections
        parent_type = PARENT_TYPE[kind]
        sole_parent = self.of_type(parent_type)
        parent_layout = TABLE_LAYOUTS[parent_type]
        parent_rows: dict[int, int] = {}
        table: dict[tuple[int, int], list[int]] = defaultdict(list)
        unlinked: list[int] = []
        for index in self.of_type(kind):
            link, info = columns.link[index], columns.info[index]
            if link == 0 and parent_type is SectionType.DEV_TABLE and len(sole_parent) == 1:
                # libcudacore finds a device's tables by sh_info alone; accept a zero link.
                link = sole_parent[0]
                unlinked.append(index)
            if link >= columns.count or columns.type[link] != parent_type:
                found = "nothing" if link >= columns.count else self.describe(link)
                raise CoreFormatError(
                    f"{self.image.path}: section {index} ({kind.name}) links to section {link} "
                    f"({found}); its parent must be a {parent_type.name}"
                )
            if link not in parent_rows:
                parent_rows[link] = self.rows(link, parent_layout.min_size)
            if info >= parent_rows[link]:
                raise CoreFormatError(
                    f"{self.image.path}: section {index} ({kind.name}) names row {info} of "
                    f"section {link}, which has {parent_rows[link]} rows"
                )
            table[(link, info)].append(index)
        if unlinked:
            self.warnings.append(
                f"{counted(len(unlinked), kind.name + ' section')} with sh_link 0 (first: section "
                f"{unlinked[0]}); read under the device table, as cuda-gdb's libcudacore does "
                "(it finds a device's tables by sh_info alone)"
            )
        return dict(table)

    def describe(self, index: int) -> str:
        kind = self.image.sections.type[index]
        try:
            return SectionType(kind).name
        except ValueError:
            return f"type {kind:#x}"

    def _find_strtab(self) -> int | None:
        for index in self.of_type(SHT_STRTAB):
            if self.image.section_name(index) == ".strtab":
                return index
        return None
