"""Session fixtures for the `sglang` tests: the real SGLang environment, and real crashes of a real
server under ``crashlab serve``, each made once per session and shared by the modules that read it
(a start costs 20-40 s of a 2-core machine, so the tier starts as few servers as it can).

Without the environment the tests skip, saying how to build it; under CI (``CI`` set, as
.ci/run is run) they fail instead, since .ci/run builds it first.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.real_sglang import env, server
from tests.serve_harness import Serve, survivors

#: Requests that finish before each crash: "dozens", for the minimiser to shrink.
TRAFFIC = 30
#: Seconds between the last of them and the crash. A replay sends each request at its recorded
#: time whether or not the server keeps up; on a loaded machine a request recorded as finished
#: just before the crash may still be running when the replayed crash comes. This margin keeps
#: "every finished request is answered in the replay" true on a busy 2-core CI machine.
QUIET_BEFORE_CRASH = 3.0
#: The crashes the tests make: a request that raises in the scheduler, and signals to the
#: processes SGLang titles ``sglang::scheduler`` and ``sglang::detokenizer``. The crash signal
#: goes to the detokenizer: the scheduler calls faulthandler.enable(), and once (CI, heavy load)
#: a SIGSEGV sent to it printed "Fatal Python error: Segmentation fault" and left SGLang up and
#: unhealthy instead of dead, which SGLang's watchdog never reported.
KINDS = {"exception": None, "scheduler-SIGKILL": ("scheduler", signal.SIGKILL),
         "detokenizer-SIGSEGV": ("detokenizer", signal.SIGSEGV)}


@pytest.fixture(scope="session")
def sglang_env() -> Path:
    where = env.ready()
    if where is None:
        why = f"no real SGLang environment at {env.folder()} (build it with .ci/get-sglang)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return where


def server_environment() -> dict[str, str]:
    """The test process's environment without CUDA_/SGLANG_ settings, plus server.ENVIRONMENT."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "SGLANG_"))}
    return {**kept, **server.ENVIRONMENT}


@dataclass
class CrashedRun:
    """One ``crashlab serve`` run of the real server, from launch to report, and its timings."""

    kind: str
    serve: Serve
    exit_code: int
    start_s: float
    crash_to_report_s: float
    #: the long background request ran to its end before the crash (a loaded machine)
    long_request_finished: bool

    @property
    def manifest(self) -> dict:
        return self.serve.manifest()

    @property
    def report(self) -> dict:
        return self.serve.report()

    @property
    def request_dump(self) -> Path:
        [record] = self.report["incidents"][0]["request_dumps"]
        return self.serve.run_dir / record["path"]


def crash(kind: str, sglang: Path, work: Path) -> CrashedRun:
    port = free_port()
    launch = server.launch_args(sglang, port, "--api-key", server.API_KEY)
    started = time.monotonic()
    serve = Serve(work, launch, "--health-interval", "1", "--no-debugger", "--quiet",
                  env=server_environment())
    try:
        serve.wait_manifest(lambda m: m["incarnations"] and
                            m["incarnations"][-1]["health"]["state"] == "healthy",
                            "crashlab to see the real server healthy", timeout=server.START_TIMEOUT)
        server.wait_healthy(port, serve.proc)
        start_s = time.monotonic() - started
        server.traffic(port, TRAFFIC)
        time.sleep(QUIET_BEFORE_CRASH)
        triggered = time.monotonic()
        if KINDS[kind] is None:
            long_request = server.raise_in_scheduler(sglang, port)
        else:
            role, signum = KINDS[kind]
            target = server.role_process(serve.proc.pid, role)
            long_request = server.background(port)
            target.send_signal(signum)
        exit_code = serve.finish(timeout=server.START_TIMEOUT)
        long_request.thread.join(timeout=60)
        return CrashedRun(kind=kind, serve=serve, exit_code=exit_code, start_s=start_s,
                          crash_to_report_s=time.monotonic() - triggered,
                          long_request_finished=long_request.finished.is_set())
    except BaseException:
        if serve.proc.poll() is None:
            serve.signal(signal.SIGINT)
            try:
                serve.finish(timeout=120)
            finally:  # a crashlab that had to be killed leaves the server to the test
                for survivor in survivors(serve.manifest()):
                    survivor.kill()
        raise


@pytest.fixture(scope="session")
def sglang_crash(sglang_env, tmp_path_factory):
    """sglang_crash(kind) -> CrashedRun, made on first use and kept for the session."""
    made: dict[str, CrashedRun] = {}

    def get(kind: str) -> CrashedRun:
        if kind not in made:
            made[kind] = crash(kind, sglang_env, tmp_path_factory.mktemp(f"sglang-{kind}"))
        return made[kind]
    return get
