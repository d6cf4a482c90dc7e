"""What inspect costs in nvdisasm runs: at most one per cubin (or, for a cubin with much code, one
per function it reads), none where the SASS cache already holds the cubin; measured by a wrapper
around the real nvdisasm that logs its invocations. And what a warm inspect decodes of an entry:
the function it shows and explains, not the whole cubin."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import crashlab
from crashlab.coredump.core import CoreDump
from crashlab.sass import cache, listing
from crashlab.sass.finder import CodeFinder
from crashlab.sass.listing import find_nvdisasm
from tests import scenarios
from tests.conftest import run_cli

EXAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"


@pytest.fixture
def logged_nvdisasm(tmp_path, monkeypatch):
    """CRASHLAB_NVDISASM pointing at a script that logs its arguments and runs the real one."""
    monkeypatch.delenv("CRASHLAB_NVDISASM", raising=False)
    real, why = find_nvdisasm()
    if real is None:
        pytest.fail(f"the test environment must have nvdisasm (pip install '.[sass]'): {why}")
    log = tmp_path / "nvdisasm.log"
    wrapper = tmp_path / "nvdisasm"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return {"CRASHLAB_NVDISASM": str(wrapper)}, log


def _runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _disassemblies(log: Path) -> int:
    """Runs that disassembled (not the --version query that names the tool in the report)."""
    return sum(1 for line in _runs(log) if line.strip() != "--version")


def _inspect(path, env) -> dict:
    done = run_cli("inspect", path, "--json", env={**env, "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_second_inspect_of_a_kernel_starts_no_nvdisasm(logged_nvdisasm, empty_sass_cache):
    env, log = logged_nvdisasm
    first = _inspect(EXAMPLE, env)
    assert _disassemblies(log) == 1  # the SASS window and the explanation share the one run
    assert first["faults"][0]["explanation"] is not None
    entries = list((empty_sass_cache / "crashlab" / "sass").glob("*.json"))
    assert len(entries) == 1
    runs = len(_runs(log))
    second = _inspect(EXAMPLE, env)
    assert len(_runs(log)) == runs  # not even nvdisasm --version: that is cached too
    assert second["faults"][0]["sass"] == first["faults"][0]["sass"]
    assert second["faults"][0]["explanation"] == first["faults"][0]["explanation"]


def test_a_damaged_cache_entry_is_ignored_and_rewritten(logged_nvdisasm, empty_sass_cache):
    env, log = logged_nvdisasm
    first = _inspect(EXAMPLE, env)
    [entry] = (empty_sass_cache / "crashlab" / "sass").glob("*.json")
    entry.write_text('{"format": 1, "tool": ')
    again = _inspect(EXAMPLE, env)
    assert _disassemblies(log) == 2
    assert again["faults"][0]["sass"] == first["faults"][0]["sass"]
    header = json.loads(entry.read_text().splitlines()[0])
    assert header["format"] == cache.FORMAT and header["index"]
    _inspect(EXAMPLE, env)
    assert _disassemblies(log) == 2


def test_a_damaged_function_of_an_entry_is_disassembled_again(logged_nvdisasm, empty_sass_cache):
    """The index is whole but the faulting function's listing is cut: that costs one run, and
    the rewritten entry serves the next inspect."""
    env, log = logged_nvdisasm
    first = _inspect(EXAMPLE, env)
    [entry] = (empty_sass_cache / "crashlab" / "sass").glob("*.json")
    header, body = entry.read_bytes().split(b"\n", 1)
    start, length = json.loads(header)["index"][first["faults"][0]["sass"]["section"]]
    entry.write_bytes(header + b"\n" + body[:start] + b"x" * length + body[start + length:])
    again = _inspect(EXAMPLE, env)
    assert _disassemblies(log) == 2 and again["faults"][0]["sass"] == first["faults"][0]["sass"]
    _inspect(EXAMPLE, env)
    assert _disassemblies(log) == 2


def test_a_warm_inspect_decodes_only_the_functions_it_reads(monkeypatch, empty_sass_cache):
    """The example's cubin holds two kernels; its fault lies in one, and a warm inspect (the
    window, the explanation, the source line) decodes that function's listing alone."""
    crashlab.inspect(EXAMPLE)
    decoded: list[int] = []
    real = cache._decode

    def counted(part):
        listing = real(part)
        decoded.append(len(listing))
        return listing

    monkeypatch.setattr(cache, "_decode", counted)
    report = crashlab.inspect(EXAMPLE)
    assert report.faults[0].explanation is not None and report.faults[0].sass.instructions
    [entry] = cache.cache_folder().glob("*.json")
    index = json.loads(entry.read_text().splitlines()[0])["index"]
    assert len(index) == 2 and report.faults[0].sass.section in index
    assert len(decoded) == 1  # one function of the two


def test_one_run_for_the_same_cubin_loaded_on_two_devices(logged_nvdisasm, build, empty_sass_cache):
    """Two devices load the module at different addresses; rebased, the cubins are the same
    bytes, so the second is served from the cache the first filled."""
    env, log = logged_nvdisasm
    built = build(scenarios.fault(device_count=2, faulting_device=1))
    report = _inspect(built.path, env)
    assert report["faults"][0]["sass"]["instructions"]
    assert _disassemblies(log) == 1


def test_a_cache_that_cannot_be_written_costs_runs_not_the_report(logged_nvdisasm, tmp_path):
    env, log = logged_nvdisasm
    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("")
    done = run_cli("inspect", EXAMPLE, "--json", env={**env, "XDG_CACHE_HOME": str(blocked)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["faults"][0]["sass"]["instructions"]
    run_cli("inspect", EXAMPLE, "--json", env={**env, "XDG_CACHE_HOME": str(blocked)})
    assert _disassemblies(log) == 2


TORCH = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "h200" / "torch_flash_oob.sglang" / "core.1693.nvcudmp"


def _disassembly_runs(log: Path) -> list[list[str]]:
    return [line.split() for line in _runs(log) if line.strip() != "--version"]


def _entry_header(folder: Path) -> dict:
    [entry] = (folder / "crashlab" / "sass").glob("*.json")
    return json.loads(entry.read_bytes().split(b"\n", 1)[0])


def test_a_large_cubin_is_disassembled_one_function_at_a_time(logged_nvdisasm, empty_sass_cache,
                                                              tmp_path, monkeypatch):
    """PyTorch's flash-attention cubin of the real H200 dump (1.2 MB of code in 12 functions): a
    cold inspect runs nvdisasm on the faulting function alone (``-fun``), and the window and the
    explanation (its slice walks the function's control-flow graph) are those of a whole-cubin
    run; the entry holds that function, says it is not whole, and serves the next inspect."""
    env, log = logged_nvdisasm
    monkeypatch.setenv("CRASHLAB_NVDISASM", env["CRASHLAB_NVDISASM"])
    alone = crashlab.inspect(TORCH).faults[0]
    [run] = _disassembly_runs(log)
    assert "-fun" in run
    header = _entry_header(empty_sass_cache)
    assert header["whole"] is False and list(header["index"]) == [alone.sass.section]
    warm = crashlab.inspect(TORCH).faults[0]
    assert len(_disassembly_runs(log)) == 1

    monkeypatch.setattr(listing, "ONE_AT_A_TIME_BYTES", 1 << 40)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-cache"))
    whole = crashlab.inspect(TORCH).faults[0]
    assert "-fun" not in _disassembly_runs(log)[-1]
    for report in (warm, whole):
        assert report.sass.model_dump() == alone.sass.model_dump()
        assert report.explanation.model_dump() == alone.explanation.model_dump()


def test_a_function_alone_reads_as_in_the_whole_listing():
    """Every text section of the flash-attention cubin, disassembled alone (``-fun``), gives the
    listing the whole-cubin run gives it: nvdisasm numbers the labels otherwise in each, and the
    listing renames them by their first use in the section."""
    tool, why = find_nvdisasm()
    assert tool, why
    with CoreDump(TORCH) as core:
        finder = CodeFinder(core)
        [cubin] = [c for section, _ in core.relocated_images()
                   if (c := finder.cubin(section)) and sum(t.size for t in c.texts) > 1_000_000]
        whole = listing._run_nvdisasm(cubin.rebased, tool)
        assert not isinstance(whole, str) and len(whole) == len(cubin.texts) == 12
        for text in cubin.texts:
            assert listing._run_nvdisasm(cubin.rebased, tool, text.symbol) == {text.name: whole[text.name]}


def test_sections_asked_one_at_a_time_are_added_to_the_entry(logged_nvdisasm, empty_sass_cache,
                                                             monkeypatch):
    """With every cubin taken one section at a time, the example's two kernels cost one run
    each, the entry gains each, and asking for every section makes the whole run and a whole
    entry; each listing is the whole run's."""
    env, log = logged_nvdisasm
    monkeypatch.setenv("CRASHLAB_NVDISASM", env["CRASHLAB_NVDISASM"])
    monkeypatch.setattr(listing, "ONE_AT_A_TIME_BYTES", 0)
    with CoreDump(EXAMPLE) as core:
        finder = CodeFinder(core)
        [(section, cubin)] = [(s, c) for s, _ in core.relocated_images()
                              if (c := finder.cubin(s)) and len(c.texts) == 2]
        names = [text.name for text in cubin.texts]
        asked = listing.CubinListings(cubin.rebased, cubin.texts)
        one = [asked.section(name) for name in names]  # both asked of one object
        assert [run.count("-fun") for run in _disassembly_runs(log)] == [1, 1]
        assert _entry_header(empty_sass_cache)["whole"] is False
        assert sorted(_entry_header(empty_sass_cache)["index"]) == sorted(names)
        every = listing.CubinListings(cubin.rebased, cubin.texts).every()
        assert [run.count("-fun") for run in _disassembly_runs(log)] == [1, 1, 0]
        assert _entry_header(empty_sass_cache)["whole"] is True
        assert not isinstance(every, str) and [every[name] for name in names] == one
        assert listing.CubinListings(cubin.rebased, cubin.texts).every() == every
        assert len(_disassembly_runs(log)) == 3
