"""CUDA coredumps cut short (the driver killed while writing, a full disk).

The section header table is written last. A dump cut before or inside it has lost what says where
each table lies and which row each belongs to; a scan by row shapes cannot tell one SM's warp table
from another's, so no fault is claimed: one line says where the writing stopped, that nothing is
read, and (cut before the table, as the H200's driver cut four real dumps) the flag that gave a
whole dump, as a suggestion, exit 2. A cut after
the table but inside the sections a leaf section needs is the reader's existing warning
(test_bad_input.py); cuda-gdb refuses such files too (recorded below against the real one).
"""

from __future__ import annotations

import resource
import struct
import subprocess
import tracemalloc

import pytest

import crashlab
from crashlab.errors import CoreFormatError
from tests import scenarios
from tests.conftest import ROOT, run_cli
from tests.coredump_builder import write

SYNTHETIC = ROOT / "fixtures" / "synthetic"
#: What the refusal says of the file, and the next step where the table never began.
NOTHING = "nothing readable"
NEXT_STEP = ("if the driver stopped writing it there, adding skip_constbank_memory to "
             "CUDA_COREDUMP_GENERATION_FLAGS may let the next dump finish")


def header_table(data: bytes) -> tuple[int, int]:
    """(e_shoff, e_shnum) of an ELF64 file."""
    return struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<H", data, 0x3C)[0]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("cut-sources")
    built = {name: write(make().spec, folder / f"{name}.nvcudmp").path.read_bytes()
             for name, make in (("fault", scenarios.fault), ("hang", scenarios.hang),
                                ("every-section-type", scenarios.every_section_type))}
    built.update({path.stem: path.read_bytes() for path in SYNTHETIC.glob("*.nvcudmp")})
    return built


def cut_points(data: bytes) -> list[int]:
    start, count = header_table(data)
    return sorted({64, start // 3, start // 2, start - 1, start, start + 63, start + 64,
                   start + 64 * (count // 2), start + 64 * count - 1})


def test_every_cut_before_or_inside_the_table_says_what_is_missing(tmp_path, dumps):
    warm = tmp_path / "warm.nvcudmp"  # the first refusal imports modules: not the file's cost
    warm.write_bytes(dumps["fault"][:64])
    with pytest.raises(CoreFormatError):
        crashlab.inspect(warm, sass=False)
    for name, data in dumps.items():
        start, count = header_table(data)
        assert start + 64 * count == len(data), name  # the table is written last
        path = tmp_path / f"{name}.nvcudmp"
        for cut in cut_points(data):
            path.write_bytes(data[:cut])
            tracemalloc.start()
            try:
                with pytest.raises(CoreFormatError) as refused:
                    crashlab.inspect(path, sass=False)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            message = str(refused.value)
            assert "\n" not in message and message.startswith(f"{path}: it ends at byte {cut:,}, "), message
            if cut < start + 64:
                assert message.endswith(f"before its section table (at byte {start:,}): {NOTHING}; "
                                        f"{NEXT_STEP}"), message
            else:
                whole = (cut - start) // 64
                assert message.endswith(f"inside its section table ({whole:,} of {count:,} entries): "
                                        f"{NOTHING}"), message
            assert peak < 4 << 20, f"{peak:,} bytes for a {cut:,}-byte cut"


def test_the_cli_says_one_line_and_exits_2(tmp_path, dumps):
    data = dumps["fault"]
    start, count = header_table(data)
    for cut in (start, start + 64 * (count // 2)):
        path = tmp_path / f"cut-{cut}.nvcudmp"
        path.write_bytes(data[:cut])
        done = run_cli("inspect", path)
        lines = done.stderr.decode().splitlines()
        assert done.returncode == 2 and not done.stdout and len(lines) == 1, done.stderr
        assert lines[0].startswith(f"crashlab: {path}: it ends at byte {cut:,}, ") and NOTHING in lines[0]


def _no_core_file():
    """cuda-gdb aborts on some cut files and would leave a core file of its own."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@pytest.mark.parametrize("where,says", [
    ("inside", "Failed to read core file: elfGetString() failed: Section offset out of ELF image"),
    ("before", "internal-error: initialize: Assertion `m_instance.m_num_devices > 0' failed"),
])
def test_real_cuda_gdb_cannot_open_a_cut_file(tmp_path, dumps, real_cuda_gdb, where, says):
    """What NVIDIA's cuda-gdb says of the same cuts: it fails to read the core (cut inside the
    table), or aborts with an internal error (cut before it)."""
    data = dumps["fault"]
    start, count = header_table(data)
    path = tmp_path / "cut.nvcudmp"
    path.write_bytes(data[:start + 64 * (count // 2) if where == "inside" else start])
    done = subprocess.run([real_cuda_gdb, "-nx", "-batch", "-ex", f"target cudacore {path}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          preexec_fn=_no_core_file)
    assert says in done.stdout + done.stderr
    assert not (tmp_path / "core").exists()
