"""SASS extraction: finding nvdisasm, carving cubins, parsing its listing on real cubins."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

import crashlab
from crashlab.sass import listing as sass_listing
from tests import scenarios
from tests.coredump_builder import CUBINS, markers


def _real_nvdisasm(monkeypatch) -> str:
    monkeypatch.delenv("CRASHLAB_NVDISASM", raising=False)
    found, why = sass_listing.find_nvdisasm()
    if found is None:
        pytest.fail(f"the test environment must have nvdisasm (pip install '.[sass]'): {why}")
    return found


def test_nvdisasm_found_from_the_wheel_or_path(monkeypatch):
    found = _real_nvdisasm(monkeypatch)
    assert os.access(found, os.X_OK)
    assert sass_listing.nvdisasm_version(found).startswith("nvdisasm V")


def test_override_that_does_not_exist(monkeypatch, tmp_path):
    monkeypatch.setenv("CRASHLAB_NVDISASM", str(tmp_path / "missing"))
    assert sass_listing.find_nvdisasm()[0] is None


def test_path_wins_over_the_wheel(monkeypatch, tmp_path):
    monkeypatch.delenv("CRASHLAB_NVDISASM", raising=False)
    fake = tmp_path / "nvdisasm"
    fake.write_text("#!/bin/sh\necho fake\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert sass_listing.find_nvdisasm()[0] == str(fake)


def test_without_nvdisasm_the_report_still_names_function_and_offset(build, monkeypatch, tmp_path):
    monkeypatch.setenv("CRASHLAB_NVDISASM", str(tmp_path / "absent"))
    scenario = scenarios.device_function()
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert fault.sass.instructions == []
    assert "CRASHLAB_NVDISASM" in fault.sass.unavailable_reason
    assert fault.function == "scatter_row(float*, int const*, int, float)"
    assert fault.function_offset == scenario.planted.function_offset
    assert fault.sass.section == ".text._Z12scatter_rowsPfPKii"


def test_no_sass_flag_skips_nvdisasm(build, monkeypatch, tmp_path):
    log = tmp_path / "called"
    spy = tmp_path / "nvdisasm"
    spy.write_text(f"#!/bin/sh\ntouch {log}\nexit 1\n")
    spy.chmod(0o755)
    monkeypatch.setenv("CRASHLAB_NVDISASM", str(spy))
    report = crashlab.inspect(build(scenarios.fault()).path, sass=False)
    assert not log.exists()
    assert report.faults[0].sass.unavailable_reason == "disassembly not requested"


def test_failing_nvdisasm_is_reported_not_raised(build, monkeypatch, tmp_path):
    broken = tmp_path / "nvdisasm"
    broken.write_text("#!/bin/sh\necho 'nvdisasm fatal : boom' >&2\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv("CRASHLAB_NVDISASM", str(broken))
    report = crashlab.inspect(build(scenarios.fault()).path)
    assert report.faults[0].sass.unavailable_reason == "nvdisasm failed: nvdisasm fatal : boom"
    assert report.faults[0].function == "write_past_end(int*, int)"


def test_parse_listing_on_a_real_cubin(monkeypatch):
    """Every marker's instruction, line chain included, as parse_listing reads nvdisasm -gi."""
    tool = _real_nvdisasm(monkeypatch)
    for marker in markers().values():
        out = subprocess.run([tool, "-c", "-gi", str(CUBINS / marker.cubin)], check=True,
                             capture_output=True, text=True).stdout
        sections = out.split("//--------------------- ")
        body = next(s for s in sections if s.startswith(marker.text_section + " "))
        listing = sass_listing.parse_listing(body)
        hit = next(ins for ins in listing if ins.address == marker.offset)
        assert hit.text.endswith(marker.instruction)
        assert [f"{s.file.rsplit('/', 1)[-1]}:{s.line}" for s in hit.source] == list(marker.chain)


def test_parse_listing_keeps_predicates_and_ignores_encodings():
    listing = sass_listing.parse_listing(
        '\t//## File "/a/k.cu", line 3\n'
        "        /*0070*/               @P0 EXIT ;                       /* 0x000000000000094d */\n"
        "                                                                /* 0x000fea0003800000 */\n"
        '\t//## File "/a/h.h", line 9 inlined at "/a/k.cu", line 4\n'
        '\t//## File "/a/k.cu", line 4\n'
        "        /*0080*/                   STG.E desc[UR4][R2.64], R5 ;\n"
        "        /*0090*/                   BRA `(.L_x_0);\n"
    )
    assert [(i.address, i.text) for i in listing] == [
        (0x70, "@P0 EXIT"), (0x80, "STG.E desc[UR4][R2.64], R5"), (0x90, "BRA `(.L_x_0)")]
    assert [(s.file, s.line) for s in listing[1].source] == [("/a/h.h", 9), ("/a/k.cu", 4)]
    assert listing[2].source == listing[1].source


def test_parse_listing_names_labels_by_their_first_use_in_the_section():
    """nvdisasm numbers labels across a whole cubin (and otherwise under ``-fun``): a section's
    listing names them by their first use there, each branch keeping the offset it names."""
    listing = sass_listing.parse_listing(
        "        /*0000*/              @!P0 BRA `(.L_x_41) ;\n"
        ".L_x_57:\n"
        "        /*0010*/                   NOP ;\n"
        ".L_x_41:\n"
        "        /*0020*/               @P0 BRA `(.L_x_57) ;\n"
        "        /*0030*/                   BRA `(.L_x_41) ;\n"
        "        /*0040*/                   BRA `(.L_x_9) ;\n"  # defined in no section here: kept
        ".L_x_60:\n"
    )
    assert [(i.text, i.target) for i in listing] == [
        ("@!P0 BRA `(.L_x_0)", 0x20), ("NOP", None), ("@P0 BRA `(.L_x_1)", 0x10),
        ("BRA `(.L_x_0)", 0x20), ("BRA `(.L_x_9)", None)]


def test_pc_outside_every_cubin(build):
    scenario = scenarios.fault()
    victim = scenario.spec.devices[0].sms[1].ctas[0].warps[1]
    victim.error_pc = 0x1234_5670
    scenario.spec.devices[0].sms[1].error_pc = 0x1234_5670
    report = crashlab.inspect(build(scenario).path)
    fault = report.faults[0]
    assert fault.pc == "0x12345670"
    assert fault.sass.unavailable_reason == "no relocated cubin in the dump holds this PC"


def test_disassembly_window_size(build):
    report = crashlab.inspect(build(scenarios.fault()).path, context=2)
    instructions = report.faults[0].sass.instructions
    assert len(instructions) == 5 and instructions[2].faulting


def test_whole_cubin_listing_finds_every_text_section_whatever_its_header_padding():
    """nvdisasm pads a section's header to a width, so a name of some lengths is followed by
    two spaces (``.text._Z11fill_countsPii  ---``): every section of every fixture cubin must
    come back from one whole-cubin listing, each with instructions."""
    from elftools.elf.elffile import ELFFile

    from crashlab.sass.listing import find_nvdisasm, split_listing

    tool, why = find_nvdisasm()
    if tool is None:
        pytest.skip(why)
    cubins = sorted(CUBINS.glob("*.cubin"))
    assert any("fill_counts" in p.name or "misaligned_argument" in p.name for p in cubins)
    for path in cubins:
        with path.open("rb") as stream:
            texts = {s.name for s in ELFFile(stream).iter_sections()
                     if s.name.startswith(".text.") and s["sh_size"]}
        listing = subprocess.run([tool, "-c", "-gi", "-ndf", str(path)], capture_output=True,
                                 text=True, check=True).stdout
        split = split_listing(listing)
        assert texts <= set(split), (path.name, texts - set(split))
        assert all(split[name] for name in texts)
