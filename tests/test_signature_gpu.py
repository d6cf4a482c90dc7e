"""GPU crash signatures on pairs of dumps that must match and must not.

The dumps are SYNTHETIC (tests/coredump_builder.py) around real cubins: the nvcc-built ones of
fixtures/kernels (with line information) and the production cubins carved from public wheels
(without it), relocated as the driver relocates a module. A pair differs in one thing: where the
module was loaded (the PC), the device (the rank) and its grid, the SM, warp and block, or the
faulting site.
"""

from __future__ import annotations

import json

import pytest

import crashlab
from crashlab.report.model import TriageReport
from crashlab.report.signature import CrashSignature
from crashlab.signature import compute
from tests import coredump_builder, scenarios
from tests.conftest import ROOT, run_cli
from tests.schema_check import errors
from tests.test_production_cubins import CUBIN_FILES, Site, fault_dump, original_listing, site

MOE = "moe_align.sm_90.cubin:shared-out-of-range"
FIXTURE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
ELSEWHERE = 0x7FA1_2000_0000  # another run's load address


def signed(scenario: scenarios.Scenario, path, **options) -> CrashSignature:
    coredump_builder.write(scenario.spec, path)
    return crashlab.inspect(path, **options).signature


def test_the_bundled_fault_is_signed_by_kernel_and_source_line():
    report = crashlab.inspect(FIXTURE)
    signature = report.signature
    assert signature == compute(report)
    assert signature.kind == "gpu-fault" and signature.version == 2
    assert signature.parts == ["WARP_OUT_OF_RANGE_ADDRESS", "moe_align_block_size", "moe_align.cu:24"]
    assert signature.text == "gpu-fault: WARP_OUT_OF_RANGE_ADDRESS | moe_align_block_size | moe_align.cu:24"
    assert signature.title == "Warp Out-of-range Address in moe_align_block_size at moe_align.cu:24"
    assert signature.search == '"moe_align_block_size" "illegal memory access"'
    assert len(signature.hash) == 12 and int(signature.hash, 16) >= 0
    assert any("file basename" in note for note in signature.notes)
    assert "0x7fff3a000210" not in signature.text and "SM" not in signature.text


def test_the_same_fault_loaded_elsewhere_on_another_rank_and_sm_is_the_same_signature(tmp_path):
    first = signed(scenarios.fault(MOE, scenarios.WARP_OUT_OF_RANGE_ADDRESS), tmp_path / "a.nvcudmp")
    relocated = scenarios.fault(MOE, scenarios.WARP_OUT_OF_RANGE_ADDRESS, code_base=ELSEWHERE)
    moved = signed(relocated, tmp_path / "b.nvcudmp")
    other_rank = scenarios.fault(MOE, scenarios.WARP_OUT_OF_RANGE_ADDRESS, device_count=2,
                                 faulting_device=1, code_base=ELSEWHERE)
    for sm in other_rank.spec.devices[1].sms:
        sm.sm_id += 60
    ranked = signed(other_rank, tmp_path / "c.nvcudmp")
    reports = [crashlab.inspect(tmp_path / f"{n}.nvcudmp") for n in "abc"]
    assert len({r.faults[0].pc for r in reports}) == 3  # the PCs differ...
    assert [r.faults[0].device for r in reports] == [0, 0, 1]
    assert reports[0].faults[0].sm != reports[2].faults[0].sm
    assert first == moved == ranked  # ...the signature does not
    assert first == crashlab.inspect(FIXTURE).signature


def test_another_exception_or_another_kernel_is_another_signature(tmp_path):
    base = signed(scenarios.fault(MOE, scenarios.WARP_OUT_OF_RANGE_ADDRESS), tmp_path / "a.nvcudmp")
    other_exception = signed(scenarios.fault(MOE, scenarios.WARP_ILLEGAL_ADDRESS), tmp_path / "b.nvcudmp")
    other_kernel = signed(scenarios.fault("illegal_address.sm_90.cubin:illegal-address"), tmp_path / "c.nvcudmp")
    assert len({base.hash, other_exception.hash, other_kernel.hash}) == 3
    assert len({base.coarse, other_exception.coarse, other_kernel.coarse}) == 3
    assert other_exception.parts[1:] == base.parts[1:]
    assert other_kernel.parts == ["WARP_ILLEGAL_ADDRESS", "write_past_end", "illegal_address.cu:8"]


def test_a_fault_in_a_device_function_names_it_and_its_line(tmp_path):
    signature = signed(scenarios.device_function(debug_build=True), tmp_path / "core.nvcudmp")
    assert signature.parts == ["WARP_ILLEGAL_ADDRESS", "scatter_rows", "scatter_row", "device_function.cu:6"]
    assert signature.title == "Warp Illegal Address in scatter_rows (scatter_row) at device_function.cu:6"


def test_without_disassembly_the_source_line_comes_from_the_line_table_and_the_hash_is_the_same(tmp_path):
    scenario = scenarios.fault(MOE, scenarios.WARP_OUT_OF_RANGE_ADDRESS)
    with_sass = signed(scenario, tmp_path / "a.nvcudmp")
    without = crashlab.inspect(tmp_path / "a.nvcudmp", sass=False)
    assert without.faults[0].sass.instructions == [] and without.faults[0].sass.tool is None
    assert without.signature == with_sass
    assert with_sass.parts[-1] == "moe_align.cu:24"


@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_production_kernels_without_line_info_are_signed_by_offset_the_opcode_only_shown(cubin, tmp_path):
    at = site(cubin, "kernel")
    fault_dump(cubin, at, tmp_path / "a.nvcudmp")
    fault_dump(cubin, at, tmp_path / "b.nvcudmp", base=ELSEWHERE)
    first, second = (crashlab.inspect(tmp_path / f"{n}.nvcudmp") for n in "ab")
    assert first.faults[0].pc != second.faults[0].pc
    assert first.signature == second.signature
    signature = first.signature
    opcode = next(text for offset, text in original_listing(cubin) if offset == at.offset).split()[0]
    assert opcode.startswith(("LDG", "STG"))
    offset = f"+{at.offset - at.symbol.start:#x}"
    assert signature.parts[-1] == offset and signature.title.endswith(f" at {offset} {opcode}")
    assert any("no source line" in note for note in signature.notes)
    assert any(f"opcode {opcode} shown in the title, not hashed" in n for n in signature.notes)
    # the hashed text is the same without nvdisasm: the opcode is in the title only
    without = crashlab.inspect(tmp_path / "a.nvcudmp", sass=False).signature
    assert without.hash == signature.hash and without.text == signature.text
    assert without.title.endswith(f" at {offset}")


@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_another_site_in_the_same_kernel_or_its_callee_is_another_signature(cubin, tmp_path):
    kernel = site(cubin, "kernel")
    later = next(offset for offset, text in original_listing(cubin)
                 if offset > kernel.offset and offset < kernel.symbol.start + kernel.symbol.size
                 and text.split()[0].startswith(("LDG", "STG", "@")))
    signatures = []
    for name, at in (("a", kernel), ("b", Site(later, kernel.symbol)), ("c", site(cubin, "callee"))):
        fault_dump(cubin, at, tmp_path / f"{name}.nvcudmp")
        signatures.append(crashlab.inspect(tmp_path / f"{name}.nvcudmp").signature)
    assert len({s.hash for s in signatures}) == 3
    assert signatures[0].parts[:2] == signatures[1].parts[:2]
    # another site of the same kernel is the same bug in the coarse key (lines move between
    # releases); the callee, another function, is not
    assert signatures[0].coarse == signatures[1].coarse != signatures[2].coarse
    callee = signatures[2]
    assert callee.parts[2].startswith("__cuda_") and callee.parts[1] == signatures[0].parts[1]


def test_the_cutlass_kernel_is_named_shortly(tmp_path):
    cubin = "cutlass_mxfp8_grouped_gemm.sm_100.cubin"
    fault_dump(cubin, site(cubin, "kernel"), tmp_path / "core.nvcudmp")
    signature = crashlab.inspect(tmp_path / "core.nvcudmp").signature
    assert signature.parts[1].startswith("cutlass::gemm::kernel::GemmUniversal<") and len(signature.text) < 400
    assert signature.title.startswith("Warp Illegal Address in GemmUniversal at +0x")
    assert signature.search == '"GemmUniversal" "illegal memory access"'


def test_a_dump_waiting_in_a_collective_is_collateral_named_by_the_collective():
    report = crashlab.inspect(ROOT / "fixtures" / "synthetic" / "hang_no_exception.nvcudmp")
    assert report.signature.kind == "collateral"
    assert report.signature.parts == ["fake_allreduce_wait"]


def test_a_hang_is_named_by_its_kernels_and_where_their_warps_stand(tmp_path):
    hang = scenarios.hang()
    device = hang.spec.devices[0]
    device.grids, device.sms = device.grids[:1], device.sms[:-1]  # no collective kernel left
    signature = signed(hang, tmp_path / "core.nvcudmp")
    assert signature.kind == "gpu-hang"
    assert signature.parts == ["wait_for_flag @ hang.cu:6"]
    assert signature.title == "GPU hang in wait_for_flag"


def test_inspect_json_and_views_carry_the_signature():
    done = run_cli("inspect", FIXTURE, "--json")
    report = json.loads(done.stdout)
    assert errors(report, "triage") == [] and errors(report["signature"], "signature") == []
    signature = TriageReport.model_validate(report).signature
    shown = run_cli("inspect", FIXTURE, env={"COLUMNS": "80"}).stdout.decode().splitlines()
    assert shown[1] == f"signature {signature.hash} {signature.title}"
    markdown = run_cli("inspect", FIXTURE, "--markdown").stdout.decode()
    assert f"Signature: `{signature.hash}` {signature.title}" in markdown.splitlines()


def test_a_report_older_than_signatures_still_validates_and_reads():
    old = json.loads((ROOT / "fixtures" / "reports" / "5807732" / "triage-moe_align.json").read_text())
    assert "signature" not in old
    assert errors(old, "triage") == []
    assert compute(TriageReport.model_validate(old)).hash == crashlab.inspect(FIXTURE).signature.hash


def test_the_hash_is_of_the_version_and_the_text():
    import hashlib

    signature = crashlab.inspect(FIXTURE).signature
    assert signature.hash == hashlib.sha256(f"2\n{signature.text}".encode()).hexdigest()[:12]

