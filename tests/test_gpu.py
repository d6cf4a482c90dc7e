"""The real thing, on a GPU (marker ``gpu``; skipped with a reason elsewhere).

A planted-fault program from fixtures/kernels is built by nvcc, run with the driver's coredump
switched on, and the dump the driver writes is read by crashlab: the report must name the
kernel, the exception class and the marked source line.
"""

from __future__ import annotations

import os
import subprocess

import pytest

import crashlab
from tests.coredump_builder import ROOT, markers

pytestmark = pytest.mark.gpu
KERNELS = ROOT / "fixtures" / "kernels"


def _run_with_coredump(program: str, tmp_path, *args) -> list:
    exe = tmp_path / program
    subprocess.run(["nvcc", "-arch=sm_90", "-lineinfo", "-o", str(exe), str(KERNELS / f"{program}.cu")],
                   check=True, cwd=KERNELS)
    env = {
        **os.environ,
        "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "1",
        "CUDA_COREDUMP_SHOW_PROGRESS": "1",
        "CUDA_COREDUMP_FILE": str(tmp_path / "core.%h.%p.%t.nvcudmp"),
        "CUDA_COREDUMP_GENERATION_FLAGS": "skip_nonrelocated_elf_images,skip_global_memory,"
                                          "skip_shared_memory,skip_local_memory,skip_constbank_memory",
    }
    done = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=600)
    assert "coredump" in done.stderr, (done.returncode, done.stdout, done.stderr)
    return sorted(tmp_path.glob("core.*.nvcudmp"))


ILLEGAL = {"CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS", "CUDBG_EXCEPTION_LANE_ILLEGAL_ADDRESS"}
#: A store about 4 GiB past an allocation: an H200 (driver 580.159.04) reports it as an invalid
#: address space, not an illegal address (fixtures/gpu/h200/device_function.explain).
WILD = ILLEGAL | {"CUDBG_EXCEPTION_WARP_INVALID_ADDRESS_SPACE"}
MISALIGNED = {"CUDBG_EXCEPTION_WARP_MISALIGNED_ADDRESS", "CUDBG_EXCEPTION_LANE_MISALIGNED_ADDRESS"}


@pytest.mark.parametrize("program,tag,kernel,exception_names", [
    ("null_argument", "null-argument", "_Z10scale_rowsPKfPfi", ILLEGAL),
    ("device_function", "device-function", "_Z12scatter_rowsPfPKii", WILD),
    ("misaligned", "misaligned", "_Z16store_misalignedPci", MISALIGNED),
])
def test_real_dump_names_the_planted_fault(tmp_path, program, tag, kernel, exception_names):
    dumps = _run_with_coredump(program, tmp_path)
    assert dumps, "the driver wrote no coredump"
    marker = markers()[f"{program}.sm_90.cubin:{tag}"]
    report = crashlab.inspect(dumps[0])
    assert report.status == "fault"
    fault = report.faults[0]
    assert fault.exception.name in exception_names
    assert fault.kernel is not None and fault.kernel.mangled == kernel
    assert fault.block_idx is not None and fault.thread_idx is not None
    lines = [f"{s.file.rsplit('/', 1)[-1]}:{s.line}" for s in fault.sass.source]
    assert f"{marker.source}:{marker.line}" in lines
