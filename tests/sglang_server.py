"""STAND-IN for an SGLang server (no model, no GPU): a real HTTP server on 127.0.0.1 for tests.

It speaks the part of SGLang's HTTP API that a replay uses (GET /health and /health_generate,
POST /generate plain or streamed as SSE ending in ``data: [DONE]``, POST /encode), answers with
the deterministic rule of tests/standin_model.py, records every request it receives (arrival
time and body, one JSON line each) and fails the way a crashing SGLang does when it has received
a chosen request, or every request of a chosen combination:

  kill   write SGLang's crash lines to stderr and --log, then SIGKILL itself (SGLang ends with -9)
  hang   stop answering anything (a hung scheduler: /health times out)
  log    only write the crash lines to stderr and --log, and keep serving
  core   only drop a file into --core-dir and keep serving
  run    run --run (a program that faults on the GPU, for the gpu tests), then SIGKILL itself

A request matches a marker when its first input id equals it or its text contains it. The real
counterpart is SGLang itself under ``SGLANG_TEST_CRASH_AFTER_STREAM_OUTPUTS`` on a GPU machine.

Like a released SGLang it refuses ``sampling_params.trace_decode_token_ids`` (an unexpected
keyword); with --trace-decode it takes it, as a server with sgl-project/sglang#39157 does, and
emits those tokens first. --launch-record writes its argv and SGLANG_* environment at start (to
test how --restart-cmd was launched); --crash-line replaces the CUDA error line it dies with.

    python -m tests.sglang_server --port 30000 --record seen.jsonl --die-on 1017,1042
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.standin_model import complete, tokenize  # noqa: E402

CRASH_LINES = (
    "[2026-06-01 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    "[2026-06-01 12:00:01] SIGQUIT received. signum=None, frame=None. It usually means one child failed.\n"
)


class StandIn:
    """The server's state: what it has seen, and whether it has failed."""

    def __init__(self, options):
        self.options = options
        self.markers = set(options.die_on.split(",")) if options.die_on else set()
        self.diverge = set(options.diverge_on.split(",")) if options.diverge_on else set()
        self.seen: set[str] = set()
        self.lock = threading.Lock()
        self.hung = threading.Event()
        self.failed = False
        self.started = time.monotonic()
        # Open for the server's whole life: every request is appended as it comes.
        self.record = open(options.record, "a", buffering=1) if options.record else None  # noqa: SIM115

    def matches(self, body: dict, markers: set[str]) -> set[str]:
        ids, text = body.get("input_ids"), body.get("text")
        found = {marker for marker in markers if isinstance(text, str) and marker in text}
        if isinstance(ids, list) and ids and str(ids[0]) in markers:
            found.add(str(ids[0]))
        return found

    def received(self, path: str, body: dict) -> None:
        with self.lock:
            if self.record:
                self.record.write(json.dumps({"t": time.time(), "path": path, "body": body}) + "\n")
            self.seen |= self.matches(body, self.markers)
            trigger = bool(self.markers) and self.seen >= self.markers and not self.failed
            if trigger:
                self.failed = True
        if trigger:
            self.fail()

    def fail(self) -> None:
        how = self.options.die_how
        lines = CRASH_LINES
        if self.options.crash_line:
            lines = CRASH_LINES.replace(CRASH_LINES.splitlines()[1] + "\n",
                                        "".join(line + "\n" for line in self.options.crash_line))
        if how in ("kill", "log"):
            sys.stderr.write(lines)
            sys.stderr.flush()
            if self.options.log:
                with open(self.options.log, "a") as log:
                    log.write(lines)
        if how == "core" and self.options.core_dir:
            Path(self.options.core_dir, f"core.cuda.standin.{os.getpid()}").write_bytes(b"\x7fELF")
        if how == "run":  # a real GPU program faults (the gpu tests' planted-fault binaries)
            import subprocess
            subprocess.run(self.options.run, shell=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "hang":
            self.hung.set()
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)

    def ready(self) -> bool:
        return time.monotonic() - self.started >= self.options.startup_delay


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sglang-standin"
    disable_nagle_algorithm = True  # as uvicorn (asyncio) does: no 40 ms delayed-ACK stalls
    idle_timeout: float | None = None  # --idle-timeout

    def log_message(self, *args):  # quiet: tests read the record file instead
        pass

    def handle(self):
        """Requests until the connection closes, idle-closed (--idle-timeout) only once one was
        answered, as uvicorn's keep-alive timeout: a new connection's first request can be slow
        to come on a loaded machine, and closing it then is no keep-alive close."""
        self.close_connection = True
        self.handle_one_request()
        self.connection.settimeout(self.idle_timeout)
        while not self.close_connection:
            self.handle_one_request()

    @property
    def state(self) -> StandIn:
        return self.server.state

    def hang_if_failed(self) -> None:
        if self.state.hung.is_set():
            threading.Event().wait()  # never answer, like a stuck scheduler

    def reply(self, status: int, payload) -> None:
        data = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.hang_if_failed()
        if self.path in ("/health", "/health_generate"):
            self.reply(200 if self.state.ready() else 503, b"")
        else:
            self.reply(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):
        self.hang_if_failed()
        length = int(self.headers.get("Content-Length") or 0)
        key = self.state.options.api_key
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            self.rfile.read(length)
            return self.reply(401, {"error": "Unauthorized"})  # SGLang's answer without the key
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self.reply(400, {"error": {"message": "body is not JSON"}})
        if self.path not in ("/generate", "/encode"):
            return self.reply(404, {"error": {"message": f"no route {self.path}"}})
        self.state.received(self.path, body)
        self.hang_if_failed()
        ids = body.get("input_ids")
        if ids is None and isinstance(body.get("text"), str):
            ids = tokenize(body["text"])
        if not isinstance(ids, list):
            return self.reply(400, {"error": {"message": "Either text, input_ids or input_embeds "
                                                         "should be provided."}})
        params = body.get("sampling_params") or {}
        if "trace_decode_token_ids" in params and not self.state.options.trace_decode:
            return self.reply(400, {"error": {"message": "SamplingParams.__init__() got an unexpected "
                                                         "keyword argument 'trace_decode_token_ids'"}})
        if isinstance(params.get("max_new_tokens"), int) and params["max_new_tokens"] < 0:
            return self.reply(400, {"error": {"message": "max_new_tokens must be at least 0, got "
                                                         f"{params['max_new_tokens']}."}})
        if self.state.options.latency:
            time.sleep(self.state.options.latency)
        if self.path == "/encode":
            return self.reply(200, {"embedding": [round(0.001 * token, 3) for token in ids[:8]],
                                    "meta_info": {"id": "standin", "prompt_tokens": len(ids)}})
        length = int((body.get("sampling_params") or {}).get("max_new_tokens", 16))
        shift = 1 if self.state.matches(body, self.state.diverge) else 0
        output_ids, _ = complete(ids, length)
        output_ids = [(token + shift) % 1000 for token in output_ids]
        trace = params.get("trace_decode_token_ids") or []
        output_ids = list(trace[:length]) + output_ids[len(trace):]
        text = "".join(chr(97 + token % 26) for token in output_ids)
        if body.get("stream"):
            return self.stream(ids, output_ids, text)
        self.reply(200, {"text": text, "output_ids": output_ids,
                         "meta_info": self.meta(ids, len(output_ids), finished=True)})

    def meta(self, ids, produced: int, finished: bool) -> dict:
        reason = {"type": "length", "length": produced} if finished else None
        return {"id": "standin", "finish_reason": reason, "prompt_tokens": len(ids),
                "completion_tokens": produced, "cached_tokens": 0}

    def stream(self, ids, output_ids, text) -> None:
        """SSE in chunked transfer encoding, each event cumulative as SGLang's default."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = []
        for produced in range(1, len(output_ids) + 1):
            chunk = {"text": text[:produced], "output_ids": output_ids[:produced],
                     "meta_info": self.meta(ids, produced, finished=produced == len(output_ids))}
            events.append(f"data: {json.dumps(chunk)}\n\n")
        events.append("data: [DONE]\n\n")
        for event in events:
            data = event.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="STAND-IN SGLang HTTP server for crashlab's tests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", help="append one JSON line per request received")
    parser.add_argument("--api-key", help="refuse POSTs without this bearer token, as SGLang does")
    parser.add_argument("--die-on", default="", help="markers; fail once all have been received")
    parser.add_argument("--die-how", choices=("kill", "hang", "log", "core", "run"), default="kill")
    parser.add_argument("--run", help="with --die-how run: the command to run, then SIGKILL")
    parser.add_argument("--diverge-on", default="", help="markers whose outputs differ")
    parser.add_argument("--log", help="the server log the crash lines go to")
    parser.add_argument("--core-dir", help="where 'core' drops a coredump file")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--idle-timeout", type=float, default=None,
                        help="close keep-alive connections idle this long (uvicorn: 5 s)")
    parser.add_argument("--startup-delay", type=float, default=0.0,
                        help="seconds of 503 from /health after start (weights loading)")
    parser.add_argument("--trace-decode", action="store_true",
                        help="take sampling_params.trace_decode_token_ids (sglang#39157)")
    parser.add_argument("--crash-line", action="append", default=[],
                        help="the fault line(s) written when failing, instead of the CUDA error")
    parser.add_argument("--launch-record", help="write argv and SGLANG_* environment here at start")
    parser.add_argument("--kv-canary", choices=("off", "log", "raise"), default="off",
                        help="accepted as SGLang builds with the KV canary accept it")
    options = parser.parse_args(argv)
    if options.launch_record:
        env = {key: value for key, value in os.environ.items() if key.startswith("SGLANG_")}
        Path(options.launch_record).write_text(json.dumps({"argv": sys.argv, "env": env}))
    Handler.idle_timeout = options.idle_timeout
    server = Server(("127.0.0.1", options.port), Handler)
    server.state = StandIn(options)
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
