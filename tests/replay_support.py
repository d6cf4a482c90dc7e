"""Helpers for the replay tests: run the stand-in SGLang server, build synthetic dumps."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.conftest import ROOT, STANDIN, free_port  # noqa: F401  (re-exported for the tests)

FIXTURES = ROOT / "fixtures" / "sglang_dumps"
MAKE_DUMPS = FIXTURES / "make_dumps.py"
#: Oracle settings that keep a test's replay short (the defaults suit a real GPU server); the
#: stand-in's /health can take seconds to answer on a loaded machine, a hang test sets its own.
FAST_WATCH = ["--health-interval", "0.2", "--health-timeout", "10", "--settle", "0.3"]


def server_command(port: int, *options: str) -> str:
    """The shell command that starts the stand-in server (what --restart-cmd is given)."""
    return shlex.join([sys.executable, "-m", "tests.sglang_server", "--port", str(port), *options])


@dataclass
class Running:
    url: str
    process: subprocess.Popen
    record: Path

    def received(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


def wait_healthy(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"stand-in server at {url} did not come up")


@contextmanager
def standin(tmp_path: Path, *options: str):
    """A stand-in server on a free port for the duration of the block."""
    port = free_port()
    record = tmp_path / f"received-{port}.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "tests.sglang_server", "--port", str(port),
                                "--record", str(record), *options], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield Running(url, process, record)
    finally:
        process.kill()
        process.wait()


def synthetic(tmp_path: Path, count: int, *options: str, name: str = "dump.pkl") -> Path:
    """A synthetic dump (make_dumps.py synthetic): request i's input_ids start with 1000 + i."""
    out = tmp_path / name
    subprocess.run([sys.executable, str(MAKE_DUMPS), "synthetic", "--count", str(count),
                    "--out", str(out), *options], check=True, capture_output=True, cwd=ROOT)
    return out
