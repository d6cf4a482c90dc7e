"""Running the real ``crashlab serve`` against the stand-in SGLang server, for tests/test_serve*.py.

crashlab runs in a process of its own (``python -m crashlab serve``, as a user runs it), its
output to files (a pipe nobody reads would block it). Waits are on events (a line in a log, a
state in the manifest) with generous deadlines, never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psutil

from tests.conftest import ROOT, STANDIN, free_port  # noqa: F401  (re-exported for the tests)

FAULT_DUMP = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
HANG_DUMP = ROOT / "fixtures" / "synthetic" / "hang_no_exception.nvcudmp"
DEADLINE = 90.0
FAST = ("--health-interval", "0.2", "--health-timeout", "2", "--grace", "10")


def sglang(port: int, *extra: str) -> list[str]:
    """The command a user types, run against the stand-in (tests/standin on PYTHONPATH)."""
    return [sys.executable, "-m", "sglang.launch_server", "--model-path", "stand-in/model",
            "--host", "127.0.0.1", "--port", str(port), *extra]


def environment(**standin: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CUDA_", "STANDIN_", "SGLANG_"))}
    env.update(PYTHONPATH=str(STANDIN), STANDIN_DUMP=str(FAULT_DUMP), STANDIN_USER_DUMP=str(HANG_DUMP),
               STANDIN_DUMP_SECONDS="0.4", SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS="3")
    env.update({f"STANDIN_{key.upper()}": value for key, value in standin.items()})
    return env


def wait_for(predicate, what: str, timeout: float = DEADLINE):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class Serve:
    """One ``crashlab serve`` process."""

    def __init__(self, tmp_path: Path, command: list[str], *options: str, env: dict[str, str],
                 entry: tuple[str, ...] = ("crashlab", "serve"), cwd: Path = ROOT,
                 preexec_fn=None):
        """ENTRY: the module run and its arguments before the options (tests.serve_entry for
        serve's Python entry); CWD: where serve (and so the server) runs; PREEXEC_FN: run in
        crashlab's process before it starts (its limits, say)."""
        self.runs = tmp_path / "runs"
        self.out = tmp_path / "crashlab.stdout"
        self.err = tmp_path / "crashlab.stderr"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *entry, "--runs-dir", str(self.runs), *options,
                 "--", *command], stdout=out, stderr=err, env=env, cwd=cwd,
                preexec_fn=preexec_fn)
        self._run_dir: Path | None = None

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            found = wait_for(lambda: [p.parent for p in self.runs.glob("*/manifest.json")],
                             "the run directory")
            self._run_dir = found[0]
        return self._run_dir

    @property
    def incarnation(self) -> Path:
        return self.run_dir / "incarnation-1"

    def manifest(self) -> dict:
        return json.loads((self.run_dir / "manifest.json").read_text())

    def wait_manifest(self, predicate, what: str, timeout: float = DEADLINE) -> dict:
        def check():
            manifest = self.manifest()
            return manifest if predicate(manifest) else None
        return wait_for(check, what, timeout)

    def wait_log(self, text: str, stream: str = "stderr", timeout: float = DEADLINE) -> None:
        path = self.incarnation / f"{stream}.log"
        wait_for(lambda: path.exists() and text in path.read_text(errors="replace"),
                 f"{text!r} in {stream}.log", timeout)

    def wait_healthy(self) -> dict:
        """Healthy, and its children known to crashlab (a child that dies within one tree poll
        of its birth would be seen only as a nameless zombie)."""
        def ready(m):
            if not m["incarnations"]:
                return False
            incarnation = m["incarnations"][-1]
            roles = {p["role"] for p in incarnation["processes"]}
            return incarnation["health"]["state"] == "healthy" and {"scheduler", "detokenizer"} <= roles
        return self.wait_manifest(ready, "a healthy server with its children")

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = DEADLINE) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"crashlab serve did not end within {timeout:g} s:\n{self.stderr}") from None

    @property
    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    @property
    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def report(self) -> dict:
        return json.loads((self.run_dir / "report.json").read_text())


def survivors(manifest: dict) -> list[psutil.Process]:
    """Processes of the run that are still alive (same pid *and* start time)."""
    alive = []
    for incarnation in manifest["incarnations"]:
        for record in incarnation["processes"]:
            started = datetime.fromisoformat(record["started_at"]).timestamp()
            try:
                proc = psutil.Process(record["pid"])
                if abs(proc.create_time() - started) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.NoSuchProcess:
                continue
    return alive


def process(manifest: dict, role: str, ranks: str | None = None, incarnation: int = -1) -> dict:
    matching = [p for p in manifest["incarnations"][incarnation]["processes"]
                if p["role"] == role and (ranks is None or p["ranks"] == ranks)]
    assert len(matching) == 1, (role, ranks, manifest["incarnations"][incarnation]["processes"])
    return matching[0]


#: The prompt post_generate sends (tests look for it in the request dump).
GENERATE_PROMPT = "Hello"


def post_generate(port: int) -> None:
    import requests

    requests.post(f"http://127.0.0.1:{port}/generate", json={"text": GENERATE_PROMPT,
                  "sampling_params": {"max_new_tokens": 3}}, timeout=10)
