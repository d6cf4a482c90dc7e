"""Suspect arguments on the coredumps an H200's driver wrote (fixtures/gpu/PROVENANCE.md), held
to the truth of each program's source: an argument the program allocated (cudaMalloc) and
passed is a valid pointer and never a suspect; the ones its source plants (a null, a pointer
offset by 2 bytes) stay suspects. The dumps were written with skip_global_memory: their global
memory sections are the constant banks' copies, which say nothing of where allocations lie,
while a dump that holds the process's memory still flags a pointer outside it
(tests/test_suspects.py, on the builder's dumps).
"""

from __future__ import annotations

import json
import re

import pytest

import crashlab
from crashlab.coredump.core import CoreDump
from crashlab.report.suspects import pointee
from tests.conftest import ROOT, run_cli
from tests.test_real_dumps import H200, WHOLE, _name

SOURCES = [*(ROOT / "fixtures" / "kernels").glob("*.cu"), *(ROOT / "fixtures" / "gpu").glob("*.cu")]
#: The launch arguments the sources plant as bad pointers, and what each is called.
PLANTED = {"nullptr": "null pointer",  # null_argument.cu
           "reinterpret_cast<int *>(bytes + 2)": "misaligned for int (4-byte elements)"}  # misaligned_argument.cu
_SIGNATURE = r"__global__\s+void\s+(?:__cluster_dims__\([^)]*\)\s+)?{}\s*\(([^)]*)\)"


def _top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, each part stripped."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [*parts, current.strip()] if current.strip() else parts


def _source_truth(case: str, kernel: str) -> dict[int, str | None] | None:
    """Per pointer parameter of ``kernel`` (by ordinal), as the case's .cu source launches it:
    None for a buffer its main allocated, else the reason PLANTED gives; None where the case
    has no .cu source (Triton's and PyTorch's kernels)."""
    program = case.split(".")[0].removesuffix("_G")  # device_function_G: the -G build
    own = [s for s in SOURCES if s.stem == program]
    if not own:
        return None
    main = own[0].read_text()
    [declared] = {m.group(1) for s in SOURCES for m in re.finditer(_SIGNATURE.format(kernel), s.read_text())}
    [launched] = re.findall(rf"\b{kernel}\s*<<<.*?>>>\s*\((.*?)\);", main)
    allocated = set(re.findall(r"cudaMalloc\(&(\w+),", main))
    arguments = _top_level(launched)
    return {ordinal: None if arguments[ordinal] in allocated else PLANTED[arguments[ordinal]]
            for ordinal, parameter in enumerate(_top_level(declared)) if "*" in parameter}


@pytest.mark.parametrize("dump", WHOLE, ids=_name)
def test_only_the_pointers_the_source_plants_are_suspects(dump):
    report = crashlab.inspect(dump, sass=False)
    for fault in report.faults:
        if fault.params is None:
            continue
        kernel = fault.kernel.name.split("(")[0]
        truth = _source_truth(_name(dump), kernel)
        typed = {p.ordinal: p for p in fault.params.values if pointee(p.type)}
        suspects = {p.ordinal: p.suspect for p in fault.params.values if p.suspect}
        if truth is None:  # a wheel's or Triton's kernel: no typed pointer to judge
            assert not typed and not suspects, (typed, suspects)
            continue
        assert set(typed) == set(truth), (kernel, typed, truth)  # every pointer was judged
        assert set(suspects) == {o for o, reason in truth.items() if reason}, suspects
        for ordinal, reason in truth.items():
            if reason:
                assert suspects[ordinal].startswith(reason), suspects[ordinal]


def test_the_truth_counts_the_fourteen_valid_pointers_of_the_issue():
    """The skip_global_memory dumps that fault pass 14 pointers their program allocated
    (an earlier crashlab counted them as suspects), read from the sources: the truth above misses none."""
    valid = 0
    for dump in WHOLE:
        report = crashlab.inspect(dump, sass=False)
        if "skip_constbank_memory" in report.dump.generation_flags or not report.faults:
            continue
        truth = _source_truth(_name(dump), report.faults[0].kernel.name.split("(")[0]) or {}
        valid += sum(reason is None for reason in truth.values())
    assert valid == 14


def test_the_global_memory_of_a_skip_global_memory_dump_is_its_constant_banks():
    """What a driver writes under skip_global_memory: one global memory section per constant
    bank's copy (as many sections and bytes as flags.json measured for that flag alone), and the
    flag in the dump's metadata; none of it is the process's memory."""
    measured = {entry["flags"]: entry["sections"] for entry in
                json.loads((ROOT / "fixtures/gpu/h200-runs/flags.json").read_text())}
    [dump] = (H200 / "null_argument.explain").glob("core.*.nvcudmp")
    with CoreDump(dump) as core:
        regions = core.memory_regions()
        copies = {(r.address, r.size) for r in regions if r.kind == "GLOBAL_MEM"}
        banks = {(b.address, b.size) for d in core.devices for g in core.grids(d) for b in core.const_banks(g)}
        assert copies and copies == banks  # banks 0 and 5 share one copy
        assert [len(copies), sum(size for _, size in copies)] == measured["skip_global_memory"]["0x80000002"]
        assert "skip_global_memory" in crashlab.inspect(dump, sass=False).dump.generation_flags
        assert core.process_memory() == []


def test_every_view_keeps_the_real_suspect_and_no_other(tmp_path):
    """null_argument: #0 is the planted null, #1 the buffer main allocated. The terminal view,
    the Markdown, the crash index's show and the issue body name #0 only."""
    [dump] = (H200 / "null_argument.explain").glob("core.*.nvcudmp")
    index = tmp_path / "index.sqlite"
    assert run_cli("inspect", dump, "--record", "--db", index).returncode == 0
    made = run_cli("report", dump, "--out", tmp_path / "issue")
    assert made.returncode == 0, made.stderr
    views = {"terminal": run_cli("inspect", dump).stdout.decode(),
             "markdown": run_cli("inspect", dump, "--markdown").stdout.decode(),
             "show": run_cli("show", "1", "--db", index).stdout.decode(),
             "issue body": made.stdout.decode()}
    for view, text in views.items():
        said = [line for line in text.splitlines() if re.search(r"\bsuspect\b", line, re.I)]
        assert said, view
        assert all("#0 float const* = 0x0" in line and "null pointer" in line for line in said), said
