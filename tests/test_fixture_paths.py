"""No fixture carries an absolute path of a machine it was built or recorded on.

Such a path says something about a person's machine and ends up in reports (a cubin's line table
is what crashlab prints as a fault's source). Scripts (*.py, *.sh) are exempt: their scratch and
output paths are instructions, not traces of a machine. Toolkit paths (/usr/local/cuda-13.0/...,
/usr/lib/gcc/...) are not looked for: they are the CUDA and GCC packages' default install
locations, the same on every machine, and what every user's cubins carry
(fixtures/cubins/PROVENANCE.md says why the cubins keep them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import ROOT, run_cli

FIXTURES = ROOT / "fixtures"
#: An absolute path under a directory of a person or a build: up to a quote, a space, `<`, `>`,
#: a comma or a byte that is not printable ASCII (pickles and ELF files hold strings raw).
MACHINE_PATH = re.compile(rb"/(?:work|home|tmp|root)/[\x21-\x7e]*?(?=[\s\"'`<>(),;]|[^\x21-\x7e]|$)")
#: Paths that are data, per folder, and why.
EXEMPT = {
    # The dumps record the server arguments they were made with; make_real_dumps.py and
    # make_dumps.py chose these neutral paths for the model and crash-dump folders (their
    # PROVENANCE.md); they belong to no machine. The glob forms and /tmp/big.pkl are PROVENANCE's.
    "sglang_dumps": ("/tmp/crashlab-model", "/tmp/crashlab_remote_model", "/tmp/crashlab_unpicklable_model",
                     "/tmp/crashlab-crash-dumps", "/tmp/crash", "/tmp/crashlab-*", "/tmp/crashlab_*_model",
                     "/tmp/big.pkl"),
    # Driver-written dumps: record.py builds and runs the programs in this fixed scratch folder
    # (it is in their line tables and command lines), and the GPU machine's pytest logs name
    # pytest's own temporary root (fixtures/gpu/PROVENANCE.md).
    "gpu": ("/tmp/crashlab-gpu", "/tmp/pytest-of-root"),
    # A stranger's server log from a public report, copied unchanged (fixtures/logs/PROVENANCE.md),
    # and SGLang 0.5.23's own default for the driver's pipe, which its --crash-dump-folder sets
    # and its log prints (sglang/srt/arg_groups/serving_hook.py): the same on every machine.
    "logs": ("/home/yzy/rebuild-pytorch", "/tmp/corepipe.cuda.%h.%p"),
}


def covers(exempt: str, found: str) -> bool:
    return found == exempt or found.startswith(exempt + "/")


def found_paths(path: Path) -> list[str]:
    return [m.decode() for m in MACHINE_PATH.findall(path.read_bytes())]


def machine_paths(path: Path) -> list[str]:
    """The build-machine paths in a file that its folder's exemptions do not cover."""
    allowed = EXEMPT.get(path.relative_to(FIXTURES).parts[0], ())
    return [p for p in found_paths(path) if not any(covers(a, p) for a in allowed)]


def fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix not in (".py", ".sh"))


def test_no_fixture_holds_a_path_of_a_build_machine():
    files = fixture_files()
    kinds = {p.suffix for p in files}
    assert {".cubin", ".nvcudmp", ".json", ".md", ".pkl", ".txt"} <= kinds
    leaks = {str(p.relative_to(ROOT)): machine_paths(p) for p in files}
    assert {name: paths for name, paths in leaks.items() if paths} == {}


def test_every_exemption_is_still_needed():
    unused = {folder: set(allowed) for folder, allowed in EXEMPT.items()}
    for path in fixture_files():
        folder = path.relative_to(FIXTURES).parts[0]
        for found in found_paths(path):
            unused.get(folder, set()).difference_update({a for a in unused.get(folder, ()) if covers(a, found)})
    assert unused == {folder: set() for folder in EXEMPT}


def test_the_scan_finds_a_path_in_a_cubin_line_table():
    """The expression reads paths as ptxas writes them (NUL-terminated in .debug_line)."""
    planted = FIXTURES / "cubins" / "moe_align.sm_90.cubin"
    data = planted.read_bytes().replace(b"fixtures/kernels\x00", b"/tmp/x/kernels\x00", 1)
    assert b"/tmp/x/kernels\x00" in data
    assert MACHINE_PATH.findall(data) == [b"/tmp/x/kernels"]


def test_reports_name_the_fixture_sources_relative_to_the_repository():
    done = run_cli("inspect", "--json", FIXTURES / "synthetic" / "moe_align_out_of_range.nvcudmp")
    report = json.loads(done.stdout)
    files = {entry["file"] for fault in report["faults"] for entry in fault["sass"]["source"]}
    ours = {f for f in files if not f.startswith("/usr/local/cuda-13.0/")}
    assert ours == {"fixtures/kernels/moe_align.cu"} and (ROOT / "fixtures/kernels/moe_align.cu").is_file()
    assert files - ours == {"/usr/local/cuda-13.0/bin/../targets/x86_64-linux/include/device_atomic_functions.hpp"}
