"""Strangers' files: every bad input gets one clear sentence and exit 2, never a traceback."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tracemalloc

import pytest

import crashlab
from crashlab.errors import BadInput, CoreFormatError
from tests import scenarios
from tests.conftest import run_cli
from tests.coredump_builder import CUBINS
from tests.elf_patch import (
    patched,
    read_section,
    section_count,
    set_header,
    set_section,
    structure_boundaries,
)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    from tests.coredump_builder import write

    built = write(scenarios.fault().spec, tmp_path_factory.mktemp("good") / "core.nvcudmp")
    return built


def _refused(path, *fragments):
    with pytest.raises(BadInput) as caught:
        crashlab.inspect(path, sass=False)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_missing_file(tmp_path):
    _refused(tmp_path / "nope.nvcudmp", "no such file")


def test_directory(tmp_path):
    _refused(tmp_path, "is a directory")


def test_empty_file(tmp_path):
    empty = tmp_path / "empty.nvcudmp"
    empty.write_bytes(b"")
    _refused(empty, "empty file")


def test_wrong_magic(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("an illegal memory access was encountered\n")
    _refused(text, "not an ELF file")


def test_cubin_is_not_a_coredump(tmp_path):
    cubin = tmp_path / "k.cubin"
    shutil.copy(CUBINS / "illegal_address.sm_90.cubin", cubin)
    _refused(cubin, "a cubin")


@pytest.fixture(scope="module")
def host_core(tmp_path_factory):
    """A real host core file: a small C program built by gcc, cored by GNU gdb."""
    if not (shutil.which("gcc") and shutil.which("gdb")):
        pytest.skip("needs gcc and gdb (installed by .ci/run)")
    work = tmp_path_factory.mktemp("host")
    source = work / "crash.c"
    source.write_text("#include <signal.h>\nint main(void) { raise(SIGSEGV); return 0; }\n")
    subprocess.run(["gcc", "-g", "-o", str(work / "crash"), str(source)], check=True)
    core = work / "host.core"
    subprocess.run(["gdb", "-nx", "-batch", "-ex", "run", "-ex", f"generate-core-file {core}",
                    str(work / "crash")], check=True, capture_output=True, timeout=120)
    assert core.exists()
    return core


def test_host_core(host_core):
    _refused(host_core, "host (CPU) core", "gdb")


def test_elf_that_is_not_a_core(tmp_path):
    _refused(sys.executable, "not a CUDA coredump")


@pytest.mark.parametrize("payload", [b"", b"garbage that is not a dump"])
def test_gzip_of_something_else(tmp_path, payload):
    path = tmp_path / "x.nvcudmp.gz"
    path.write_bytes(gzip.compress(payload))
    _refused(path)


def test_gzip_bomb_is_unpacked_to_disk_not_memory(tmp_path):
    """64 MiB of zeros in a 64 KiB gzip: refused as not ELF, without holding it in memory."""
    path = tmp_path / "bomb.nvcudmp.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        for _ in range(64):
            out.write(bytes(1 << 20))
    assert path.stat().st_size < 1 << 17
    tracemalloc.start()
    try:
        _refused(path, "not an ELF file")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_truncated_gzip(tmp_path, good):
    path = tmp_path / "cut.nvcudmp.gz"
    whole = gzip.compress(good.path.read_bytes())
    path.write_bytes(whole[: len(whole) // 2])
    _refused(path, "unpack")


def test_truncation_at_every_structure_boundary(tmp_path, good):
    data = good.path.read_bytes()
    cut = tmp_path / "cut.nvcudmp"
    boundaries = structure_boundaries(data)
    assert len(boundaries) > 500
    for point in boundaries:
        cut.write_bytes(data[:point])
        with pytest.raises(BadInput):
            crashlab.inspect(cut, sass=False)
    for point in boundaries[:: len(boundaries) // 5]:
        cut.write_bytes(data[:point])
        done = run_cli("inspect", cut)
        assert done.returncode == 2 and len(done.stderr.decode().splitlines()) == 1, done.stderr


def _first_of_type(data, kind):
    return next(i for i in range(section_count(data)) if read_section(data, i, "type") == kind)


LN_TABLE, WP_TABLE, CTA_TABLE, DEV_TABLE = 0x8000000F, 0x8000000E, 0x8000000D, 0x80000009


@pytest.mark.parametrize(
    "kind,field,value,fragment",
    [
        (LN_TABLE, "offset", 1 << 40, "truncated or damaged"),
        (LN_TABLE, "size", 1 << 60, "truncated or damaged"),
        (LN_TABLE, "size", 63, "not a whole number"),
        (LN_TABLE, "entsize", 0, "entry size 0"),
        (LN_TABLE, "entsize", 8, "entry size 8"),
        (LN_TABLE, "entsize", 1 << 40, "not a whole number"),
        (WP_TABLE, "link", 0xFFFFFF, "links to section"),
        (LN_TABLE, "link", 1, "its parent must be a WP_TABLE"),
        (LN_TABLE, "info", 1000, "names row 1000"),
        (DEV_TABLE, "entsize", 100, "not a whole number"),
    ],
)
def test_lying_section_headers(tmp_path, good, kind, field, value, fragment):
    def lie(data):
        set_section(data, _first_of_type(data, kind), field, value)

    _refused(patched(good.path, tmp_path / "lie.nvcudmp", lie), fragment)


def test_link_cycle(tmp_path, good):
    """A CTA table and a warp table naming each other as parent."""
    def cycle(data):
        cta, warp = _first_of_type(data, CTA_TABLE), _first_of_type(data, WP_TABLE)
        set_section(data, cta, "link", warp)
        set_section(data, warp, "link", cta)

    _refused(patched(good.path, tmp_path / "cycle.nvcudmp", cycle), "its parent must be")


def test_self_link(tmp_path, good):
    def loop(data):
        lane = _first_of_type(data, LN_TABLE)
        set_section(data, lane, "link", lane)

    _refused(patched(good.path, tmp_path / "loop.nvcudmp", loop), "its parent must be")


def test_strtab_offset_out_of_range(tmp_path, good):
    def lie(data):
        devtbl = _first_of_type(data, DEV_TABLE)
        start = read_section(data, devtbl, "offset")
        data[start : start + 8] = (1 << 40).to_bytes(8, "little")  # devName

    _refused(patched(good.path, tmp_path / "str.nvcudmp", lie), "string offset", "device name")


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("shoff", 1 << 50, "before its section table"),
        ("shoff", 0, "e_shoff 0"),
        ("shentsize", 40, "section header size"),
        ("shstrndx", 0xFFF0, "out of range"),
    ],
)
def test_lying_elf_header(tmp_path, good, field, value, fragment):
    _refused(patched(good.path, tmp_path / "h.nvcudmp", lambda d: set_header(d, field, value)),
             fragment)


def test_extended_count_that_lies(tmp_path, good):
    def lie(data):
        set_header(data, "shnum", 0)
        set_section(data, 0, "size", 1 << 40)

    _refused(patched(good.path, tmp_path / "x.nvcudmp", lie), "inside its section table")


def test_core_without_device_table(tmp_path, good):
    def drop(data):
        set_section(data, _first_of_type(data, DEV_TABLE), "type", 1)

    with pytest.raises(CoreFormatError):
        crashlab.inspect(patched(good.path, tmp_path / "nodev.nvcudmp", drop), sass=False)


@pytest.mark.parametrize("make", ["missing", "directory", "empty", "text", "host", "lie"])
def test_cli_says_one_line_and_exits_2(tmp_path, good, make, request):
    target = {
        "missing": lambda: tmp_path / "missing.nvcudmp",
        "directory": lambda: tmp_path,
        "empty": lambda: (tmp_path / "e").write_bytes(b"") or tmp_path / "e",
        "text": lambda: (tmp_path / "t").write_text("hello") or tmp_path / "t",
        "host": lambda: request.getfixturevalue("host_core"),
        "lie": lambda: patched(good.path, tmp_path / "l",
                               lambda d: set_section(d, _first_of_type(d, LN_TABLE), "entsize", 0)),
    }[make]()
    done = run_cli("inspect", target)
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crashlab: "), done.stderr
    assert done.stdout == b""


@pytest.mark.parametrize("args", [
    ("inspect",), ("inspect", "{core}", "--json", "--markdown"), ("inspect", "{core}", "--context", "-1"),
    ("frobnicate",), ("--bogus",), ("schema", "nonsense"), ("debug",), ("replay", "{core}", "--speed", "0"),
    ("serve", "--grace", "-1", "--", "true"), ("dump-now",), ("inspect", "{core}", "--no-such-option"),
])
def test_cli_usage_errors_are_one_line_and_exit_2(good, args):
    done = run_cli(*(str(good.path) if a == "{core}" else a for a in args))
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crashlab: "), done.stderr


@pytest.mark.parametrize("version", ["0.5.6.post2", "0.5.12", "0.5.23"])
def test_a_cut_crash_dump_is_partial_or_one_line(tmp_path, version):
    """replay --list of a crash dump cut anywhere: exit 0 with the partial line on stderr, or
    exit 2 with one line; never a traceback."""
    from tests.replay_support import FIXTURES

    data = (FIXTURES / "real" / f"crash_dump_real_{version}.pkl").read_bytes()
    outcomes = set()
    for cut in (1, len(data) // 3, len(data) * 3 // 4, len(data) * 99 // 100, len(data) - 1):
        path = tmp_path / f"cut-{cut}.pkl"
        path.write_bytes(data[:cut])
        done = run_cli("replay", path, "--list")
        lines = done.stderr.decode().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr.decode(), done.stderr
        if done.returncode == 0:
            assert lines[0].startswith(f"{path}: partial: ")
        else:
            assert done.returncode == 2 and lines[0].startswith("crashlab: ") and not done.stdout
        outcomes.add(done.returncode)
    assert outcomes == {0, 2}
