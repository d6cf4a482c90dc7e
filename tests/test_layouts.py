"""Row layouts: the reader's declared offsets against the builder's independent ones."""

from __future__ import annotations

import dataclasses

import pytest

from crashlab.coredump import model
from crashlab.coredump.constants import SectionType, generation_flag_names
from crashlab.coredump.layouts import TABLE_LAYOUTS, decoder
from tests.coredump_builder import ROW_GENERATIONS, _layout, pack_row

RECORDS = {
    SectionType.DEV_TABLE: (model.Device, "dev"),
    SectionType.CTX_TABLE: (model.Context, "ctx"),
    SectionType.MOD_TABLE: (model.Module, "mod"),
    SectionType.GRID_TABLE: (model.Grid, "grid"),
    SectionType.CB_TABLE: (model.ConstBank, "cb"),
    SectionType.SM_TABLE: (model.SM, "sm"),
    SectionType.CTA_TABLE: (model.CTA, "cta"),
    SectionType.WP_TABLE: (model.Warp, "warp"),
    SectionType.LN_TABLE: (model.Lane, "lane"),
    SectionType.BT: (model.BacktraceFrame, "bt"),
    SectionType.META_DATA: (model.Metadata, "meta"),
}


@pytest.mark.parametrize("kind", list(RECORDS), ids=lambda k: k.name)
def test_every_layout_field_has_a_record_field(kind):
    record, _ = RECORDS[kind]
    names = {f.name for f in dataclasses.fields(record)}
    assert {f.name for f in TABLE_LAYOUTS[kind].fields} <= names


@pytest.mark.parametrize("kind", list(RECORDS), ids=lambda k: k.name)
def test_generations_agree_with_the_builder(kind):
    _, table = RECORDS[kind]
    assert TABLE_LAYOUTS[kind].generations == ROW_GENERATIONS[table]


def test_fields_exist_only_where_the_row_is_long_enough():
    warp = TABLE_LAYOUTS[SectionType.WP_TABLE]
    row = pack_row("warp", 40, errorPC=0x1234, warpId=7, errorPCValid=1, numRegs=40)
    values = decoder(warp, 40).decode(row)
    assert values["error_pc"] == 0x1234 and values["warp_id"] == 7 and values["num_regs"] == 40
    assert "shared_mem_size" not in values and "barrier_scope" not in values
    full = decoder(warp, 80).decode(pack_row("warp", 80, barrierScope=5, additionalBarrierInfo=9))
    assert full["barrier_scope"] == 5 and full["additional_barrier_info"] == 9


@pytest.mark.parametrize("kind", list(RECORDS), ids=lambda k: k.name)
def test_every_field_lands_where_the_builder_puts_it(kind):
    """Pack a row with distinct values in every field the builder knows; decode with the reader."""
    _, table = RECORDS[kind]
    size = ROW_GENERATIONS[table][-1]
    fields = _layout(table, size)
    values = {name: 1000 + i for i, name in enumerate(fields)}
    decoded = decoder(TABLE_LAYOUTS[kind], size).decode(pack_row(table, size, **values))
    assert sorted(decoded.values()) == sorted(values.values())


def test_generation_flag_names():
    assert generation_flag_names(47) == ["skip_nonrelocated_elf_images", "skip_global_memory",
                                         "skip_shared_memory", "skip_local_memory",
                                         "skip_constbank_memory"]
    assert generation_flag_names((1 << 6) | (1 << 12)) == ["gzip_compress", "0x1000"]
