"""serve records the server's loaded libraries (/proc/PID/maps) at start and at crash, on real
processes: the stand-in SGLang server under the real ``crashlab serve``, and a lone child."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from crashlab.owner.maps import mapped_paths
from crashlab.supervise import owners, procmaps
from tests.serve_harness import (
    FAST,
    Serve,
    environment,
    free_port,
    post_generate,
    sglang,
    survivors,
)

_PID_LINE = re.compile(r"^# pid (\d+) (\S+)$", re.MULTILINE)


def test_a_snapshot_holds_the_libraries_a_real_child_maps(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import sys; print('up', flush=True); "
                              "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"  # running Python
        assert procmaps.snapshot([(child.pid, "server"), (2**22 + 7, "gone")], tmp_path / "m.txt")
        text = (tmp_path / "m.txt").read_text()
    finally:
        child.communicate(b"")
    assert _PID_LINE.findall(text) == [(str(child.pid), "server")]  # the missing pid: left out
    assert os.path.realpath(sys.executable) in mapped_paths(text)
    assert "[stack]" not in text and "[heap]" not in text
    assert not procmaps.snapshot([(child.pid, "server")], tmp_path / "after.txt")  # it ended
    assert not (tmp_path / "after.txt").exists()


def test_serve_keeps_the_maps_at_start_and_at_crash(tmp_path):
    port = free_port()
    serve = Serve(tmp_path, sglang(port), *FAST,
                  env=environment(crash="gpu-fault", crash_on="generate", dump_seconds="2"))
    serve.wait_healthy()
    started = serve.wait_manifest(
        lambda m: any(f["path"].endswith(procmaps.START) for f in m["files"]), "maps at start")
    post_generate(port)
    assert serve.finish() == 0, serve.stderr
    manifest = serve.manifest()
    assert survivors(manifest) == []
    kept = {f["path"]: f["kind"] for f in manifest["files"] if f["kind"] == "process-maps"}
    assert kept == {f"incarnation-1/{procmaps.START}": "process-maps",
                    f"incarnation-1/{procmaps.CRASH}": "process-maps"}
    pids = {p["pid"]: p["role"] for p in started["incarnations"][0]["processes"]}
    for name in (procmaps.START, procmaps.CRASH):
        text = (serve.incarnation / name).read_text()
        listed = {int(pid): role for pid, role in _PID_LINE.findall(text)}
        assert listed and all(pids.get(pid) == role for pid, role in listed.items()), (name, listed)
        assert any(path.endswith(".py") or "python" in path for path in mapped_paths(text))
    fault = serve.report()["incidents"][0]["dumps"][0]["report"]["faults"][0]
    assert fault["owner"] is not None and fault["owner"]["evidence"]


def test_serve_looks_in_the_servers_triton_cache(tmp_path):
    incarnation = tmp_path / "incarnation-1"
    incarnation.mkdir()
    launch = incarnation / "launch.json"
    assert owners.triton_caches(incarnation) == ()  # no launch.json
    launch.write_text(json.dumps({"environment": {"HOME": "/home/u"}}))
    assert owners.triton_caches(incarnation) == (Path("/home/u/.triton/cache"),)
    launch.write_text(json.dumps({"environment": {"HOME": "/home/u", "TRITON_CACHE_DIR": "/c"}}))
    assert owners.triton_caches(incarnation) == (Path("/c"),)
    launch.write_text("{not json")
    assert owners.triton_caches(incarnation) == ()


def test_a_damaged_environment_costs_the_owner_its_version_only(tmp_path):
    (tmp_path / "environment.json").write_text("{}")
    assert owners.installed(tmp_path) == {}
