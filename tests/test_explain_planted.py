"""The fault explained, against planted truth.

Every planted kernel (fixtures/kernels: a global store indexed from blockIdx, a local-array
overflow, an ``extern __shared__`` overflow, a null and a misaligned pointer argument, the MoE
shared atomic, alone and in a cluster) on sm_80, sm_90 and sm_100, in a SYNTHETIC dump
(tests/coredump_builder.py) whose faulting warp holds the registers tests/sass_emulator.py
computes by running the real nvcc-built SASS forward from chosen roots. The expected space,
address, verdict and roots come from the .cu source (tests/scenarios.py ``_source_truth``), never
from crashlab; the emulator's address must equal the source's, and NVIDIA's cuda-gdb must read
the same registers, before any explanation is compared with it. The same dumps with the address
register moved off what the code computes must give trust "mismatch".
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

import crashlab
from crashlab.sass.instruction import Instruction
from crashlab.sass.listing import parse_listing
from tests.coredump_builder import write
from tests.sass_emulator import (
    Launch,
    Unmodelled,
    address_registers,
    load_destination,
    memory_operand,
    operand_address,
    run_to,
)
from tests.scenarios import (
    EXPLAINED,
    EXPLAINED_ARCHS,
    LOCAL_SLOTS,
    MEMORY_DESCRIPTOR,
    STACK_TOP,
    UNWRITTEN,
    PlantedRoot,
    explained,
    local_frame,
)

CASES = list(EXPLAINED)


@cache
def _scenario(case: str, arch: str, contradicted: bool = False):
    return explained(case, arch, contradicted=contradicted)


@cache
def _report(case: str, arch: str, directory: str, contradicted: bool = False):
    path = Path(directory) / f"{case}.{arch}.{'contradicted' if contradicted else 'planted'}.nvcudmp"
    write(_scenario(case, arch, contradicted).spec, path)
    return crashlab.inspect(path)


@pytest.fixture(scope="module")
def dumps_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("planted"))


@pytest.mark.parametrize("case,arch", CASES)
def test_forward_run_reaches_the_address_the_source_computes(case, arch):
    truth = _scenario(case, arch).notes["truth"]
    assert truth.address == truth.source_address
    assert truth.never_written, "a lane whose every register was computed: UNWRITTEN is untested"


@pytest.mark.parametrize("arch", EXPLAINED_ARCHS)
def test_forward_run_fills_the_local_array_as_the_source_does(arch):
    """local_overflow.cu: scratch[s] = s * s + base, for s < 16, base 7 (its main())."""
    stopped = _scenario("local-overflow", arch).notes["stopped"]
    assert stopped.local_memory == {local_frame() + 4 * s: s * s + 7 for s in range(LOCAL_SLOTS)}


@pytest.mark.parametrize("case,arch", CASES)
def test_dump_holds_the_forward_run(case, arch, dumps_dir):
    """The reader sees the planted lane: kernel, PC, marker line, the emulated registers."""
    scenario = _scenario(case, arch)
    planted, truth = scenario.planted, scenario.notes["truth"]
    fault = _report(case, arch, dumps_dir).faults[0]
    assert fault.kernel.mangled == truth.kernel
    assert int(fault.pc, 16) == planted.pc
    assert fault.thread_idx == planted.thread_idx
    assert f"{planted.marker.source}:{planted.marker.line}" in {
        f"{s.file.rsplit('/', 1)[-1]}:{s.line}" for s in fault.sass.source}
    assert [fault.registers[f"R{r}"] for r in range(len(planted.registers))] == planted.registers
    for register in truth.never_written:
        assert fault.registers[f"R{register}"] == UNWRITTEN + register


@pytest.mark.parametrize("case,arch", CASES)
def test_real_cuda_gdb_reads_the_planted_lane(case, arch, dumps_dir, real_cuda_gdb):
    """NVIDIA's reader sees the forward run's registers, and the faulting operand read with them
    (by the emulator's operand reading) is the planted address."""
    scenario = _scenario(case, arch)
    planted, truth = scenario.planted, scenario.notes["truth"]
    path = Path(dumps_dir) / f"{case}.{arch}.gdb.nvcudmp"
    write(scenario.spec, path)
    report = crashlab.inspect(path, sass=False, debugger=True, debugger_program=real_cuda_gdb,
                              debugger_timeout=60)
    assert report.debugger.status == "ok", report.debugger.reason
    registers = report.debugger.faults[0].registers
    assert [registers[f"R{r}"] for r in range(len(planted.registers))] == planted.registers
    general = {r: registers[f"R{r}"] for r in range(len(planted.registers))}
    uniform = {u: registers[f"UR{u}"] for u in range(63)}
    instruction = parse_listing(f"        /*0000*/ {planted.marker.instruction} ;")[0]
    # past a load into its own address register, the registers no longer give the address
    read = operand_address(memory_operand(instruction), general, uniform)
    assert (read == truth.address) == truth.address_in_registers


def _matches(root, planted: PlantedRoot) -> bool:
    if root.kind != planted.kind:
        return False
    if root.value is not None and int(root.value, 16) != planted.value:
        return False
    if planted.kind == "param":
        return root.param_ordinal == planted.param_ordinal
    if planted.kind == "special":
        return planted.name in root.name
    if planted.element is None:  # a load from no parameter's array (a shared staging slot)
        return root.value is not None
    said = f"{root.name} {root.detail or ''}"
    # "element 320 of param 0", "element threadIdx.x = 32 of parameter 0"
    return bool(re.search(rf"\belement\b[^,;]*?(?<![\w.]){planted.element}\b", said)
                and re.search(rf"\bparam(?:eter)? {planted.param_ordinal}\b", said))


@pytest.mark.parametrize("case,arch", CASES)
def test_explanation_gives_back_the_planted_truth(case, arch, dumps_dir):
    truth = _scenario(case, arch).notes["truth"]
    explanation = _report(case, arch, dumps_dir).faults[0].explanation
    assert explanation is not None
    assert explanation.trust == "consistent", explanation.stops
    assert explanation.access == truth.access
    assert explanation.space == truth.space
    assert explanation.access_bytes == truth.access_bytes
    assert explanation.address is not None and int(explanation.address, 16) == truth.address
    assert explanation.verdict.kind == truth.verdict, explanation.verdict.basis
    for planted in truth.roots:
        assert any(_matches(root, planted) for root in explanation.roots), (planted, explanation.roots)
    # a parameter a planted load read from may show as a root too; no other parameter may
    planted_params = {r.param_ordinal for r in truth.roots}
    assert {r.param_ordinal for r in explanation.roots if r.kind == "param"} <= planted_params


@pytest.mark.parametrize("case", sorted({case for case, _arch in CASES}))
def test_registers_the_code_cannot_compute_give_mismatch(case, dumps_dir):
    """The planted dump with the faulting lanes' address register moved by 0x1000 (sm_90)."""
    contradicted = _scenario(case, "sm_90", True).planted.registers
    assert contradicted != _scenario(case, "sm_90").planted.registers
    explanation = _report(case, "sm_90", dumps_dir, True).faults[0].explanation
    assert explanation is not None
    assert explanation.trust == "mismatch"


# -- the values the slicer must get right --------------------------------------------------------
_NOT_COMPARED = re.compile(r"^(U?R\d+) at \+(0x[0-9a-f]+) is not compared with the dump: "
                           r"\S+ at \+0x[0-9a-f]+ may write it on the way to the fault")


@pytest.mark.parametrize("arch", EXPLAINED_ARCHS)
def test_the_second_of_two_int_parameters_read_as_one_pair_is_named(arch, dumps_dir):
    """param_pair.cu: gather_column(table, out, width, column) with the garbage column 1,000,000
    (its main()). sm_90 and sm_100 read width and column with one LDC.64: each word is the
    parameter at its own offset, its own root with its own value; the formula names arg3."""
    scenario = _scenario("param-pair", arch)
    planted = {r.param_ordinal: r.value for r in scenario.notes["truth"].roots if r.kind == "param"}
    assert planted[3] == 1000000
    pair = f"c[0x0][{scenario.notes['launch'].param_bank_offset + 8:#x}]"  # width, then column
    assert any(ins.opcode == "LDC.64" and ins.operands[1] == pair
               for ins in scenario.notes["listing"]) == (arch != "sm_80")
    explanation = _report("param-pair", arch, dumps_dir).faults[0].explanation
    found = {r.param_ordinal: int(r.value, 16) for r in explanation.roots if r.kind == "param"}
    assert found == planted, explanation.roots
    assert "arg3" in explanation.formula and "hi(" not in explanation.formula, explanation.formula


@pytest.mark.parametrize("arch", EXPLAINED_ARCHS)
def test_a_register_a_loop_moves_after_its_use_is_not_compared_there(arch, dumps_dir):
    """loop_store.cu: the row pointer is made from i before the loop that moves i (and the
    input pointer) 7 times for thread 32. The explanation is consistent, and each register it
    leaves uncompared for a loop or a branch is one the forward run changed between its use and
    the fault: read as if the loop had not run, it would have been a false mismatch."""
    scenario = _scenario("loop-store", arch)
    explanation = _report("loop-store", arch, dumps_dir).faults[0].explanation
    assert explanation.trust == "consistent", explanation.story
    named = [m.groups() for m in map(_NOT_COMPARED.match, explanation.stops) if m]
    assert named, explanation.stops
    listing, launch = scenario.notes["listing"], scenario.notes["launch"]
    at_fault = scenario.notes["stopped"].registers
    for register, at in named:
        at_use = run_to(listing, launch, int(at, 16)).registers
        number = int(register[1:])
        assert at_use[number] != at_fault[number], (register, at)


@pytest.mark.parametrize("arch", EXPLAINED_ARCHS)
def test_one_definition_inside_the_loops_region_is_checked(arch, dumps_dir):
    """loop_store.cu: the row pointer's one definition lies between the loop's BSSY and the
    label it names, and is used after it. Moved by 0x1000 in the dump, the pointer gives a
    mismatch that names the register, the dumped value and the forward run's."""
    scenario = _scenario("loop-store", arch)
    listing = scenario.notes["listing"]
    assert any(ins.opcode.startswith("BSSY") for ins in listing)
    planted = scenario.planted.registers
    moved = _scenario("loop-store", arch, True).planted.registers
    [register] = [r for r, (a, b) in enumerate(zip(planted, moved, strict=True)) if a != b]
    explanation = _report("loop-store", arch, dumps_dir, True).faults[0].explanation
    assert explanation.trust == "mismatch"
    fault = f"+{scenario.planted.function_offset:#x}"
    said = f"R{register} at {fault} is {moved[register]:#x} in the dump but " \
        f"{planted[register]:#x} recomputed from its roots"
    assert any(said in line for line in explanation.story), explanation.story


@pytest.mark.parametrize("arch", EXPLAINED_ARCHS)
def test_a_64_bit_shared_load_feeds_the_address_as_one_value(arch, dumps_dir):
    """shared_pair.cu: ``LDS.64`` reads back the pointer out + index[i] the thread staged; the
    load writes both words of the pair the faulting ST.E uses, and the explanation reads them as
    one value: the load's root holds the whole pointer the source computes, with no mismatch on
    its high word."""
    scenario = _scenario("shared-pair", arch)
    truth, stopped = scenario.notes["truth"], scenario.notes["stopped"]
    pointer = address_registers(stopped.instruction)
    staged = stopped.writers[pointer[0]]
    assert staged.opcode == "LDS.64" and load_destination(staged) == pointer
    explanation = _report("shared-pair", arch, dumps_dir).faults[0].explanation
    assert explanation.trust == "consistent", explanation.story
    [load] = [root for root in explanation.roots if root.kind == "load"]
    assert load.name.startswith("LDS.64") and int(load.value, 16) == truth.source_address


@pytest.mark.parametrize("arch", EXPLAINED_ARCHS)
def test_a_faulting_load_into_its_own_address_register_is_recomputed(arch, dumps_dir):
    """own_address.cu: the lanes stand past ``LDG.E R4, [R4.64]`` with R4 reading 0. R4 is not
    read as the address: the address is recomputed from the roots, data + 4 * 0x7f7f7f7f as the
    source has it, and a stop says the faulting instruction wrote R4."""
    scenario = _scenario("own-address", arch)
    truth, stopped = scenario.notes["truth"], scenario.notes["stopped"]
    [register] = load_destination(stopped.instruction)
    assert register in address_registers(stopped.instruction) and not truth.address_in_registers
    explanation = _report("own-address", arch, dumps_dir).faults[0].explanation
    assert explanation.trust == "consistent", explanation.story
    assert explanation.address_provenance == "recomputed"
    assert int(explanation.address, 16) == truth.source_address
    assert any(stop.startswith(f"R{register} was overwritten by the faulting instruction")
               for stop in explanation.stops), explanation.stops


# -- the emulator refuses what it does not model -------------------------------------------------
def _launch(**memory) -> Launch:
    return Launch("sm_90", bytes(16), 0x210, (3, 0, 0), (0, 0, 0), (32, 1, 1), (1, 1, 1),
                  STACK_TOP, MEMORY_DESCRIPTOR, memory={int(k[1:], 16): v for k, v in memory.items()})


def _listing(*texts: str) -> tuple[Instruction, ...]:
    """An ``nvdisasm -c`` text of these instructions; ``.L_x_n:`` items are labels."""
    lines, at = [], 0
    for text in texts:
        if text.startswith(".L_x_"):
            lines.append(text)
        else:
            lines.append(f"        /*{at:04x}*/                   {text} ;")
            at += 16
    return tuple(parse_listing("\n".join(lines)))


def test_emulator_runs_a_loop_to_the_requested_visit():
    listing = _listing("S2R R0, SR_TID.X", "IMAD.MOV.U32 R2, RZ, RZ, RZ", ".L_x_0:",
                       "IADD3 R2, R2, 0x1, RZ", "ISETP.GE.AND P0, PT, R2, 0x5, PT",
                       "@!P0 BRA `(.L_x_0)", "STS [R0.X4+0x10], R2")
    stopped = run_to(listing, _launch(), 0x20, visit=3)
    assert stopped.registers[2] == 2 and stopped.predicates[0] is False
    done = run_to(listing, _launch(), 0x50)
    assert done.registers[2] == 5 and done.address == 3 * 4 + 0x10
    assert done.never_written(4) == [1, 3]


@pytest.mark.parametrize("texts,why", [
    (("FMUL R0, R1, R2", "STG.E [R0.64], R1"), "opcode FMUL"),
    (("LDG.E R0, [R2.64]", "STG.E [R0.64], R1"), "read before any write"),
    (("MOV R2, 0x40", "MOV R3, RZ", "LDG.E R0, [R2.64]", "STG.E [R0.64], R1"), "not in the chosen memory"),
    (("LDC R0, c[0x0][0x300]", "STG.E [R0.64], R1"), "not a launch slot"),
    (("EXIT", "STG.E [R0.64], R1"), "exited"),
    (("@P1 MOV R0, RZ", "STG.E [R0.64], R1"), "P1 read before any write"),
])
def test_emulator_raises_rather_than_guess(texts, why):
    with pytest.raises(Unmodelled, match=why):
        run_to(_listing(*texts), _launch(), 16 * (len(texts) - 1))


def test_emulator_is_bounded():
    listing = _listing(".L_x_0:", "NOP", "BRA `(.L_x_0)", "STG.E [R0.64], R1")
    with pytest.raises(Unmodelled, match="within 50 steps"):
        run_to(listing, _launch(), 0x20, max_steps=50)


def test_emulator_reads_loads_from_the_chosen_memory():
    listing = _listing("MOV R2, 0x40", "MOV R3, RZ", "LDG.E R4, desc[UR4][R2.64]",
                       "LEA R5, R4, 0x400, 0x2", "ATOMS.POPC.INC.32 RZ, [R5+URZ]")
    stopped = run_to(listing, _launch(x40=1999), 0x40)
    assert stopped.registers[4] == 1999 and stopped.address == 0x400 + 1999 * 4
