"""The reader against synthetic dumps of every row generation, built around real cubins.

Each test plants a fault with tests.scenarios and checks that crashlab.inspect finds exactly what
was planted; source lines are compared with the FAULT marker in the .cu file.
"""

from __future__ import annotations

import io

import pytest
from elftools.elf.elffile import ELFFile

import crashlab
from crashlab.coredump import CoreDump
from crashlab.coredump.constants import MEMORY_TYPES, SectionType
from crashlab.coredump.elf import ElfImage, text_sections
from tests import scenarios
from tests.conftest import ROOT
from tests.coredump_builder import NEWEST, OLDEST, ROW_GENERATIONS, Spec


def assert_planted(fault, planted):
    assert fault.exception.code == planted.exception
    assert (fault.device, fault.sm, fault.warp, fault.lane) == (
        planted.device, planted.sm, planted.warp, planted.lane)
    assert fault.block_idx == planted.block_idx
    assert fault.thread_idx == planted.thread_idx
    assert fault.grid_id == planted.grid_id
    assert fault.kernel.mangled == planted.kernel
    assert fault.pc == hex(planted.pc)
    assert fault.function_offset == planted.function_offset
    assert fault.faulting_lanes == planted.faulting_lanes


def assert_source(fault, planted):
    marker = planted.marker
    faulting = [ins for ins in fault.sass.instructions if ins.faulting]
    assert len(faulting) == 1
    assert faulting[0].text == marker.instruction
    assert faulting[0].address == hex(planted.pc)
    chain = [f"{s.file.rsplit('/', 1)[-1]}:{s.line}" for s in fault.sass.source]
    assert chain == list(marker.chain)
    assert f"{marker.source}:{marker.line}" in chain


def test_illegal_address_newest_format(build):
    scenario = scenarios.fault()
    report = crashlab.inspect(build(scenario).path)
    assert report.status == "fault"
    fault = report.faults[0]
    assert_planted(fault, scenario.planted)
    assert_source(fault, scenario.planted)
    assert fault.exception.name == "CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS"
    assert fault.exception.display == "Warp Illegal Address"
    assert fault.pc_source == "warp errorPC"
    assert fault.reported_by_sm
    assert fault.registers["R0"] == scenario.planted.registers[0]
    assert len(fault.registers) == len(scenario.planted.registers)
    assert fault.predicates["P1"] is True and fault.predicates["P0"] is False
    assert fault.uniform_registers == {"UR0": 0x11, "UR1": 0x22}
    assert bytes.fromhex(fault.params.hex)[:4] == bytes(range(4))
    assert [(b.bank, b.address, b.size) for b in fault.const_banks] == [(0, "0x7e0000001000", 0x400)]
    assert fault.kernel.name == "write_past_end(int*, int)"
    assert report.devices[0].name == "NVIDIA H100 80GB HBM3"
    assert report.devices[0].sm_type == "sm_90"
    assert report.dump.driver_version == "580.65"
    assert "skip_global_memory" in report.dump.generation_flags


@pytest.mark.parametrize(
    "table,size",
    [(table, size) for table, sizes in ROW_GENERATIONS.items() for size in sizes
     if table in ("dev", "grid", "sm", "cta", "warp", "lane")],
)
def test_every_row_generation(build, table, size):
    """A field exists only where the row is long enough; the fault is found in every generation."""
    rows = dict(NEWEST, **{table: size})
    scenario = scenarios.fault(rows=rows, sm_reports=size >= 24 if table == "sm" else True)
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert_planted(fault, scenario.planted)
    with CoreDump(build(scenario, name="again.nvcudmp").path) as core:
        device = core.devices[0]
        sm = core.sms(device)[1]
        grid = core.grids(device)[0]
        cta = core.ctas(sm)[0]
        warp = core.warps(cta)[1]
        lane = core.lanes(warp)[0]
        present = {
            "dev": device.num_convergence_barriers_per_warp if size >= 88 else
                   device.num_uniform_regs_per_warp,
            "grid": grid.cluster_dim_x if size >= 120 else None,
            "sm": sm.exception,
            "cta": cta.cluster_idx_x,
            "warp": warp.num_regs,
            "lane": lane.cbu_thread_state,
        }[table]
        newest = size == ROW_GENERATIONS[table][-1]
        if table == "grid" and size == 104:
            assert grid.cluster_dim is None and grid.preferred_cluster_dim_x is None
        elif table == "dev" and size == 72:
            assert device.num_uniform_regs_per_warp is None
        elif table == "sm" and size == 8:
            assert sm.exception is None and sm.error_pc is None
        elif table == "cta" and size == 24:
            assert cta.cluster_idx is None
        elif table == "warp" and size == 32:
            assert warp.num_regs is None
        elif table == "lane" and size == 48:
            assert lane.cbu_thread_state is None and lane.rpc_lo is None
        else:
            assert present is not None
        if newest and table == "sm":
            assert sm.exception_string.startswith("synthetic")


def test_oldest_format_without_metadata(build):
    scenario = scenarios.fault(rows=dict(OLDEST), metadata=False, sm_reports=False)
    report = crashlab.inspect(build(scenario).path)
    assert_planted(report.faults[0], scenario.planted)
    assert report.dump.driver_version is None and report.dump.generation_flags == []
    assert not report.faults[0].reported_by_sm


def test_longer_rows_from_a_newer_driver_still_decode(build):
    """Rows longer than any known generation: the known prefix decodes, the rest is ignored."""
    longer = dict(dev=96, grid=160, sm=64, cta=64, warp=96, lane=80, meta=40)
    scenario = scenarios.fault(rows=dict(NEWEST, **longer))
    report = crashlab.inspect(build(scenario).path)
    assert_planted(report.faults[0], scenario.planted)
    assert report.dump.driver_version == "580.65"


def test_gzip_dump(build):
    scenario = scenarios.fault()
    built = build(scenario, name="core.nvcudmp.gz", compress=True)
    assert built.path.read_bytes()[:2] == b"\x1f\x8b"
    report = crashlab.inspect(built.path)
    assert report.source.compressed
    assert_planted(report.faults[0], scenario.planted)


def test_several_devices_fault_on_second(build):
    scenario = scenarios.fault(device_count=3, faulting_device=1)
    report = crashlab.inspect(build(scenario).path)
    assert [d.index for d in report.devices] == [0, 1, 2]
    assert len(report.kernels) == 3
    assert_planted(report.faults[0], scenario.planted)
    assert report.faults[0].device == 1


def test_extended_section_numbering(build):
    """Over 65,279 sections: e_shnum is 0, the count and .shstrtab index live in section 0."""
    scenario = scenarios.fault()
    scenario.spec.filler_sections = 70_000
    built = build(scenario)
    raw = built.path.read_bytes()
    assert int.from_bytes(raw[60:62], "little") == 0  # e_shnum
    assert int.from_bytes(raw[62:64], "little") == 0xFFFF  # e_shstrndx = SHN_XINDEX
    report = crashlab.inspect(built.path)
    assert report.dump.section_count == built.section_count > 70_000
    assert_planted(report.faults[0], scenario.planted)


def test_names_are_not_parsed(build):
    """Section names whose digits lie do not change what is read: links are followed instead."""
    scenario = scenarios.fault(device_count=2)
    scenario.spec.lying_names = True
    report = crashlab.inspect(build(scenario).path)
    assert_planted(report.faults[0], scenario.planted)


def test_error_pc_invalid_uses_lane_pc(build):
    scenario = scenarios.fault(warp_error_pc=False, sm_reports=False)
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert fault.pc_source.startswith("lane PC")
    assert fault.pc == hex(scenario.planted.pc)
    assert any("errorPC is not valid" in note for note in fault.notes)


def test_sm_level_exception_blames_no_warp_and_lists_candidates(build):
    """The SM reports an exception and no lane claims it: as in cuda-gdb, no warp, block or
    thread is chosen; the warps on that SM, the one with the errorPC among them, are candidates."""
    scenario = scenarios.fault(marked_lanes=())
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert fault.exception.code == scenarios.WARP_ILLEGAL_ADDRESS
    assert fault.faulting_lanes == 0 and fault.faulting_warps == 0
    assert (fault.warp, fault.lane, fault.block_idx, fault.thread_idx) == (None, None, None, None)
    assert fault.sm == scenario.planted.sm and fault.pc_source == "SM errorPC"
    assert {c.warp for c in fault.candidates} == {scenario.planted.warp - 1, scenario.planted.warp}
    flagged = [c for c in fault.candidates if c.error_pc]
    assert [c.warp for c in flagged] == [scenario.planted.warp]
    assert any("candidates only" in note for note in fault.notes)


def test_warp_scoped_exception_on_old_driver_is_unknown_not_hidden(build):
    """No SM exception field and no lane marked: cuda-gdb would say Device Unknown Exception."""
    scenario = scenarios.fault(marked_lanes=(), rows=dict(NEWEST, sm=8))
    report = crashlab.inspect(build(scenario).path)
    assert report.faults[0].exception.name == "CUDBG_EXCEPTION_UNKNOWN"
    assert report.faults[0].exception.display == "Device Unknown Exception"


def test_exception_after_warp_exit_is_reported_from_the_sm(build):
    scenario = scenarios.exited_warp()
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert fault.pc_source == "SM errorPC"
    assert fault.pc == hex(scenario.notes["pc"])
    assert fault.sm == scenario.notes["sm"]
    assert fault.block_idx is None and fault.thread_idx is None and fault.warp is None
    assert fault.kernel_inferred and fault.kernel.mangled == scenario.planted.kernel
    assert_source(fault, scenario.planted)


def test_unknown_exception_code_is_shown_raw(build):
    scenario = scenarios.fault(exception=99)
    report = crashlab.inspect(build(scenario).path)
    exception = report.faults[0].exception
    assert exception.code == 99 and not exception.known
    assert "99" in exception.name and "99" in exception.display
    assert "unknown" not in exception.display.lower()


def test_inline_chain_innermost_first(build):
    """atomicAdd is inlined into moe_align_block_size: the chain runs header -> caller."""
    scenario = scenarios.fault("moe_align.sm_90.cubin:shared-out-of-range",
                               scenarios.WARP_OUT_OF_RANGE_ADDRESS)
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert_planted(fault, scenario.planted)
    assert_source(fault, scenario.planted)
    assert len(fault.sass.source) == 2
    assert fault.exception.display == "Warp Out-of-range Address"


@pytest.mark.parametrize("debug_build", [False, True], ids=["lineinfo", "G"])
def test_fault_in_device_function(build, debug_build):
    scenario = scenarios.device_function(debug_build)
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert_planted(fault, scenario.planted)
    assert_source(fault, scenario.planted)
    assert fault.function == "scatter_row(float*, int const*, int, float)"
    assert fault.kernel.name == "scatter_rows(float*, int const*, int)"
    # The frame's number: test_real_cuda_gdb.py::test_backtrace_frame_numbers (cuda-gdb's #1).
    assert [f.pc for f in fault.backtrace] == [hex(scenario.notes["return_pc"])]
    assert fault.backtrace[0].function == "scatter_rows(float*, int const*, int)"


@pytest.mark.parametrize("absolute", [True, False], ids=["absolute-symbols", "relative-symbols"])
def test_symbol_values_either_way(build, absolute):
    scenario = scenarios.fault(absolute_symbols=absolute)
    report = crashlab.inspect(build(scenario).path)
    assert_source(report.faults[0], scenario.planted)
    assert report.faults[0].function == "write_past_end(int*, int)"


def test_cluster_fields(build):
    scenario = scenarios.fault("cluster.sm_90.cubin:cluster", cluster=True)
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert_planted(fault, scenario.planted)
    assert fault.cluster_dim == (2, 1, 1)
    assert fault.cluster_idx == (0, 0, 0)
    assert fault.cluster_target_block == (3, 0, 0)
    assert report.kernels[0].cluster_dim == (2, 1, 1)


def test_no_exception_reports_where_warps_stand(build):
    scenario = scenarios.hang()
    report = crashlab.inspect(build(scenario).path)
    assert report.status == "no-exception" and report.faults == []
    assert report.summary.startswith("No exception")
    spin, wait = report.kernels
    assert spin.name == "wait_for_flag(int volatile*, int*)"
    assert (spin.resident_blocks, spin.resident_warps, spin.resident_sms) == (8, 16, 8)
    assert spin.warps_at[0].pc == hex(scenario.notes["spin_pc"]) and spin.warps_at[0].warps == 12
    assert spin.warps_at[0].function_offset == scenario.notes["spin_marker"].offset
    assert wait.warps_at[0].pc == hex(scenario.notes["wait_pc"]) and wait.warps_at[0].warps == 1


def test_faults_ordered_as_cuda_gdb_meets_them(build):
    """Both devices have lanes with their own exception: cuda-gdb iterates device 0 first, so
    device 0's fault comes first even though only device 1's SM reported its exception."""
    scenario = scenarios.fault(device_count=2, faulting_device=1)
    quiet = scenario.spec.devices[0].sms[2].ctas[0].warps[0]
    quiet.lanes[5].exception = scenarios.WARP_MISALIGNED_ADDRESS
    report = crashlab.inspect(build(scenario).path)
    assert [f.device for f in report.faults] == [0, 1]
    assert report.faults[1].reported_by_sm and not report.faults[0].reported_by_sm
    assert report.faults[0].exception.code == scenarios.WARP_MISALIGNED_ADDRESS
    assert "+1 more fault group" in report.summary


def test_faults_grouped_by_pc_and_exception(build):
    """Two warps at the same PC with the same exception are one fault with two warps."""
    scenario = scenarios.fault()
    device = scenario.spec.devices[0]
    twin = device.sms[1].ctas[0].warps[0]
    victim = device.sms[1].ctas[0].warps[1]
    twin.error_pc = victim.error_pc
    twin.lanes[7].exception = scenarios.WARP_ILLEGAL_ADDRESS
    report = crashlab.inspect(build(scenario).path)
    assert len(report.faults) == 1
    fault = report.faults[0]
    assert fault.faulting_warps == 2 and fault.faulting_lanes == 5
    assert fault.threads.first == (7, 0, 0) and fault.threads.last == (35, 0, 0)


def test_memory_sections_are_listed_not_read(build, monkeypatch):
    scenario = scenarios.fault()
    scenario.spec.global_memory = [(0x7F00_0000_0000, 64 << 20), (0x7F10_0000_0000, 1 << 20)]
    built = build(scenario)
    touched = []
    original = ElfImage.data

    def spy(self, index, limit=None):
        touched.append((self.sections.type[index], limit))
        return original(self, index, limit)

    monkeypatch.setattr(ElfImage, "data", spy)
    report = crashlab.inspect(built.path)
    assert report.dump.memory_bytes >= 65 << 20
    memory_reads = [(kind, limit) for kind, limit in touched if kind in set(map(int, MEMORY_TYPES))]
    # The only memory section read is the faulting grid's parameter buffer, and only 32 KiB of it.
    assert all(kind == 0x80000012 and limit == 32 * 1024 for kind, limit in memory_reads)


def test_core_dump_api_reads_memory_on_request(build):
    scenario = scenarios.fault()
    scenario.spec.global_memory = [(0x7F00_0000_0000, 4096)]
    with CoreDump(build(scenario).path) as core:
        region = next(r for r in core.memory_regions() if r.kind == "GLOBAL_MEM")
        assert (region.address, region.size) == (0x7F00_0000_0000, 4096)
        assert core.read_memory(region, 16, 8) == bytes(8)
        with pytest.raises(ValueError):
            core.read_memory(region, 4090, 8)


def test_unknown_abi_version_warns(build):
    scenario = scenarios.fault()
    scenario.spec.abi_version = 9
    report = crashlab.inspect(build(scenario).path)
    assert any("ABI version 9" in w for w in report.warnings)
    assert_planted(report.faults[0], scenario.planted)


def test_spec_defaults_are_newest():
    assert Spec([]).row_size("warp") == 80 and Spec([]).row_size("lane") == 64


def test_every_section_type_is_recognised(build):
    scenario = scenarios.every_section_type()
    with CoreDump(build(scenario).path) as core:
        counts = {kind: core.index.count(kind) for kind in SectionType}
        missing = [kind.name for kind, count in counts.items() if count == 0]
        assert missing == [], missing
        regions = core.memory_regions()
        assert {r.kind for r in regions} == {
            "MANAGED_MEM", "GLOBAL_MEM", "LOCAL_MEM", "SHARED_MEM", "PARAM_MEM"}
        assert core.memory_totals() == (len(regions), sum(r.size for r in regions))
    report = crashlab.inspect(build(scenario, name="again.nvcudmp").path)
    assert_planted(report.faults[0], scenario.planted)
    assert report.faults[0].backtrace[0].level == 1  # the dump's level-0 row: cuda-gdb's frame #1


def test_every_lane_faulting_is_one_group(build):
    """A kernel whose every warp hits the same bad store: one fault, all warps and lanes counted."""
    scenario = scenarios.fault()
    device = scenario.spec.devices[0]
    pc = scenario.planted.pc
    for sm in device.sms:
        sm.exception, sm.error_pc = scenarios.WARP_ILLEGAL_ADDRESS, pc
        for cta in sm.ctas:
            for warp in cta.warps:
                warp.error_pc = pc
                for lane in warp.lanes:
                    lane.exception = scenarios.WARP_ILLEGAL_ADDRESS
    report = crashlab.inspect(build(scenario).path, sass=False)
    assert len(report.faults) == 1
    fault = report.faults[0]
    assert (fault.faulting_warps, fault.faulting_lanes) == (8, 256)
    assert fault.blocks.first == (0, 0, 0) and fault.blocks.last == (3, 0, 0)
    assert fault.blocks.count == 4 and fault.threads.count == 64


CUBINS = sorted((ROOT / "fixtures" / "cubins").rglob("*.cubin"))


@pytest.mark.parametrize("cubin", CUBINS, ids=lambda path: path.name)
def test_kernel_entries_are_read_as_pyelftools_reads_them(cubin):
    """text_sections reads a cubin's section headers itself (the grid's kernel is named from
    them); pyelftools, parsing the whole file, is the second reading."""
    data = cubin.read_bytes()
    elf = ELFFile(io.BytesIO(data))
    expected = [(section.name.removeprefix(".text."), section["sh_addr"])
                for section in elf.iter_sections() if section.name.startswith(".text.")]
    assert expected and text_sections(data) == expected
    # a stranger's image: cut inside its section headers, or not an ELF file, names nothing
    assert text_sections(data[: elf["e_shoff"] + 10]) == []
    assert text_sections(data[:40]) == [] and text_sections(b"\0" * len(data)) == []
