"""The bundled synthetic examples: in sync with the builder, and triaged as their provenance says."""

from __future__ import annotations

from tests import make_examples
from tests.conftest import run_cli


def test_bundled_examples_are_what_the_builder_writes(tmp_path):
    make_examples.main(tmp_path)
    for name in make_examples.examples():
        assert (tmp_path / name).read_bytes() == (make_examples.FOLDER / name).read_bytes(), name
    assert (make_examples.FOLDER / "PROVENANCE.md").read_text().count("synthetic") >= 3


def test_readme_example_command_prints_the_fault():
    done = run_cli("inspect", "fixtures/synthetic/moe_align_out_of_range.nvcudmp")
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr
    assert "Warp Out-of-range Address" in out
    assert "moe_align_block_size(int const*, int*, int)" in out
    assert "ATOMS.POPC.INC.32" in out
    assert "moe_align.cu:24" in out
    assert done.stderr == b""


def test_hang_example_exits_1():
    done = run_cli("inspect", "fixtures/synthetic/hang_no_exception.nvcudmp")
    assert done.returncode == 1
    assert "No exception" in done.stdout.decode()
    assert "wait_for_flag" in done.stdout.decode()
