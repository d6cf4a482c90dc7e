"""The bundled synthetic examples: in sync with the builder, and triaged as their provenance says."""

from __future__ import annotations

import re

from tests import make_examples, scenarios
from tests.conftest import run_cli
from tests.coredump_builder import ROOT


def test_bundled_examples_are_what_the_builder_writes(tmp_path):
    make_examples.main(tmp_path)
    for name in make_examples.examples():
        assert (tmp_path / name).read_bytes() == (make_examples.FOLDER / name).read_bytes(), name
    assert (make_examples.FOLDER / "PROVENANCE.md").read_text().count("synthetic") >= 3


def test_readme_example_command_prints_the_fault_and_why():
    """README's first command, as written there: the fault, and the why its planted truth gives."""
    command = re.search(r"crashlab inspect (\S+)", (ROOT / "README.md").read_text())[1]
    assert command == "fixtures/synthetic/moe_align_explained.nvcudmp"
    done = run_cli("inspect", command)
    out = " ".join(done.stdout.decode().split())
    assert done.returncode == 0, done.stderr
    assert "Warp Out-of-range Address" in out
    assert "moe_align_block_size(int const*, int*, int)" in out
    assert "ATOMS.POPC.INC.32" in out
    assert "moe_align.cu:24" in out
    truth = scenarios.explained("moe", "sm_90").notes["truth"]
    assert "why: explained from the dump" in out
    assert f"address {truth.address:#x} (dump)" in out
    assert f"past the {scenarios.MOE_SHARED_BYTES:#x} bytes of static shared memory" in out
    assert done.stderr == b""


def test_hang_example_exits_1():
    done = run_cli("inspect", "fixtures/synthetic/hang_no_exception.nvcudmp")
    assert done.returncode == 1
    assert "No exception" in done.stdout.decode()
    assert "wait_for_flag" in done.stdout.decode()
