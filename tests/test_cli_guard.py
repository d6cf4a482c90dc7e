"""One guard for every verb: a failure crashlab did not foresee, met in a real situation (output
to a full disk, a working directory that was deleted, a damaged manifest), ends as one line on
stderr and exit 2, never a traceback; CRASHLAB_DEBUG=1 shows the traceback instead."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.serve_harness import Serve, environment

CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
DUMP = ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.23.pkl"
FULL_DISK = Path("/dev/full")  # every write fails with ENOSPC
BUG = "this is a crashlab bug, please report it (CRASHLAB_DEBUG=1 shows the traceback)"


def _crashlab(*args, stdout=subprocess.PIPE, cwd=ROOT, debug=False) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "CRASHLAB_DEBUG"}
    env.update(PYTHONPATH=str(ROOT), **({"CRASHLAB_DEBUG": "1"} if debug else {}))
    return subprocess.run([sys.executable, "-m", "crashlab", *map(str, args)], stdout=stdout,
                          stderr=subprocess.PIPE, cwd=cwd, env=env, timeout=120)


def _one_unexpected_line(done, *fragments: str) -> str:
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2, (done.returncode, lines)
    assert len(lines) == 1 and lines[0].startswith("crashlab: ") and BUG in lines[0], lines
    assert all(fragment in lines[0] for fragment in fragments), lines
    return lines[0]


@pytest.mark.skipif(not FULL_DISK.exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("args, subject", [
    (["inspect", CORE, "--no-sass"], f"crashlab: {CORE}: OSError"),
    (["inspect", CORE, "--no-sass", "--json"], f"crashlab: {CORE}: OSError"),
    (["replay", DUMP], f"crashlab: {DUMP}: OSError"),
    (["replay", DUMP, "--json"], f"crashlab: {DUMP}: OSError"),
    (["debug", CORE, "--print"], f"crashlab: {CORE}: OSError"),
    (["schema"], "crashlab: schema: OSError"),
    (["--help"], "crashlab: OSError"),
    (["--version"], "crashlab: OSError"),
    (["inspect", "--help"], "crashlab: OSError"),
])
def test_output_to_a_full_disk_is_one_line(args, subject):
    with open(FULL_DISK, "wb") as full:
        done = _crashlab(*args, stdout=full)
    _one_unexpected_line(done, subject, "No space left on device")


@pytest.mark.skipif(not FULL_DISK.exists(), reason="no /dev/full on this system")
def test_crashlab_debug_shows_the_traceback():
    with open(FULL_DISK, "wb") as full:
        done = _crashlab("schema", stdout=full, debug=True)
    assert done.returncode == 1
    assert b"Traceback (most recent call last)" in done.stderr and b"OSError" in done.stderr


def test_serve_in_a_deleted_working_directory_is_one_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        ["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", gone, sys.executable,
         "-m", "crashlab", "serve", "--runs-dir", tmp_path / "runs", "--", "true"],
        capture_output=True, env={**environment(), "PYTHONPATH": str(ROOT)}, timeout=120)
    _one_unexpected_line(done, "crashlab: serve: FileNotFoundError")
    assert not (tmp_path / "runs").exists()


def test_dump_now_on_a_damaged_manifest_is_one_line(tmp_path):
    """A copy of a live run's manifest whose coredump pipe's folder holds a NUL, which the
    pipe's glob cannot list."""
    serve = Serve(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"],
                  "--user-dumps", "--quiet", env=environment())
    try:
        live = serve.wait_manifest(lambda m: m["incarnations"], "the first incarnation")
        damaged = tmp_path / "damaged"
        damaged.mkdir()
        pipe = live["environment"]["CUDA_COREDUMP_PIPE"]
        pipe["value"] = pipe["value"].replace("/pipes/", "/pipes\0/")
        (damaged / "manifest.json").write_text(json.dumps(live))
        _one_unexpected_line(_crashlab("dump-now", damaged, "--timeout", "0"),
                             f"crashlab: {damaged}: ValueError")
    finally:
        serve.signal(signal.SIGTERM)
        serve.finish()
