"""The fault explained on real dumps (marker ``gpu``; skipped with a reason elsewhere).

Each planted-fault program of fixtures/kernels is built by nvcc for the GPU at hand, run with the
driver's coredump on (the parameter buffer kept), and its dump is inspected. The explanation must
give back what the program's source and main() planted: space, verdict, roots and the address
the source computes from the dump's parameter values and the faulting thread; and that address
must equal the one cuda-gdb's `info registers` give for the faulting instruction's operand, read
by tests/sass_emulator.py (not by crashlab.explain). The forward emulator, run from the same roots,
must agree with cuda-gdb on the operand's registers.
"""

from __future__ import annotations

import os
import subprocess

import pytest

import crashlab
from tests.coredump_builder import ROOT
from tests.sass_emulator import (
    BANK0_SLOTS,
    Launch,
    function_listing,
    memory_operand,
    operand_address,
    run_to,
)
from tests.test_gpu_debugger import cuda_gdb  # noqa: F401  (the fixture: skips without cuda-gdb)

pytestmark = pytest.mark.gpu
KERNELS = ROOT / "fixtures" / "kernels"
#: Everything but the parameter buffer (and the images the reader needs) is skipped, as the
#: lightweight flags of LLM servers do, less skip_constbank_memory.
FLAGS = "skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory"


def _arch() -> str:
    done = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                          capture_output=True, text=True, check=True)
    major, minor = done.stdout.split()[0].split(".")
    return f"sm_{major}{minor}"


def _dump_of(program: str, tmp_path, arch: str):
    exe = tmp_path / program
    subprocess.run(["nvcc", f"-arch={arch}", "-lineinfo", "-o", str(exe), f"{program}.cu"],
                   check=True, cwd=KERNELS)
    cubin = tmp_path / f"{program}.cubin"
    subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-lineinfo", "-o", str(cubin), f"{program}.cu"],
                   check=True, cwd=KERNELS)
    env = {**os.environ, "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "1", "CUDA_COREDUMP_SHOW_PROGRESS": "1",
           "CUDA_COREDUMP_FILE": str(tmp_path / "core.%p.nvcudmp"),
           "CUDA_COREDUMP_GENERATION_FLAGS": FLAGS}
    done = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=600)
    dumps = sorted(tmp_path.glob("core.*.nvcudmp"))
    if not dumps and "no error" in done.stdout:
        pytest.skip(f"gpu test: {program} does not fault on {arch} (the planted address is valid there)")
    if not dumps and "address space" in done.stdout:
        pytest.skip(f"gpu test: {program}'s stores fall in no address space on {arch}, and the driver "
                    "wrote a dump of that in 2 of 17 runs on an H200, driver 580.159.04)")
    assert dumps, f"{program} wrote no coredump: {done.stdout} {done.stderr}"
    return dumps[0], cubin


def _param(fault, ordinal: int) -> int:
    return next(p.value for p in fault.params.values if p.ordinal == ordinal)


def _shared_verdict(report) -> str:
    """Past the block's shared memory where the warp row records its size (drivers r570+);
    before that a dump cannot rule out dynamic shared memory past a static array."""
    major = int((report.dump.driver_version or "0").split(".")[0])
    return "out-of-bounds" if major >= 570 else "undetermined"


def _truth(program: str, report, arch: str, registers: dict[str, int]):
    """(space, verdict kinds, address, roots as (kind, ordinal or name)) from the .cu source and
    its main(), for the thread the dump blames."""
    fault = report.faults[0]
    tid, block = fault.thread_idx[0], fault.block_idx[0]
    shared_base = 0 if arch == "sm_80" else 0x400
    p0 = _param(fault, 0)
    if program == "illegal_address":
        idx = block * fault.block_dim[0] + tid
        return "global", {"undetermined"}, p0 + idx * (4 << 20), {
            ("param", 0), ("special", "blockIdx.x"), ("special", "blockDim.x"), ("special", "threadIdx.x")}
    if program == "local_overflow":  # every pick 0x40404040 (cudaMemset 0x40); R1 the frame
        return "local", {"out-of-bounds"}, (registers["R1"] + 4 * 0x40404040) & 0xFFFF_FFFF, {
            ("load", 0)}
    if program == "dynamic_shared":  # tile[] is 64 ints: only thread 0's store is in bounds, and
        # a warp-wide exception may blame it (the H200 does: lane 0 of the faulting warp)
        offset = tid * _param(fault, 1) * 4
        verdict = "inside" if offset < 64 * 4 else _shared_verdict(report)
        return "shared", {verdict}, shared_base + offset, {("param", 1), ("special", "threadIdx.x")}
    if program in ("null_argument", "misaligned_argument"):
        verdict = "null" if program == "null_argument" else "misaligned"
        return "global", {verdict}, p0 + 4 * tid, {("param", 0), ("special", "threadIdx.x")}
    # moe_align: ids k for the 384 valid tokens (logits 0), -1 (0xff bytes) from element 768 on:
    # 4 bytes before counts[] (sm_90+: inside the 1 KiB reserve; whether the hardware faults
    # there is what this test finds out)
    return "shared", {_shared_verdict(report)}, (shared_base - 4) & 0xFFFF_FFFF, {("load", 0)}


def _operand_address(text: str, registers: dict[str, int]) -> int:
    """The faulting operand's address from cuda-gdb's register values, read by the emulator."""
    from crashlab.sass.listing import parse_listing

    ins = parse_listing(f"        /*0000*/                   {text} ;")[0]
    general = {int(k[1:]): v for k, v in registers.items() if k[:1] == "R" and k[1:].isdigit()}
    uniform = {int(k[2:]): v for k, v in registers.items() if k[:2] == "UR" and k[2:].isdigit()}
    return operand_address(memory_operand(ins), general, uniform)


@pytest.mark.usefixtures("cuda_gdb")
@pytest.mark.parametrize("program", ["illegal_address", "local_overflow", "dynamic_shared",
                                     "null_argument", "misaligned_argument", "moe_align"])
def test_real_dump_explains_the_planted_fault(tmp_path, program):
    arch = _arch()
    if arch not in BANK0_SLOTS:
        pytest.skip(f"gpu test: the planted kernels' bank-0 slots are known for "
                    f"{', '.join(BANK0_SLOTS)}, not {arch}")
    dump, cubin = _dump_of(program, tmp_path, arch)
    report = crashlab.inspect(dump, debugger=True, debugger_timeout=120)
    fault = report.faults[0]
    view = report.debugger.faults[0]
    assert fault.params is not None and fault.params.values, "the dump kept no parameter buffer"
    registers = view.registers
    space, verdicts, address, roots = _truth(program, report, arch, registers)
    explanation = fault.explanation
    assert explanation is not None
    assert explanation.trust == "consistent", explanation.stops
    assert explanation.space == space
    assert explanation.verdict.kind in verdicts, explanation.verdict.basis
    assert int(explanation.address, 16) == address
    said = {(r.kind, r.param_ordinal if r.kind in ("param", "load") else r.name) for r in explanation.roots}
    for kind, which in roots:
        if kind == "special":
            assert any(k == "special" and which in (name or "") for k, name in said), (which, said)
        else:
            assert (kind, which) in said or any(r.kind == kind and f"param {which}" in
                                                f"{r.name} {r.detail}" for r in explanation.roots)
    instruction = next(i.text for i in fault.sass.instructions if i.faulting)
    assert _operand_address(instruction, registers) == address
    _forward_run_agrees(program, cubin, fault, arch, registers, instruction)


def _forward_run_agrees(program, cubin, fault, arch, registers, instruction) -> None:
    """The emulator, from the dump's roots, computes the operand registers cuda-gdb shows."""
    from crashlab.cubin import Cubin
    from crashlab.cubin.nvinfo import kernel_param_layout

    kernel = fault.kernel.mangled
    layout, _why = kernel_param_layout(Cubin(cubin.read_bytes()), kernel)
    params = bytes.fromhex(fault.params.hex)
    tid = fault.thread_idx[0]
    p0 = _param(fault, 0)
    memory = {}
    if program == "local_overflow":
        memory = {p0 + 4 * tid: 0x40404040}
    visit = 1
    if program == "moe_align":  # trips at tid, tid+256, tid+512 read ids 0/1, then -1 at tid+768
        memory = {p0 + 4 * i: (i % 2 if i < 768 else 0xFFFF_FFFF) for i in range(tid, 1024, 256)}
        visit = 4
    frame = 0x40 if program == "local_overflow" else 0
    launch = Launch(arch, params, layout.cbank_offset, fault.thread_idx, fault.block_idx,
                    fault.block_dim, fault.grid_dim, registers["R1"] + frame, 0, memory=memory)
    stopped = run_to(function_listing(str(cubin), kernel), launch, fault.function_offset, visit=visit)
    operand = memory_operand(stopped.instruction)
    assert stopped.instruction.opcode in instruction
    for name in {term.split(".")[0] for term in operand.replace("[", "+").replace("]", "+").split("+")
                 if term.startswith("R") and term[1:2].isdigit()}:
        assert stopped.registers[int(name[1:])] == registers[name], name
