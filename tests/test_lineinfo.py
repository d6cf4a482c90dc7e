"""crashlab.cubin.lines, the native reader of a cubin's line table, judged by nvdisasm -gi.

Every instruction of every cubin with line information here (the fixtures, and cubins the real
nvcc builds in the test) must get from the reader the inline chain nvdisasm shows for it; the
chain's last entry, the line in the function holding the PC, is what a signature hashes. Then
the same in relocated cubins as dumps hold them (line relocations unapplied, as in synthetic
dumps, or applied, as a driver may), the signature of every nvcc-built fault with and without
nvdisasm, and damaged line tables, which must never cost a report.
"""

from __future__ import annotations

import io
import json
import random

import pytest
from elftools.elf.elffile import ELFFile

import crashlab
from crashlab.cubin import Cubin, CubinError
from tests import coredump_builder, scenarios
from tests.conftest import ROOT, run_cli
from tests.coredump_builder import CUBINS, load_cubin, relocate
from tests.line_tables import (
    FIXTURES_WITH_LINES,
    Agreement,
    agreement,
    apply_line_relocations,
    build,
    nvcc,
)

MOE_DUMP = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
FAULT_MARKERS = sorted(key for key, marker in coredump_builder.markers().items()
                       if key not in ("hang.sm_90.cubin:spin", "tp_ranks.sm_90.cubin:tp-rank1"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if nvcc() is None:
        pytest.skip("no nvcc on this machine to build more cubins with")
    return build(tmp_path_factory.mktemp("nvcc"))


def _assert_all_agree(result: Agreement):
    print(result)
    assert result.instructions > 0 and result.with_lines > 0
    assert result.outermost == result.instructions, result.first_difference
    assert result.chains == result.instructions, result.first_difference


@pytest.mark.parametrize("cubin", FIXTURES_WITH_LINES)
def test_every_instruction_of_the_fixture_cubins_gets_nvdisasms_chain(cubin):
    _assert_all_agree(agreement(load_cubin(cubin)))


def test_every_instruction_of_cubins_built_by_nvcc_gets_nvdisasms_chain(built):
    total = Agreement()
    for path in built:
        result = agreement(path.read_bytes())
        print(path.name, result)
        total = total.add(result)
    _assert_all_agree(total)
    table = Cubin((built[0].parent / "nested.sm_90.cubin").read_bytes()).line_table
    # an instruction of leaf() inlined in middle() inlined in outer() inlined in the kernel
    chains = [table.chain(".text._Z5firstPKiPii", offset) for offset in range(0, 0x400, 0x10)]
    assert [2, 6, 10, 18] in [[line.line for line in chain] for chain in chains]


def test_the_linked_cubins_two_units_are_both_read(built):
    table = Cubin((built[0].parent / "linked.sm_90.cubin").read_bytes()).line_table
    assert {".text._Z2kaPi", ".text._Z2kbPi", ".text._Z13shared_helperPii"} <= set(table.sections)
    files = {line.file.rsplit("/", 1)[-1] for section in table.sections
             for line in table.chain(section, 0)}
    assert files == {"unit_a.cu", "unit_b.cu"}


@pytest.mark.parametrize("cubin", FIXTURES_WITH_LINES)
@pytest.mark.parametrize("shape", ["unapplied", "unapplied-relative-symbols", "applied"])
def test_a_relocated_cubin_reads_as_the_original(cubin, shape):
    """Synthetic dumps leave .rela.debug_line unapplied (sequences start at 0); a driver may
    apply it (sequences start at the function's GPU address)."""
    original = load_cubin(cubin)
    moved = relocate(original, scenarios.CODE_BASE,
                     absolute_symbols=shape != "unapplied-relative-symbols").data
    if shape == "applied":
        moved = apply_line_relocations(moved)
        assert moved != relocate(original, scenarios.CODE_BASE).data
    _assert_all_agree(agreement(moved, judged=original))


def test_the_bundled_dump_without_sass_has_the_same_signature_and_chain():
    with_sass, without = (json.loads(run_cli("inspect", MOE_DUMP, "--json", *flags).stdout)
                          for flags in ([], ["--no-sass"]))
    absent = json.loads(run_cli("inspect", MOE_DUMP, "--json",
                                env={"CRASHLAB_NVDISASM": "/nonexistent/nvdisasm"}).stdout)
    assert with_sass["faults"][0]["sass"]["tool"].startswith("nvdisasm")
    assert without["faults"][0]["sass"]["instructions"] == absent["faults"][0]["sass"]["instructions"] == []
    assert with_sass["signature"] == without["signature"] == absent["signature"]
    assert [s["line"] for s in without["faults"][0]["sass"]["source"]] == [107, 24]
    assert with_sass["faults"][0]["sass"]["source"] == without["faults"][0]["sass"]["source"]


@pytest.mark.parametrize("key", FAULT_MARKERS)
def test_every_nvcc_built_fault_is_signed_alike_with_and_without_nvdisasm(key, tmp_path, monkeypatch):
    if key.startswith("device_function."):
        scenario = scenarios.device_function(debug_build=".G." in key)
    else:
        scenario = scenarios.fault(key)
    path = coredump_builder.write(scenario.spec, tmp_path / "core.nvcudmp").path
    with_sass, without = crashlab.inspect(path), crashlab.inspect(path, sass=False)
    monkeypatch.setenv("CRASHLAB_NVDISASM", str(tmp_path / "no-nvdisasm"))
    absent = crashlab.inspect(path)
    assert absent.faults[0].sass.unavailable_reason.endswith("is not an executable file")
    assert with_sass.signature == without.signature == absent.signature
    assert with_sass.faults[0].sass.source == without.faults[0].sass.source == absent.faults[0].sass.source
    marker = coredump_builder.markers()[key]
    assert with_sass.signature.parts[-1] == f"{marker.source.rsplit('/', 1)[-1]}:{marker.line}"


def test_a_hang_is_signed_alike_with_and_without_nvdisasm(tmp_path):
    hang = scenarios.hang()
    device = hang.spec.devices[0]
    device.grids, device.sms = device.grids[:1], device.sms[:-1]  # no collective kernel left
    path = coredump_builder.write(hang.spec, tmp_path / "core.nvcudmp").path
    assert crashlab.inspect(path).signature == crashlab.inspect(path, sass=False).signature


def test_a_dump_whose_driver_applied_the_line_relocations_is_signed_alike(tmp_path):
    scenario = scenarios.fault("moe_align.sm_90.cubin:shared-out-of-range",
                               scenarios.WARP_OUT_OF_RANGE_ADDRESS)
    plain = coredump_builder.write(scenario.spec, tmp_path / "plain.nvcudmp").path
    module = scenario.spec.devices[0].contexts[0].modules[0]
    module.relocated = apply_line_relocations(module.relocated)
    applied = coredump_builder.write(scenario.spec, tmp_path / "applied.nvcudmp").path
    expected = crashlab.inspect(plain).signature
    assert crashlab.inspect(applied, sass=False).signature == expected
    assert crashlab.inspect(applied).signature == expected


# -- damaged line tables ---------------------------------------------------------------------
def _line_section(cubin: bytes) -> tuple[int, int]:
    section = ELFFile(io.BytesIO(cubin)).get_section_by_name(".debug_line")
    return section["sh_offset"], section["sh_size"]


def _damaged(cubin: bytes, rng: random.Random) -> bytes:
    start, size = _line_section(cubin)
    image = bytearray(cubin)
    if rng.random() < 0.3:  # cut the table short where it lies (the ELF still says its size)
        cut = rng.randrange(size)
        image[start + cut:start + size] = bytes(size - cut)
    for _ in range(rng.randint(1, 6)):
        image[start + rng.randrange(size)] ^= rng.randint(1, 255)
    return bytes(image)


@pytest.mark.parametrize("cubin", FIXTURES_WITH_LINES)
def test_a_damaged_line_table_is_refused_with_a_reason_or_read_never_raising(cubin):
    original = load_cubin(cubin)
    rng = random.Random(cubin)
    refused = read = 0
    for _ in range(400):
        damaged = _damaged(original, rng)
        try:
            table = Cubin(damaged).line_table
        except CubinError as exc:
            refused += 1
            assert exc.part == ".debug_line" and str(exc).startswith(".debug_line")
            continue
        read += 1
        for section in table.sections:
            for offset in range(0, 0x800, 0x10):
                for line in table.chain(section, offset):
                    assert isinstance(line.file, str) and isinstance(line.line, int)
    assert refused and read  # both outcomes were exercised


@pytest.mark.parametrize("cut", [0, 3, 17, 60])
def test_a_truncated_line_table_is_refused(cut):
    cubin = load_cubin("moe_align.sm_90.cubin")
    start, size = _line_section(cubin)
    (length,) = (int.from_bytes(cubin[start:start + 4], "little"),)
    image = bytearray(cubin)
    image[start:start + 4] = (length + size + cut).to_bytes(4, "little")  # a unit past the end
    with pytest.raises(CubinError, match="past the section"):
        Cubin(bytes(image)).line_table  # noqa: B018


def test_inspect_of_a_dump_with_a_damaged_line_table_warns_and_signs_by_offset(tmp_path):
    scenario = scenarios.fault("moe_align.sm_90.cubin:shared-out-of-range",
                               scenarios.WARP_OUT_OF_RANGE_ADDRESS)
    module = scenario.spec.devices[0].contexts[0].modules[0]
    start, _ = _line_section(module.relocated)
    image = bytearray(module.relocated)
    image[start:start + 4] = (0xFFFF_FF00).to_bytes(4, "little")
    module.relocated = bytes(image)
    path = coredump_builder.write(scenario.spec, tmp_path / "core.nvcudmp").path
    done = run_cli("inspect", path, "--no-sass", "--json")
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert report["signature"]["parts"][-1] == "+0x210"
    assert any("line table" in warning and "unreadable" in warning for warning in report["warnings"])


def test_a_cubin_without_line_information_has_no_table():
    assert Cubin((CUBINS / "production" / "ngram_ids.sm_80.cubin").read_bytes()).line_table is None
