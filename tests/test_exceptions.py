"""The exception table: CUDBG codes, names, cuda-gdb's texts and its own numbering.

Two judges: real cuda-gdb (12.4 here), run on a builder dump per code, for every code it knows;
and the written sources transcribed in fixtures/exception_texts (see its PROVENANCE.md) for the
codes newer than that cuda-gdb.
"""

import csv
import re
import subprocess
from pathlib import Path

import pytest

import crashlab
from crashlab.coredump import exceptions
from crashlab.gdb import parse
from tests import coredump_builder, scenarios

ROOT = Path(__file__).resolve().parent.parent
WRITTEN = ROOT / "fixtures" / "exception_texts" / "written_sources.tsv"
SIGNAL = re.compile(r"^CUDA_EXCEPTION_(?P<n>\d+)\s.*\t(?P<text>[^\t]+)$", re.M)


def _written() -> dict[str, dict[int, dict]]:
    sources: dict[str, dict[int, dict]] = {}
    with WRITTEN.open(newline="") as table:
        for row in csv.DictReader(table, delimiter="\t"):
            sources.setdefault(row["source"], {})[int(row["cudbg_code"])] = row
    return sources


@pytest.fixture(scope="module")
def cuda_gdb_signals(real_cuda_gdb) -> dict[str, int]:
    """text -> n, from the installed cuda-gdb's own signal table (`info signals`)."""
    out = subprocess.run([real_cuda_gdb, "-nx", "-batch", "-ex", "info signals"],
                         capture_output=True, text=True, timeout=120).stdout
    return {m["text"]: int(m["n"]) for m in SIGNAL.finditer(out)}


@pytest.mark.parametrize("code", [*range(1, 37), exceptions.UNKNOWN])
def test_report_matches_real_cuda_gdb_where_it_knows_the_code(
        code, real_cuda_gdb, cuda_gdb_signals, tmp_path):
    """A builder dump whose faulting lanes carry ``code``; cuda-gdb's `info cuda lanes` shows the
    text it gives the code (the same table as its "CUDA Exception:" line). Where it does not know
    the code it says "Device Unknown Exception" and warns; then crashlab's text must come from a
    newer written source (checked by the next test), or be that same text."""
    path = coredump_builder.write(scenarios.fault(exception=code).spec, tmp_path / "c.nvcudmp").path
    run = subprocess.run([real_cuda_gdb, "-nx", "-batch", "-ex", f"target cudacore {path}",
                          "-ex", "info cuda lanes"], capture_output=True, text=True, timeout=120)
    output = run.stdout + run.stderr
    shown = parse.current_lane_exception(output)
    assert shown, output
    reported = crashlab.inspect(path, sass=False).faults[0].exception
    assert reported.code == code
    unhandled = "Encountered unhandled device exception" in output
    assert unhandled == (shown == exceptions.DEVICE_UNKNOWN), output
    if unhandled:
        assert reported.display == exceptions.DEVICE_UNKNOWN or code in _written_codes()
    else:
        assert reported.display == shown
        assert reported.cuda_gdb_signal == f"CUDA_EXCEPTION_{cuda_gdb_signals[shown]}"


def _written_codes() -> set[int]:
    """Codes some written source has a text for."""
    written = _written()
    return set(written["cuda-gdb"]) | set(written["lldb-nvgpu"])


@pytest.mark.parametrize("code", range(1, 37))
def test_text_is_the_written_sources(code):
    """cuda-gdb's signal table first (the texts users see), then NVIDIA's LLDB table for codes
    cuda-gdb's public source does not map, then what both show for a code they lack."""
    written = _written()
    kind = exceptions.describe(code)
    if code in written["cuda-gdb"]:
        row = written["cuda-gdb"][code]
        expected = (row["text"], int(row["cuda_exception"]), exceptions.CUDA_GDB)
    elif code in written["lldb-nvgpu"]:
        expected = (written["lldb-nvgpu"][code]["text"], code, exceptions.LLDB_NVGPU)
    else:
        expected = (exceptions.DEVICE_UNKNOWN, exceptions.DEVICE_UNKNOWN_SIGNAL,
                    kind.display_source)
    assert (kind.display, kind.cuda_gdb_signal, kind.display_source) == expected
    assert kind.display_from_cuda_gdb


def test_every_code_to_36_is_known_and_named():
    for code in range(1, 37):
        kind = exceptions.describe(code)
        assert kind.known and kind.name.startswith("CUDBG_EXCEPTION_") and kind.display
        assert kind.scope in {"lane", "warp", "device", "cluster"}


def test_unknown_code_is_raw_and_says_crashlab_wrote_it():
    kind = exceptions.describe(4242)
    assert not kind.known and "4242" in kind.name and "4242" in kind.display
    assert not kind.display_from_cuda_gdb
