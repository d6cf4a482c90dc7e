"""Layouts: the reader's declared offsets against independent ones, compared field by field.

The CUDA tables are held to the builder's own layouts (tests/coredump_builder.py, in
cudacoredump.h's names), the ELF structures to pyelftools' (elftools/elf/structs.py): a field is
known by its name on both sides, so two same-width fields swapped on one side fail.
"""

from __future__ import annotations

import dataclasses
import io

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_SH_TYPE_BASE
from elftools.elf.structs import ELFStructs

from crashlab.coredump import model
from crashlab.coredump.constants import (
    ELF_MAGIC,
    ELFCLASS64,
    ELFDATA2LSB,
    ELFOSABI_CUDA,
    SectionType,
    generation_flag_names,
)
from crashlab.coredump.elf import ElfImage
from crashlab.coredump.layouts import (
    ELF_HEADER,
    SECTION_HEADER,
    SYMBOL,
    TABLE_LAYOUTS,
    Field,
    RowLayout,
    decoder,
)
from tests import declare_records
from tests.conftest import ROOT
from tests.coredump_builder import ROW_GENERATIONS, _layout, pack_row

RECORDS = {
    SectionType.DEV_TABLE: (model.Device, "dev", ()),
    SectionType.CTX_TABLE: (model.Context, "ctx", ("device",)),
    SectionType.MOD_TABLE: (model.Module, "mod", ("context",)),
    SectionType.GRID_TABLE: (model.Grid, "grid", ("device",)),
    SectionType.CB_TABLE: (model.ConstBank, "cb", ()),
    SectionType.SM_TABLE: (model.SM, "sm", ("device",)),
    SectionType.CTA_TABLE: (model.CTA, "cta", ("sm",)),
    SectionType.WP_TABLE: (model.Warp, "warp", ("cta",)),
    SectionType.LN_TABLE: (model.Lane, "lane", ("warp",)),
    SectionType.BT: (model.BacktraceFrame, "bt", ()),
    SectionType.META_DATA: (model.Metadata, "meta", ()),
}


@pytest.mark.parametrize("kind", list(RECORDS), ids=lambda k: k.name)
def test_every_layout_field_has_a_record_field(kind):
    record, _, links = RECORDS[kind]
    names = [f.name for f in dataclasses.fields(record)]
    assert {f.name for f in TABLE_LAYOUTS[kind].fields} <= set(names)
    assert names == ["section", "row", *links, *(f.name for f in TABLE_LAYOUTS[kind].fields)]


def test_a_field_the_oldest_rows_lack_is_optional_in_its_record():
    fields = {f.name: f for f in dataclasses.fields(model.Warp)}
    assert fields["error_pc"].type == "int" and fields["error_pc"].default is dataclasses.MISSING
    assert fields["num_regs"].type == "int | None" and fields["num_regs"].default is None
    assert {f.name: f.type for f in dataclasses.fields(model.Device)}["name"] == "str"
    assert model.SM(section=1, row=2, device=None, sm_id=3).valid_error_pc is None


def test_the_records_declare_what_their_layouts_say():
    """model.py's and elf.py's written-out attributes are exactly what tests/declare_records.py
    makes of the layouts (run it after changing a layout): a block per table, the section header
    columns."""
    model_source, elf_source = (path.read_text() for path in declare_records.FILES)
    assert declare_records.declared(model_source) == model_source
    assert declare_records.declared(elf_source) == elf_source
    assert model_source.count("# -- fields of layouts.") == len(TABLE_LAYOUTS)
    assert elf_source.count("# -- columns of layouts.SECTION_HEADER") == 1


def test_a_stale_declaration_is_rewritten():
    source = declare_records.FILES[0].read_text()
    stale = source.replace("    barrier_scope: int | None = None\n", "")
    assert stale != source and declare_records.declared(stale) == source


@pytest.mark.parametrize("kind", list(RECORDS), ids=lambda k: k.name)
def test_generations_agree_with_the_builder(kind):
    _, table, _ = RECORDS[kind]
    assert TABLE_LAYOUTS[kind].generations == ROW_GENERATIONS[table]


def test_fields_exist_only_where_the_row_is_long_enough():
    warp = TABLE_LAYOUTS[SectionType.WP_TABLE]
    row = pack_row("warp", 40, errorPC=0x1234, warpId=7, errorPCValid=1, numRegs=40)
    values = decoder(warp, 40).decode(row)
    assert values["error_pc"] == 0x1234 and values["warp_id"] == 7 and values["num_regs"] == 40
    assert "shared_mem_size" not in values and "barrier_scope" not in values
    full = decoder(warp, 80).decode(pack_row("warp", 80, barrierScope=5, additionalBarrierInfo=9))
    assert full["barrier_scope"] == 5 and full["additional_barrier_info"] == 9


def _as_the_builder_wrote_it(layout: RowLayout, table: str, size: int) -> tuple[dict, dict]:
    """(what the builder wrote, what the reader decoded), both keyed by cudacoredump.h's names:
    a row of ``size`` bytes with a distinct value in every field the builder knows."""
    written = {name: 1000 + i for i, name in enumerate(_layout(table, size))}
    decoded = decoder(layout, size).decode(pack_row(table, size, **written))
    return written, {f.c_name: decoded[f.name] for f in layout.present(size)}


@pytest.mark.parametrize("kind", list(RECORDS), ids=lambda k: k.name)
def test_every_field_lands_where_the_builder_puts_it(kind):
    """Every generation: each field the builder writes is read back under the same name."""
    _, table, _ = RECORDS[kind]
    for size in ROW_GENERATIONS[table]:
        written, read = _as_the_builder_wrote_it(TABLE_LAYOUTS[kind], table, size)
        assert read == written, size


def test_two_same_width_fields_swapped_fail_the_comparison():
    device = TABLE_LAYOUTS[SectionType.DEV_TABLE]
    first, second = device.by_name["dev_id"], device.by_name["pci_bus_id"]
    swapped = RowLayout("device swapped", device.c_name, tuple(
        dataclasses.replace(f, offset={first: second, second: first}[f].offset)
        if f in (first, second) else f for f in device.fields), device.generations)
    written, read = _as_the_builder_wrote_it(swapped, "dev", device.size)
    assert read != written
    assert (read["devId"], read["pciBusId"]) == (written["pciBusId"], written["devId"])


# -- the ELF container, against pyelftools -------------------------------------------------------
def _pyelftools_structs() -> ELFStructs:
    structs = ELFStructs(little_endian=True, elfclass=64)
    structs.create_basic_structs()
    structs.create_advanced_structs()
    return structs


def _marker(f: Field) -> bytes:
    """Bytes for field ``f`` that pyelftools can parse: e_ident's own, distinct ones else."""
    if f.c_name == "e_ident":
        return ELF_MAGIC + bytes([ELFCLASS64, ELFDATA2LSB, 1, ELFOSABI_CUDA, 7]) + bytes(7)
    return bytes(range(0x81, 0x81 + f.size))


ELF_STRUCTS = {"Elf64_Ehdr": "Elf_Ehdr", "Elf64_Shdr": "Elf_Shdr", "Elf64_Sym": "Elf_Sym"}


@pytest.mark.parametrize("layout", [ELF_HEADER, SECTION_HEADER, SYMBOL], ids=lambda layout: layout.c_name)
def test_elf_layouts_tile_their_structure(layout):
    """The gABI's Elf64 structures have no padding: each field starts where the last ends."""
    ends = [0] + [f.end for f in layout.fields]
    assert [f.offset for f in layout.fields] == ends[:-1] and ends[-1] == layout.size
    assert layout.generations == (layout.size,)


@pytest.mark.parametrize("layout", [ELF_HEADER, SECTION_HEADER, SYMBOL], ids=lambda layout: layout.c_name)
def test_elf_layouts_agree_with_pyelftools(layout):
    """Set one field's bytes and nothing else: pyelftools sees exactly that field change."""
    theirs = getattr(_pyelftools_structs(), ELF_STRUCTS[layout.c_name])
    assert theirs.sizeof() == layout.size
    blank = theirs.parse(bytes(layout.size))
    for f in layout.fields:
        data = bytearray(layout.size)
        data[f.offset : f.end] = _marker(f)
        parsed = theirs.parse(bytes(data))
        assert [name for name in parsed if parsed[name] != blank[name]] == [f.c_name]
        ours = decoder(layout, layout.size).decode(data)[f.name]
        assert ours == f.read(data)
        if isinstance(parsed[f.c_name], int):
            assert ours == parsed[f.c_name], f.c_name


@pytest.mark.parametrize("name", ["synthetic/moe_align_out_of_range.nvcudmp",
                                  "transcripts/illegal_address.nvcudmp"])
def test_section_columns_agree_with_pyelftools(name):
    """The strided columns read every section header as pyelftools does, field by field."""
    path = ROOT / "fixtures" / name
    with ElfImage(path) as image, open(path, "rb") as stream:
        elf = ELFFile(stream)
        assert image.section_count == elf.num_sections()
        for index, section in enumerate(elf.iter_sections()):
            ours = {f.c_name: getattr(image.sections, f.name)[index] for f in SECTION_HEADER.fields}
            theirs = {f.c_name: section.header[f.c_name] for f in SECTION_HEADER.fields}
            # pyelftools names the gABI's section types and leaves the others (CUDA's) numbers
            theirs["sh_type"] = ENUM_SH_TYPE_BASE.get(theirs["sh_type"], theirs["sh_type"])
            assert ours == theirs, index


def test_symbol_fields_patch_a_cubin_as_pyelftools_reads_it():
    """Field.write on a real cubin's symbol table: pyelftools reads back the value written."""
    cubin = bytearray((ROOT / "fixtures" / "cubins" / "illegal_address.sm_90.cubin").read_bytes())
    symtab = ELFFile(io.BytesIO(bytes(cubin))).get_section_by_name(".symtab")
    last = symtab.num_symbols() - 1
    start = symtab["sh_offset"] + last * symtab["sh_entsize"]
    SYMBOL.by_name["value"].write(cubin, start, 0x1234_5678_9ABC)
    symbol = ELFFile(io.BytesIO(bytes(cubin))).get_section_by_name(".symtab").get_symbol(last)
    assert symbol["st_value"] == 0x1234_5678_9ABC
    assert SYMBOL.by_name["size"].read(cubin, start) == symbol["st_size"]


def test_a_column_is_a_strided_view_of_one_field():
    second_word = Field("b", 4, "I", "b")
    rows = bytes(range(24))
    assert list(second_word.column(memoryview(rows), 12)) == [
        int.from_bytes(rows[4:8], "little"), int.from_bytes(rows[16:20], "little")]


def test_generation_flag_names():
    assert generation_flag_names(47) == ["skip_nonrelocated_elf_images", "skip_global_memory",
                                         "skip_shared_memory", "skip_local_memory",
                                         "skip_constbank_memory"]
    assert generation_flag_names((1 << 6) | (1 << 12)) == ["gzip_compress", "0x1000"]
