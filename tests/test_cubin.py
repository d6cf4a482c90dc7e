"""crashlab.cubin: a cubin opened once. Its section headers, symbols, relocations and notes (read
with struct) are pyelftools' on every fixture cubin and every cubin of the real H200 dumps, and
one inspect of a real H200 dump opens each of the dump's cubins once, whoever reads it (the kernel
names, the code finder, the line table, the parameter layouts, the bounds, the owner, the hang's
readings), and never pyelftools.
"""

from __future__ import annotations

import hashlib
import io
from collections import Counter

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import NoteSection, SymbolTableSection

import crashlab
from crashlab.coredump.core import CoreDump
from crashlab.cubin import Cubin, CubinError, image
from tests.conftest import ROOT

CUBINS = sorted((ROOT / "fixtures" / "cubins").rglob("*.cubin"))
H200 = ROOT / "fixtures" / "gpu" / "h200"


@pytest.mark.parametrize("path", CUBINS, ids=lambda p: p.name)
def test_section_headers_are_pyelftools(path):
    data = path.read_bytes()
    theirs = [(s.name, s["sh_addr"], s["sh_size"], s["sh_offset"], s["sh_flags"], s["sh_info"],
               s["sh_link"], s["sh_entsize"], s["sh_type"] == "SHT_NOBITS")
              for s in ELFFile(io.BytesIO(data)).iter_sections()]
    ours = [(s.name, s.address, s.size, s.offset, s.flags, s.info, s.link, s.entsize, s.nobits)
            for s in Cubin(data).sections]
    assert ours == theirs and ours


def _real_dump_cubins() -> list[bytes]:
    found = []
    for dump in sorted(H200.glob("*/core.*.nvcudmp")):
        if "_cut" in dump.parent.name:
            continue  # cut by the driver before its section table: no cubins to read
        with CoreDump(dump) as core:
            found += [core.image_bytes(section) for section, _module in core.relocated_images()]
    return list({hashlib.sha256(data).hexdigest(): data for data in found}.values())


def test_symbols_relocations_and_notes_are_pyelftools():
    """On every fixture cubin and every distinct module image of the real dumps (226 cubins): the
    symbol table, each relocation section and the producer note."""
    cubins = [path.read_bytes() for path in CUBINS] + _real_dump_cubins()
    assert len(cubins) > 100
    notes = 0
    for data in cubins:
        theirs = ELFFile(io.BytesIO(data))
        ours = Cubin(data)
        table = theirs.get_section_by_name(".symtab")
        assert isinstance(table, SymbolTableSection)
        assert [(s.name, s.value, s.size, s.section, s.type) for s in ours.symbols] == \
            [(s.name, s["st_value"], s["st_size"], s["st_shndx"] if isinstance(s["st_shndx"], int) else None,
              s["st_info"]["type"]) for s in table.iter_symbols()]
        for section in theirs.iter_sections():
            if isinstance(section, RelocationSection):
                assert [(r.offset, r.symbol.name, r.addend) for r in ours.relocations(section.name)] == \
                    [(r["r_offset"], table.get_symbol(r["r_info_sym"]).name, r.entry.get("r_addend", 0))
                     for r in section.iter_relocations()]
        note = theirs.get_section_by_name(image.TOOLKIT_NOTE)
        if isinstance(note, NoteSection):
            descriptions = [n["n_desc"] for n in note.iter_notes()]
            assert ours.toolchain and ours.toolchain.split(", ")[0] in descriptions[0].decode("latin-1")
            notes += 1
    assert notes


@pytest.mark.parametrize("damage", [
    b"",  # empty
    b"\x7fELF",  # a header cut short
    b"\x7fELF\x02\x01" + bytes(58),  # no section table: nothing, not an error
])
def test_a_cubin_too_short_or_bare_is_refused_or_empty(damage):
    try:
        found = Cubin(damage)
    except CubinError:
        return
    assert found.sections == [] and found.texts == [] and found.line_table is None


def test_a_section_table_past_the_end_is_one_cubin_error():
    data = bytearray((ROOT / "fixtures" / "cubins" / "moe_align.sm_90.cubin").read_bytes())
    data[0x28:0x30] = (len(data) - 8).to_bytes(8, "little")  # e_shoff near the end
    with pytest.raises(CubinError, match="does not fit|past the end"):
        Cubin(bytes(data))


def _counted(monkeypatch) -> tuple[Counter, Counter]:
    """(Cubin objects made, pyelftools ELFFile objects made), by the sha256 of their bytes."""
    made: Counter = Counter()
    parsed: Counter = Counter()
    cubin_init, elf_init = Cubin.__init__, ELFFile.__init__

    def counting_cubin(self, data):
        made[hashlib.sha256(data).hexdigest()] += 1
        cubin_init(self, data)

    def counting_elf(self, stream, *args, **kwargs):
        at = stream.tell()
        parsed[hashlib.sha256(stream.read()).hexdigest()] += 1
        stream.seek(at)
        elf_init(self, stream, *args, **kwargs)

    monkeypatch.setattr(image.Cubin, "__init__", counting_cubin)
    monkeypatch.setattr(ELFFile, "__init__", counting_elf)
    return made, parsed


@pytest.mark.parametrize("dump", ["null_argument.explain/core.1116.nvcudmp",
                                  "hang.explain/core.1193.nvcudmp"])
def test_one_inspect_opens_each_cubin_of_a_real_dump_once(monkeypatch, dump):
    path = H200 / dump
    with CoreDump(path) as core:
        images = Counter(hashlib.sha256(core.image_bytes(section)).hexdigest()
                         for section, _module in core.relocated_images())
    made, parsed = _counted(monkeypatch)
    report = crashlab.inspect(path)
    assert report.faults or any(kernel.waits for kernel in report.kernels)
    assert made == images  # every module image once (the kernels are named from all of them)
    assert not parsed  # every part is read with struct
    if report.faults:
        fault = report.faults[0]
        assert fault.explanation is not None and fault.sass.instructions and fault.owner
