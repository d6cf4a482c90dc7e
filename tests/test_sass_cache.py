"""What inspect costs in nvdisasm runs: at most one per cubin, none where the SASS cache already
holds the cubin; measured by a wrapper around the real nvdisasm that logs its invocations. And what
a warm inspect decodes of an entry: the function it shows and explains, not the whole cubin."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import crashlab
from crashlab.sass import cache
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
