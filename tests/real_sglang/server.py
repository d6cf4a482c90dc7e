"""Driving a REAL SGLang 0.5.23 HTTP server on this machine's CPU: how to launch it, what to send
it, and the three ways the tests make it crash through SGLang's own crash path.

The launch line is the one seen working on a 2-core machine with no GPU: the torch-native
attention backend, no CUDA graphs, and a 65,536-token KV cache (without --max-total-tokens the
cache takes 10 GB). ``--enable-custom-logit-processor`` lets a request carry SGLang's own
DisallowedTokensLogitsProcessor; given token 5000 against the model's 1000 logits, it raises
IndexError inside the scheduler: SGLang logs "Scheduler hit an exception", dumps the requests it
holds (that one in flight) and kills its process tree. The other crashes are signals to the
processes SGLang names with setproctitle (``sglang::scheduler``, ``sglang::detokenizer``).

SGLang writes a request dump only if a request arrived in the last 300 s, so every crash comes
after traffic. SGLang waits for CUDA coredumps before exiting (60 s by default); on a machine
with no GPU there are none, so the environment below cuts the wait to one second.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import requests

#: The environment SGLang is started with in these tests (on top of the caller's).
ENVIRONMENT = {"SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS": "1", "TOKENIZERS_PARALLELISM": "false"}
#: Longest a start may take: 21-35 s was seen on 2 idle cores; a loaded CI machine is slower.
START_TIMEOUT = 240.0
#: The request-triggered crash: a token id past the model's 1000-column logits.
OUT_OF_VOCABULARY = 5000
PROMPTS = ("The quick brown fox", "Hello world", "What is the capital of France?",
           "Count with me: one two", "A crash dump holds", "SGLang serves large language models")


#: The key crashed servers are started with (``--api-key``, as production servers are): every request
#: of these helpers carries it, and serve must send it to keep /server_info.
API_KEY = "sk-crashlab-test-3f9a1c0d7e5b4a2c"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def launch_args(env: Path, port: int, *extra: str) -> list[str]:
    return [str(env / "bin" / "python"), "-m", "sglang.launch_server", "--model-path", str(env / "model"),
            "--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
            "--mem-fraction-static", "0.5", "--max-total-tokens", "65536", "--host", "127.0.0.1",
            "--port", str(port), "--enable-custom-logit-processor", "--log-level", "info", *extra]


def shell_command(env: Path, port: int, *extra: str) -> str:
    """The launch line as --restart-cmd takes it (a shell command), with ENVIRONMENT set."""
    variables = " ".join(f"{name}={shlex.quote(value)}" for name, value in ENVIRONMENT.items())
    return f"{variables} exec {shlex.join(launch_args(env, port, *extra))}"


def url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def wait_healthy(port: int, process=None, timeout: float = START_TIMEOUT) -> float:
    """Seconds until /health_generate answered 200 (a generation went through)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode} before it was healthy")
        try:
            if requests.get(f"{url(port)}/health_generate", timeout=5).status_code == 200:
                return time.monotonic() - started
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise AssertionError(f"SGLang did not answer /health_generate within {timeout:.0f} s")


def generate(port: int, prompt: str, max_new_tokens: int = 8, timeout: float = 120, **extra) -> dict:
    body = {"text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0,
                                                 **extra.pop("sampling", {})}, **extra}
    answer = requests.post(f"{url(port)}/generate", json=body, timeout=timeout, headers=AUTH)
    answer.raise_for_status()
    return answer.json()


def traffic(port: int, count: int) -> None:
    """``count`` finished temperature-0 requests, four at a time, of varied prompts and lengths."""
    failures: list[str] = []

    def one(index: int) -> None:
        try:
            generate(port, f"{PROMPTS[index % len(PROMPTS)]} {index}", max_new_tokens=4 + index % 9)
        except requests.RequestException as problem:
            failures.append(f"request {index}: {problem}")
    for start in range(0, count, 4):
        batch = [threading.Thread(target=one, args=(index,)) for index in range(start, min(start + 4, count))]
        for thread in batch:
            thread.start()
        for thread in batch:
            thread.join()
    assert not failures, failures


def crash_body(env: Path) -> dict:
    processor = json.loads((env / "logit_processor.json").read_text())["disallowed_tokens"]
    return {"text": "The lazy dog", "custom_logit_processor": processor,
            "sampling_params": {"max_new_tokens": 8, "temperature": 0,
                                "custom_params": {"token_ids": [OUT_OF_VOCABULARY]}}}


@dataclass(frozen=True)
class LongRequest:
    """The background request: its thread, and whether its stream ran to SGLang's ``[DONE]``
    (it finished). On a loaded machine it can finish before a crash sent after its first token
    reaches the scheduler; the tests then expect it finished in the dump, not in flight."""

    thread: threading.Thread
    finished: threading.Event


def background(port: int, prompt: str = "Hello world, this is long", tokens: int = 400) -> LongRequest:
    """A long request left running (in flight when the crash comes); its failure is expected.

    Streamed, and returned once its first tokens came back: the crash is then made while it is
    surely decoding. A fixed pause did not do that: on an idle machine the tiny model decodes
    its 400 tokens (near its 512 positions) in about half a second, and the request had
    finished before a crash made 0.5 s after it was sent."""
    decoding, finished = threading.Event(), threading.Event()

    def run() -> None:
        body = {"text": prompt, "stream": True,
                "sampling_params": {"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True}}
        try:
            with requests.post(f"{url(port)}/generate", json=body, timeout=120, headers=AUTH,
                               stream=True) as answer:
                for line in answer.iter_lines():
                    if line.startswith(b"data:"):
                        decoding.set()
                    if line.strip() == b"data: [DONE]":
                        finished.set()
        except requests.RequestException:
            pass
        finally:
            decoding.set()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not decoding.wait(timeout=60):
        raise AssertionError("the long background request got no token within 60 s")
    return LongRequest(thread, finished)


def raise_in_scheduler(env: Path, port: int) -> LongRequest:
    """The request-triggered crash, sent while another request is still decoding."""
    running = background(port)
    with contextlib.suppress(requests.RequestException):  # the server may drop it as it dies
        requests.post(f"{url(port)}/generate", json=crash_body(env), timeout=60, headers=AUTH)
    running.thread.join(timeout=60)
    return running


def role_process(root_pid: int, role: str, timeout: float = 30.0) -> psutil.Process:
    """The process SGLang titled ``sglang::<role>...`` under ``root_pid``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(root_pid).children(recursive=True):
            try:
                if child.cmdline()[:1] and child.cmdline()[0].startswith(f"sglang::{role}"):
                    return child
            except psutil.Error:
                continue
        time.sleep(0.2)
    raise AssertionError(f"no sglang::{role} process under pid {root_pid}")
