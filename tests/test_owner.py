"""Whose code faulted (crashlab.owner): the production cubins' owners, read from their
PROVENANCE; a Triton JIT cache; a constructed /proc/PID/maps; the known-fix table's statuses;
a hostile kernel name in every view of the owner."""

from __future__ import annotations

import json
import os
import re
import threading

import pytest
from packaging.version import Version
from pydantic import ValidationError
from rich.console import Console

import crashlab
from crashlab.cubin import Cubin
from crashlab.owner import Clues, owner_of, refined, tritoncache
from crashlab.owner import fixes as fix_table
from crashlab.owner.image import read_image
from crashlab.owner.maps import loaded, mapped_paths
from crashlab.report import markdown, terminal
from crashlab.report.markdown_escape import cell, inline
from tests import scenarios
from tests.coredump_builder import CUBINS, relocate
from tests.test_production_cubins import CUBIN_FILES, PRODUCTION, fault_dump, kernel_of, site
from tests.test_views_hostile import MARKUP, _rendered_text

#: The artifact crashlab names for each wheel PROVENANCE says a cubin was carved from (sglang's
#: kernel wheel is published as sglang-kernel, formerly sgl-kernel; crashlab calls it sgl-kernel).
ARTIFACT_OF_WHEEL = {"sglang-kernel": "sgl-kernel", "vllm": "vllm"}
#: Standing in for a Triton-compiled kernel: a real cubin built by nvcc (fixtures/cubins/PROVENANCE.md)
STAND_IN = CUBINS / "device_function.sm_90.cubin"
#: The cuDNN kernel vllm#35566's core dump names (the seeded row of fixes.json matches it)
CUDNN_KERNEL = "cudnn_generated_fort_native_sm120_matMul_pointwise_pointwise_knob_3_128x128x128_0_0"


def provenance_wheels() -> dict[str, str]:
    """cubin file -> the wheel (distribution name) it was carved from, read from PROVENANCE.md."""
    rows = {}
    for line in (PRODUCTION / "PROVENANCE.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) > 6 and cells[1].endswith(".cubin`"):
            rows[cells[1].strip("`")] = cells[5].split()[0]
    return rows


@pytest.mark.parametrize("cubin", CUBIN_FILES)
def test_each_production_cubin_names_the_wheel_it_was_carved_from(cubin, tmp_path):
    wheel = provenance_wheels()[cubin]
    fault_dump(cubin, site(cubin, "kernel"), tmp_path / "core.nvcudmp")
    owner = crashlab.inspect(tmp_path / "core.nvcudmp", sass=False, explain=False).faults[0].owner
    assert owner is not None
    assert owner.artifact == ARTIFACT_OF_WHEEL[wheel], owner.evidence
    assert owner.version is None and owner.fix_status == "no-known-fix"  # a lone dump: no version
    toolchain = read_image(Cubin((PRODUCTION / cubin).read_bytes())).toolchain
    assert toolchain and f"module image built by: {toolchain}" in owner.evidence
    assert f"-arch {kernel_of(cubin).arch}" in toolchain  # the note's own options: sm_100f for sm_100


def test_a_cutlass_template_is_named_by_the_other_kernels_of_its_image():
    cubin = "cutlass_mxfp8_grouped_gemm.sm_100.cubin"
    image = Cubin((PRODUCTION / cubin).read_bytes())
    kernel = read_image(image).functions
    cutlass = next(name for name in kernel if "cutlass::device_kernel" in name)
    alone = owner_of(Clues(kernel=cutlass))
    assert alone.artifact == "cutlass"
    within = owner_of(Clues(kernel=cutlass, image=image))
    assert within.artifact == ARTIFACT_OF_WHEEL[provenance_wheels()[cubin]]
    assert any("expert_specialization::" in fact for fact in within.evidence)


def _triton_cache(root, image: bytes, name: str):
    """A folder laid out as Triton's JIT cache: <hash>/<kernel>.cubin beside <kernel>.json."""
    entry = root / "5XZWRQ4L3TPDYCM2" / f"{name}.cubin"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(image)
    entry.with_suffix(".json").write_text(json.dumps({"name": name, "num_warps": 4}))
    other = root / "OTHER" / "other.cubin"
    other.parent.mkdir()
    other.write_bytes((PRODUCTION / "ngram_ids.sm_80.cubin").read_bytes())
    return entry


def test_a_dump_whose_image_is_in_a_triton_cache_is_triton_jit(build, tmp_path):
    """The dump holds the image relocated (its bytes differ from the cache's file): the code
    sections and their sizes still match. The cubin is nvcc's, standing in for Triton's."""
    entry = _triton_cache(tmp_path / "triton", STAND_IN.read_bytes(), "scatter_rows")
    path = build(scenarios.device_function()).path
    report = crashlab.inspect(path, sass=False, explain=False, triton_caches=(tmp_path / "triton",))
    owner = report.faults[0].owner
    assert owner is not None and owner.artifact == "triton-jit", owner
    assert any(str(entry) in fact and "scatter_rows" in fact for fact in owner.evidence)
    elsewhere = crashlab.inspect(path, sass=False, explain=False, triton_caches=(tmp_path / "no",))
    assert elsewhere.faults[0].owner.artifact == "unknown"


def test_a_triton_owner_takes_tritons_version_from_the_package_list(tmp_path):
    image = Cubin(relocate(STAND_IN.read_bytes(), 0x7F00_0000_0000).data)
    assert image.data != STAND_IN.read_bytes()
    _triton_cache(tmp_path / "triton", STAND_IN.read_bytes(), "scatter_rows")
    owner = owner_of(Clues(kernel="scatter_rows", image=image, triton_caches=(tmp_path / "triton",),
                           packages={"triton": "3.4.0"}))
    assert (owner.artifact, owner.version) == ("triton-jit", "3.4.0")



def _in_a_thread(call):
    """``call``'s result; a call still blocked after a minute (a FIFO read) fails, not hangs."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "blocked on a file of the cache"
    return result[0]


def test_a_triton_cache_reads_only_its_regular_files_of_a_cubins_size(tmp_path, monkeypatch):
    """A FIFO named like a cubin (its read never ends), a link to a cubin out of the cache and a
    cubin over the size cap are passed over; metadata nested past Python's stack reads as none."""
    image = Cubin(relocate(STAND_IN.read_bytes(), 0x7F00_0000_0000).data)
    outside = tmp_path / "outside.cubin"
    outside.write_bytes(STAND_IN.read_bytes())
    cache = tmp_path / "triton"
    (cache / "0FIFO").mkdir(parents=True)
    os.mkfifo(cache / "0FIFO" / "k.cubin")
    (cache / "1LINK").mkdir()
    (cache / "1LINK" / "k.cubin").symlink_to(outside)
    (cache / "2LINKED").symlink_to(tmp_path, target_is_directory=True)
    assert _in_a_thread(lambda: tritoncache.cached_cubin(image, [cache])) is None
    entry = _triton_cache(cache, STAND_IN.read_bytes(), "scatter_rows")
    deep = 100_000
    entry.with_suffix(".json").write_text('{"a":' * deep + "1" + "}" * deep)
    assert _in_a_thread(lambda: tritoncache.cached_cubin(image, [cache])) == (entry, {})
    monkeypatch.setattr(tritoncache, "MAX_CUBIN_BYTES", entry.stat().st_size - 1)
    assert tritoncache.cached_cubin(image, [cache]) is None


def test_a_failing_owner_lookup_costs_the_owner_only(build, tmp_path, monkeypatch):
    """Whatever the owner lookup raises, inspect still triages, and says why no owner."""
    def fails(image, caches):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(tritoncache, "cached_cubin", fails)
    path = build(scenarios.device_function()).path
    report = crashlab.inspect(path, sass=False, explain=False, triton_caches=(tmp_path,))
    assert report.faults and report.faults[0].owner is None
    assert any("RecursionError" in note for note in report.faults[0].notes)


MAPS = """\
# pid 4242 scheduler
55d0a0000000-55d0a0001000 r--p 00000000 08:01 131 /usr/bin/python3.12
7f0000000000-7f0000100000 r-xp 00000000 08:01 132 /srv/venv/lib/python3.12/site-packages/sgl_kernel/sm100/common_ops.abi3.so
7f0000100000-7f0000200000 r--p 00100000 08:01 132 /srv/venv/lib/python3.12/site-packages/sgl_kernel/sm100/common_ops.abi3.so
7f0000200000-7f0000300000 r-xp 00000000 08:01 133 /home/u/.cache/flashinfer/0.6.12/90/cached_ops/batch_prefill/batch_prefill.so (deleted)
7f0000300000-7f0000400000 r-xp 00000000 08:01 134 /srv/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.{cudnn}
7f0000400000-7f0000500000 r-xp 00000000 08:01 135 /srv/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so
7f0000500000-7f0000600000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
"""


def _below(version: str) -> str:
    """A release before ``version``."""
    parts = list(Version(version).release)
    index = max(i for i, part in enumerate(parts) if part > 0)
    parts[index] -= 1
    return ".".join(map(str, parts))


def test_a_maps_file_names_each_library_and_the_versions_it_carries():
    text = MAPS.format(cudnn="9.19.0")
    paths = mapped_paths(text)
    assert len(paths) == 5 and "[stack]" not in " ".join(paths)
    assert all(not path.endswith("(deleted)") for path in paths)
    found = {library.artifact: library.version for library in loaded(text)}
    assert found == {"sgl-kernel": None, "flashinfer-jit": "0.6.12", "cudnn": "9.19.0", "torch": None}


def test_fix_status_against_the_version_that_crashed():
    fix = fix_table.find(fix_table.shipped(), "cudnn", CUDNN_KERNEL, None)
    assert fix is not None
    older = owner_of(Clues(kernel=CUDNN_KERNEL, maps=MAPS.format(cudnn=_below(fix.fixed_in))))
    assert (older.artifact, older.version, older.fix_status) == \
        ("cudnn", _below(fix.fixed_in), "fixed-in-later")
    assert older.fix is not None and older.fix.link == fix.link
    same = owner_of(Clues(kernel=CUDNN_KERNEL, packages={"nvidia_cudnn_cu13": fix.fixed_in}))
    assert (same.version, same.fix_status) == (fix.fixed_in, "fixed-in-this")
    unknown = owner_of(Clues(kernel=CUDNN_KERNEL))
    assert (unknown.version, unknown.fix_status) == (None, "version-unknown")
    # a soname's major version names a series, not a release: no status is read from it
    series = owner_of(Clues(kernel=CUDNN_KERNEL, maps=MAPS.format(cudnn="9")))
    assert series.fix_status == "version-unknown"
    other = owner_of(Clues(kernel="cudnn_generated_other_kernel", packages={"nvidia-cudnn-cu13": "9.1.0"}))
    assert (other.fix, other.fix_status) == (None, "no-known-fix")


def test_serve_refines_a_lone_dumps_owner_with_the_package_list():
    alone = owner_of(Clues(kernel="flashinfer::BatchPrefillWithPagedKVCacheKernel<...>"))
    assert (alone.artifact, alone.version) == ("flashinfer", None)
    served = refined(alone, Clues(kernel="flashinfer::BatchPrefillWithPagedKVCacheKernel<...>",
                                  packages={"flashinfer-python": "0.6.12"}))
    assert (served.artifact, served.version) == ("flashinfer", "0.6.12")
    assert served.evidence[: len(alone.evidence)] == alone.evidence


def test_a_fix_keyed_by_signature_and_a_table_that_is_not_one():
    table = fix_table.parse(json.dumps({"about": "test", "fixes": [
        {"artifact": "vllm", "signature": "0123456789ab", "fixed_in": "0.34.0",
         "link": "https://example.invalid/fix", "summary": "s", "source": "constructed"}]}))
    owner = owner_of(Clues(kernel="vllm::k()", packages={"vllm": "0.33.0"},
                           signature="0123456789ab"), table)
    assert owner.fix_status == "fixed-in-later"
    assert owner_of(Clues(kernel="vllm::k()", packages={"vllm": "0.33.0"},
                          signature="ffffffffffff"), table).fix_status == "no-known-fix"
    row = {"artifact": "x", "fixed_in": "1.0", "link": "https://example.invalid/fix",
           "summary": "s", "source": "s"}
    fix_table.parse(json.dumps({"about": "t", "fixes": [{**row, "kernel_pattern": "k"}]}))
    for broken in ({**row}, {**row, "kernel_pattern": "(["}, {**row, "artifact": "unknown",
                                                               "kernel_pattern": "k"}, {**row, "kernel_pattern": "k",
                                                            "fixed_in": "soon"},
                   {**row, "kernel_pattern": "k", "typo": 1},
                   *({**row, "kernel_pattern": "k", "link": link} for link in
                     ("javascript:alert(document.domain)", "data:text/html,x", "l",
                      " https://example.invalid/fix", "https:///fix"))):
        with pytest.raises(ValidationError):
            fix_table.parse(json.dumps({"about": "t", "fixes": [broken]}))


def test_every_shipped_fix_says_where_it_came_from():
    for fix in fix_table.shipped().fixes:
        assert fix.link.startswith("https://") and fix.source
        assert fix.kernel_pattern is None or re.compile(fix.kernel_pattern)


def test_a_hostile_kernel_name_in_the_owner_is_text_in_every_view(tmp_path):
    cubin = "ngram_ids.sm_80.cubin"
    fault_dump(cubin, site(cubin, "kernel"), tmp_path / "core.nvcudmp")
    report = crashlab.inspect(tmp_path / "core.nvcudmp", sass=False, explain=False)
    hostile = f"flashinfer::@octocat #12 `x` | *y* {MARKUP}"
    report.faults[0].owner = owner_of(Clues(kernel=hostile, packages={"flashinfer-python": "0.6.12"}))
    shown = next(fact for fact in report.faults[0].owner.evidence if "octocat" in fact)
    console = Console(record=True, width=1000)
    terminal.render(report, console)
    assert shown in console.export_text()
    body = markdown.render(report)
    assert cell(inline(shown)) in body  # escaped as running text in a table cell
    assert shown in _rendered_text(body)
