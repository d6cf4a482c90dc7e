"""crashlab's readers of cuda-gdb output on REAL cuda-gdb 12.4 transcripts of our own dumps.

The transcripts (fixtures/transcripts/, see PROVENANCE.md there) were recorded from NVIDIA's
cuda-gdb 12.4.127 reading each dump beside them; every value a reader takes from them is checked
against what crashlab reads natively from that same dump, never against a constant. The
stand-in debugger's answers to the same commands must read the same way (its shapes are checked
here against the real ones).
"""

from __future__ import annotations

import os
import re

import pytest

import crashlab
from crashlab.coredump.core import CoreDump
from crashlab.gdb import mi, parse
from crashlab.gdb.agreement import same_instruction
from tests import standin_cuda_gdb
from tests.conftest import ROOT

TRANSCRIPTS = ROOT / "fixtures" / "transcripts"
DUMPS = {
    "moe_align": ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp",
    "illegal_address": TRANSCRIPTS / "illegal_address.nvcudmp",
    "misaligned": TRANSCRIPTS / "misaligned.nvcudmp",
    "moe_align_line_table_relocated": TRANSCRIPTS / "moe_align_line_table_relocated.nvcudmp",
    "moe_align_inline_frame": TRANSCRIPTS / "moe_align_inline_frame.nvcudmp",
}
#: Dumps whose cubin line tables are relocated: cuda-gdb names source lines on them.
WITH_LINES = ["moe_align_line_table_relocated", "moe_align_inline_frame"]
_NATIVE: dict[str, crashlab.TriageReport] = {}


def native(name: str):
    """crashlab's own report of the dump a transcript came from (read once per test session)."""
    if name not in _NATIVE:
        _NATIVE[name] = crashlab.inspect(DUMPS[name])
    return _NATIVE[name]


def session(name: str) -> list[tuple[str, str]]:
    """(command, output) of NAME.session.txt, in order (a command may come more than once)."""
    text = (TRANSCRIPTS / f"{name}.session.txt").read_text()
    parts = re.split(r"^\(cuda-gdb\) (.*)\n", text, flags=re.M)[1:]
    return list(zip(parts[0::2], parts[1::2], strict=True))


def output(name: str, command: str) -> str:
    return next(out for cmd, out in session(name) if cmd == command or cmd.startswith(command))


def batch(name: str) -> dict[str, str]:
    text = (TRANSCRIPTS / f"{name}.batch.txt").read_text()
    parts = re.split(r"^### (.*)\n", text, flags=re.M)[1:]
    return dict(zip(parts[0::2], parts[1::2], strict=True))


#: cuda-gdb's marker of an instruction that is (faulting, current).
MARKERS = {(True, True): "*=>", (True, False): "*>", (False, True): "=>", (False, False): ""}


def basename_chain(lines) -> list[tuple[str, int]]:
    return [(os.path.basename(line.file), line.line) for line in lines]


ALL = list(DUMPS)


@pytest.mark.parametrize("name", ALL)
def test_load_messages(name):
    fault = native(name).faults[0]
    for text in (output(name, "target cudacore"), batch(name)[next(k for k in batch(name) if k.startswith("target"))]):
        load, problems = parse.load(text)
        assert problems == []
        assert load.exception == fault.exception.display
        assert int(load.triggered_pc, 16) == int(fault.pc, 16)
        focus = load.focus
        assert (focus.device, focus.sm, focus.warp, focus.lane) == (fault.device, fault.sm, fault.warp, fault.lane)
        assert (focus.block_idx, focus.thread_idx, focus.grid) == (fault.block_idx, fault.thread_idx, fault.grid_id)
        # GDB leaves out frame #0's PC when it starts a line (the lane stands at the errorPC)
        assert load.frame.pc is None if name == "moe_align_inline_frame" else (
            int(load.frame.pc, 16) == int(fault.current_pc, 16))
        assert load.frame.launch == f"<<<({','.join(map(str, fault.grid_dim))}),({','.join(map(str, fault.block_dim))})>>>"
        assert load.warnings == ["warning: CUDA ELF Image contains unknown ABI version: 8"]


@pytest.mark.parametrize("name", WITH_LINES)
def test_load_with_a_relocated_line_table_names_the_inline_chain(name):
    load, _ = parse.load(output(name, "target cudacore"))
    fault = native(name).faults[0]
    chain = basename_chain(fault.sass.source)
    file, line = load.triggered_source.split(" ", 1)[0].split(":")
    assert (file, int(line)) == chain[0]
    assert load.triggered_source.endswith(f"inlined from {chain[1][0]}:{chain[1][1]}")
    current = basename_chain(next(ins for ins in fault.sass.instructions if ins.current).source)
    assert (os.path.basename(load.frame.file), load.frame.line) == current[0]
    if len(current) > 1:  # frame #0 is inside the inlined atomicAdd: cuda-gdb's inline tail
        assert load.frame.inlined.endswith(f"inlined from {current[1][0]}:{current[1][1]}")


@pytest.mark.parametrize("name", ALL)
def test_mi_records_as_crashlab_asks_them(name):
    report = native(name)
    fault = report.faults[0]
    kernels = mi.kernels(mi.result(output(name, 'interpreter-exec mi "-cuda-info-kernels"')).payload)
    assert [(k.device, k.grid, k.grid_dim, k.block_dim) for k in kernels] == [
        (k.device, k.grid_id, k.grid_dim, k.block_dim) for k in report.kernels]
    assert [k.name for k in kernels] == [k.name.split("(")[0] for k in report.kernels]
    # -cuda-focus-query: 12.4 answers a sentence without a name, its newline printed raw
    query = mi.result(output(name, 'interpreter-exec mi "-cuda-focus-query'))
    focus = parse.coordinates(query.payload["text"])
    assert (focus.device, focus.sm, focus.warp, focus.lane, focus.block_idx, focus.thread_idx) == (
        fault.device, fault.sm, fault.warp, fault.lane, fault.block_idx, fault.thread_idx)
    # a switch to the lane already in focus is a success
    switch = mi.result(output(name, 'interpreter-exec mi "-cuda-focus-switch'))
    assert switch.ok and switch.payload == {"text": "CUDA focus unchanged.\n"}
    lanes = mi.result(output(name, 'interpreter-exec mi "-cuda-info-lanes"')).payload
    assert mi.current_lane_exception(lanes) == fault.exception.display
    marked = [int(row["lane"]) for row in mi.table_rows(lanes, "InfoCudaLanesTable") if row["exception"] != "None"]
    assert len(marked) == fault.faulting_lanes
    errorpc = mi.value(mi.result(output(name, 'interpreter-exec mi "-data-evaluate-expression')).payload)
    assert errorpc == int(fault.pc, 16)


@pytest.mark.parametrize("name", ALL)
def test_mi_interpreter_session(name):
    """cuda-gdb -i=mi: the same records in pure MI, a real switch, a refused one."""
    fault = native(name).faults[0]
    chunks = re.split(r"^\(gdb\) $", (TRANSCRIPTS / f"{name}.mi.txt").read_text(), flags=re.M)
    results = [mi.result(chunk) for chunk in chunks]
    focus_text = next(r for r in results if r and "kernel " in str(r.payload.get("text", "")))
    assert parse.coordinates(focus_text.payload["text"]).lane == fault.lane
    unchanged, switched, back, refused = [r for r in results if r is not None and (
        r.payload.get("text") == "CUDA focus unchanged.\n" or "CudaFocus" in r.payload or not r.ok)]
    assert unchanged.ok and back.ok and not refused.ok
    moved = mi.focus(switched.payload)
    assert (moved.lane, moved.thread_idx) == (fault.lane + 1, (fault.thread_idx[0] + 1, *fault.thread_idx[1:]))
    assert mi.focus(back.payload).thread_idx == fault.thread_idx
    assert refused.error == "Invalid coordinates requested. CUDA focus unchanged."


@pytest.mark.parametrize("name", ALL)
def test_cli_readers_on_the_batch_listing(name):
    report = native(name)
    fault = report.faults[0]
    listing = batch(name)
    kernels = parse.kernels_table(listing["info cuda kernels"])
    assert [(k.grid, k.grid_dim, k.block_dim, k.current) for k in kernels] == [
        (k.grid_id, k.grid_dim, k.block_dim, True) for k in report.kernels]
    assert parse.current_lane_exception(listing["info cuda lanes"]) == fault.exception.display
    [frame] = parse.backtrace(listing["bt"])
    registers = parse.registers(listing["info registers"])
    assert int(frame.pc or hex(registers["pc"]), 16) == int(fault.current_pc, 16)
    assert frame.function == kernels[0].name
    entry = int(fault.pc, 16) - fault.function_offset
    fixed = parse.disassembly(listing["x/17i $errorpc-0x80"])
    if int(fault.pc, 16) - 0x80 < entry:
        # a fixed window that starts before the function: cuda-gdb 12.4 decodes nothing there
        # and steps byte by byte, which is why crashlab asks for the native window instead
        assert [i.text for i in fixed[:4]] == [""] * 4
        assert [int(i.address, 16) for i in fixed[:2]] == [int(fault.pc, 16) - 0x80 + k for k in (0, 1)]
    else:
        assert len(fixed) == 17 and [i for i in fixed if i.marker.startswith("*")][0].address == fault.pc
    window = parse.disassembly(output(name, "x/"))
    assert fault.sass.instructions, fault.sass.unavailable_reason
    assert [i.address for i in window] == [i.address for i in fault.sass.instructions]
    for ins, theirs in zip(fault.sass.instructions, window, strict=True):
        assert same_instruction(ins.text, theirs.text), (ins, theirs)
        assert theirs.marker == MARKERS[(ins.faulting, ins.current)]
    assert {name: registers[name] for name in fault.registers} == fault.registers
    assert {name: registers[name] for name in fault.uniform_registers} == fault.uniform_registers
    assert {name: bool(registers[name]) for name in fault.uniform_predicates} == fault.uniform_predicates
    assert registers["pc"] == int(fault.current_pc, 16) and registers["R255"] is None
    system = parse.registers(listing["info registers system"])
    assert system["errorpc"] == int(fault.pc, 16)
    assert [system[f"P{i}"] for i in range(8)] == [None] * 8  # cuda-gdb 12.4 reads no predicate
    chain = parse.line_info(listing["info line *$errorpc"])
    if name in WITH_LINES:
        assert [(os.path.basename(f), line) for f, line in chain] == basename_chain(fault.sass.source)
    else:
        assert chain == [] and "No line number information available" in listing["info line *$errorpc"]


def test_transcripts_carry_no_path_of_the_recording_machine():
    for path in TRANSCRIPTS.glob("*.txt"):
        assert not re.search(r"/work/|/tmp/|/home/|/root/", path.read_text()), path.name


# -- the stand-in against the real thing -----------------------------------------------------
def standin_values(name: str) -> dict:
    """The stand-in's scenario for the dump behind a transcript, from crashlab's native report."""
    report = native(name)
    fault = report.faults[0]
    kernel = report.kernels[0]
    pc, current = int(fault.pc, 16), int(fault.current_pc, 16)
    return {
        "device": fault.device, "sm": fault.sm, "warp": fault.warp, "lane": fault.lane,
        "grid": fault.grid_id, "block": list(fault.block_idx), "thread": list(fault.thread_idx),
        "exception": fault.exception.display, "pc": pc, "entry": pc - fault.function_offset,
        "current_pc": current, "mangled": fault.kernel.mangled, "short": fault.kernel.name.split("(")[0],
        "name": fault.kernel.name, "grid_dim": list(kernel.grid_dim), "block_dim": list(kernel.block_dim),
        "file": "f.cu", "line": 1, "frame_source": False, "no_line_info": True, "status": _grid_status_word(name, fault.grid_id),
        "registers": list(fault.registers.values()),
        "uniform_registers": list(fault.uniform_registers.values()),
        "uniform_predicates": [int(v) for v in fault.uniform_predicates.values()],
    }


def _grid_status_word(name: str, grid_id: int) -> str:
    """The word cuda-gdb shows for a grid's status (CUDBG_GRID_STATUS_ACTIVE 2, SLEEPING 3), from the dump."""
    with CoreDump(DUMPS[name]) as core:
        grid = next(g for d in core.devices for g in core.grids(d) if g.grid_id == grid_id)
    return {2: "Active", 3: "Sleeping"}[grid.grid_status]


def _reading(command: str, text: str):
    """What crashlab's flow takes from one command's output (triage._read_fault_line's readers)."""
    if command.startswith("interpreter-exec mi"):
        record = mi.result(text)
        payload = record.payload
        return (record.ok, mi.focus(payload) or parse.coordinates(str(payload.get("text", ""))),
                [(k.name, k.grid, k.grid_dim, k.block_dim, k.status) for k in mi.kernels(payload)],
                mi.current_lane_exception(payload), mi.value(payload), sorted(payload))
    if command.startswith("target cudacore"):
        load, problems = parse.load(text)
        return load.model_copy(update={"triggered_source": None}), problems
    if command == "bt":
        return parse.backtrace(text)
    if command.startswith("x/"):
        return [(i.address, i.function, i.offset, i.marker) for i in parse.disassembly(text)]
    if command.startswith("info line"):
        return parse.line_info(text)
    if command.startswith("info registers"):
        return parse.registers(text)
    return None


@pytest.mark.parametrize("name", ["moe_align", "illegal_address"])
def test_standin_answers_read_like_real_cuda_gdb(name):
    """Every command of the real session, answered by the stand-in for the same dump: crashlab
    reads the same values from both (instruction texts aside: the stand-in has no disassembler).
    The one known difference: the stand-in names the trigger PC's source line."""
    values = standin_values(name)
    compared = 0
    for command, real in session(name):
        if command == "show version":
            assert standin_cuda_gdb.answer(values, command).splitlines()[0] == real.splitlines()[0]
            continue
        ours = standin_cuda_gdb.answer(values, command.replace("$ROOT/", str(ROOT) + "/"))
        if "-cuda-info-lanes" in command:  # the stand-in knows the one lane in focus
            assert _reading(command, ours)[3] == _reading(command, real)[3]
        else:
            assert _reading(command, ours) == _reading(command, real), command
        compared += 1
    assert compared >= 10
