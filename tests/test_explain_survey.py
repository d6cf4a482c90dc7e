"""The explainer's survey on the production cubins (docs/benchmarks.md's table): every memory instruction's
address operand is read, except the TMA and tensor-memory ones, whose address is in a descriptor;
the counts of slices reaching their roots are floors (the slice may learn more, never less)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from crashlab.explain.survey import survey
from crashlab.sass.listing import find_nvdisasm

PRODUCTION = Path(__file__).resolve().parent.parent / "fixtures" / "cubins" / "production"
#: cubin -> (slices reaching their roots, slices), as docs/benchmarks.md gives them
FLOORS = {
    "cutlass_mxfp8_grouped_gemm.sm_100.cubin": (568, 720),
    "merge_attn_states.sm_90a.cubin": (0, 18),
    "ngram_ids.sm_120.cubin": (0, 11),
    "ngram_ids.sm_80.cubin": (0, 14),
}
#: the opcode families whose address is a descriptor or tensor memory
_DESCRIPTOR = re.compile(r"\s(UTMALDG|UTMASTG|UTMAREDG|UTMAPF|UBLKCP|UBLKRED|UBLKPF|LDTM|STTM|SULD|SUST|SUATOM|SURED)[.\s]")


def _descriptor_ops(cubin: Path) -> int:
    """Counted from nvdisasm's own text, independently of crashlab's access table."""
    tool, why = find_nvdisasm()
    if tool is None:
        pytest.fail(f"the test environment must have nvdisasm: {why}")
    text = subprocess.run([tool, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in text.splitlines() if _DESCRIPTOR.search(line))


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_survey_of_the_production_cubins(name):
    found = survey(name, (PRODUCTION / name).read_bytes())
    assert not isinstance(found, str), found
    assert found.undecoded == []
    assert found.descriptor == _descriptor_ops(PRODUCTION / name)
    assert found.decoded + found.constant + found.descriptor == found.memory_instructions
    assert found.slices == found.decoded
    floor, slices = FLOORS[name]
    assert found.slices >= slices and found.reached_roots >= floor


def test_every_production_cubin_is_surveyed():
    assert sorted(p.name for p in PRODUCTION.glob("*.cubin")) == sorted(FLOORS)
