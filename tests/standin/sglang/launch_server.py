"""STAND-IN for ``python -m sglang.launch_server`` in crashlab's tests; not SGLang.

What it imitates of SGLang's own server: the command line
(--model-path, --host, --port, --tp-size, --crash-dump-folder, --api-key, --max-total-tokens,
--disaggregation-mode with SGLang's choices null | prefill | decode, printed in its ServerArgs line
and otherwise without effect: no KV cache moves between stand-ins),
one ``sglang::scheduler_TPn`` child per rank plus ``sglang::detokenizer``, GET /health, GET
/server_info, POST /generate, the ``server_args=ServerArgs(...)`` line (secrets included, as
SGLang prints them) and the "ready to roll" line, the SubprocessWatchdog (a child dying makes the main process SIGQUIT
itself), the SIGQUIT crash path (request dump pickle, b"1" into every live scheduler's coredump
pipe, the pre-crash wait of SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS, then SIGKILL of the
tree and itself), and the SIGTERM path (a request dump when unhealthy, then exit 0).

It crashes on cue, set by the test in its environment:
  STANDIN_CRASH      segv | abort | exit | hang | child-segv | scheduler-exception | gpu-fault
                     (default: none)
  STANDIN_CRASH_ON   generate (the first POST /generate, default) | start (once ready)
  STANDIN_SIGTERM    ignore: SIGTERM does nothing (crashlab must escalate to SIGKILL)
  STANDIN_ORPHAN     1: start a daemon that leaves the process group (double fork, setsid)
  STANDIN_EXIT_AFTER_FAULT  1: the main process exits as soon as a rank starts faulting
  STANDIN_LOG_LINES  N: print N numbered lines on stdout at start, as fast as it can
  STANDIN_CRASH_HOOK a Python file that STANDIN_CRASH=exit runs before it raises: a user's
                     plugin whose frames and output end up in the crash's traceback
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOST = os.environ.get("HOSTNAME") or socket.gethostname()


def log(message: str, tags: str = "") -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}{' ' + tags if tags else ''}] {message}", file=sys.stderr, flush=True)


def _request(body: dict):
    """The GenerateReqInput SGLang would have recorded for a /generate body."""
    from sglang.srt.managers.io_struct import GenerateReqInput

    known = {f: body[f] for f in GenerateReqInput.__dataclass_fields__ if f in body}
    return GenerateReqInput(**known).normalize()

class Server:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.crash = os.environ.get("STANDIN_CRASH", "none")
        self.crash_on = os.environ.get("STANDIN_CRASH_ON", "generate")
        self.hung = threading.Event()
        self.finished: list[tuple] = []
        self.crash_dump_performed = False
        self.dumping = False
        self.quit_pending: tuple | None = None
        self.children: dict[str, subprocess.Popen] = {}
        if args.crash_dump_folder:  # SGLang >= 0.5.23 handle_crash_dump_env: only unset ones
            os.environ.setdefault("CUDA_ENABLE_USER_TRIGGERED_COREDUMP", "1")
            os.environ.setdefault("CUDA_COREDUMP_PIPE", "/tmp/corepipe.cuda.%h.%p")

    # -- children --------------------------------------------------------------------------
    def start_children(self) -> None:
        titles = [f"scheduler_TP{rank}" for rank in range(self.args.tp_size)] + ["detokenizer"]
        for title in titles:
            self.children[title] = subprocess.Popen(
                [f"sglang::{title}", str(HERE / "rank.py"), title], executable=sys.executable,
                stdin=subprocess.PIPE, text=True)
        threading.Thread(target=self.subprocess_watchdog, daemon=True).start()

    def order(self, title: str, what: str) -> None:
        child = self.children[title]
        child.stdin.write(what + "\n")
        child.stdin.flush()

    def subprocess_watchdog(self) -> None:
        """SGLang's SubprocessWatchdog: a child's non-zero exit makes the main process SIGQUIT."""
        while True:
            for title, child in self.children.items():
                code = child.poll()
                if code not in (None, 0):
                    log(f"Subprocess {title} (pid={child.pid}) crashed with exit code {code}. "
                        "Triggering SIGQUIT for cleanup...")
                    os.kill(os.getpid(), signal.SIGQUIT)
                    return
            time.sleep(1.0)

    # -- crash paths ---------------------------------------------------------------------
    def dump_requests_before_crash(self) -> None:
        if self.crash_dump_performed or not self.args.crash_dump_folder:
            return
        self.crash_dump_performed = self.dumping = True
        log(f"Dumping requests before crash. self.crash_dump_folder={self.args.crash_dump_folder!r}")
        folder = Path(self.args.crash_dump_folder) / HOST
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash_dump_{time.strftime('%Y-%m-%d_%H-%M-%S')}.pkl"
        records = [(_request(body), out, created, finished)
                   for body, out, created, finished in self.finished]
        with open(path, "wb") as f:
            pickle.dump({"server_args": None, "requests": records,
                         "launch_command": " ".join(sys.argv)}, f)
        log(f"Dumped {len(self.finished)} finished and 0 unfinished requests before crash to {path}")
        self.dumping = False
        if self.quit_pending is not None:
            self.sigquit(*self.quit_pending)

    def sigquit(self, signum, frame) -> None:
        if self.dumping:  # the watchdog's SIGQUIT (a child died of the same SIGTERM) waits for the
            self.quit_pending = (signum, frame)  # dump: its handler ends in kill_process_tree
            return
        log(f"SIGQUIT received. signum={signum}, frame={frame}. It usually means one child failed.")
        self.dump_requests_before_crash()
        pipe_template = os.environ.get("CUDA_COREDUMP_PIPE", "")
        for title, child in self.children.items():
            if title.startswith("scheduler") and child.poll() is None:
                pipe = pipe_template.replace("%h", socket.gethostname()).replace("%p", str(child.pid))
                try:
                    fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
                    os.write(fd, b"1")
                    os.close(fd)
                except OSError:
                    log(f"CUDA coredump pipe not found for {title}")
        wait = float(os.environ.get("SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS", "1"))
        log(f"Waiting {wait} seconds for CUDA coredumps before exiting.")
        time.sleep(wait)
        self.kill_process_tree()

    def kill_process_tree(self) -> None:
        log("kill_process_tree called")
        for child in self.children.values():
            child.kill()
        os.kill(os.getpid(), signal.SIGKILL)

    def sigterm(self, signum, frame) -> None:
        if self.hung.is_set():  # SGLang's sigterm_watchdog: dump when the server is UnHealthy
            self.dump_requests_before_crash()
        for child in self.children.values():
            child.kill()
        os._exit(0)

    def crash_now(self) -> None:
        log(f"stand-in crashing on cue: {self.crash}")
        if self.crash == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif self.crash == "abort":
            os.abort()
        elif self.crash == "exit":
            try:
                if os.environ.get("STANDIN_CRASH_HOOK"):
                    runpy.run_path(os.environ["STANDIN_CRASH_HOOK"])
                raise RuntimeError("stand-in: model weights are garbage")
            except Exception:
                import traceback
                traceback.print_exc()
            os._exit(3)
        elif self.crash == "hang":
            self.hung.set()
        elif self.crash == "child-segv":
            self.order("scheduler_TP0", "segv")
        elif self.crash == "scheduler-exception":
            self.order("scheduler_TP0", "raise")
        elif self.crash == "gpu-fault":
            self.order("scheduler_TP0", "gpu-fault")
            if os.environ.get("STANDIN_EXIT_AFTER_FAULT") == "1":
                time.sleep(0.3)  # the rank is writing its dump now
                log("main process exiting while a rank writes its coredump")
                os._exit(1)

    # -- HTTP ---------------------------------------------------------------------------
    def handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the log to what SGLang would print
                pass

            def _reply(self, code: int, body) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if server.hung.is_set():
                    time.sleep(3600)
                if self.path == "/health":
                    self._reply(200, {})
                elif self.path == "/server_info":
                    self._reply(200, {"model_path": server.args.model_path, "tp_size": server.args.tp_size,
                                      "api_key": server.args.api_key, "max_total_num_tokens": 4096,
                                      "tokenizer_path": server.args.model_path, "version": "stand-in"})
                else:
                    self._reply(404, {"error": {"message": "not found"}})

            def do_POST(self):
                if server.hung.is_set():
                    time.sleep(3600)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                created = time.time()
                out = {"text": " stand-in output", "meta_info": {"completion_tokens": 3}}
                server.finished.append((body, out, created, time.time()))
                self._reply(200, out)
                if server.crash != "none" and server.crash_on == "generate":
                    server.crash_now()

        return Handler

    def run(self) -> None:
        signal.signal(signal.SIGQUIT, self.sigquit)
        if os.environ.get("STANDIN_SIGTERM") == "ignore":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, self.sigterm)
        lines = int(os.environ.get("STANDIN_LOG_LINES", "0"))
        if lines:
            out = sys.stdout
            for number in range(1, lines + 1):
                out.write(f"flood line {number:07d} the quick brown fox jumps over the lazy dog\n")
            out.flush()
        if os.environ.get("STANDIN_ORPHAN") == "1":
            start_orphan()
        self.start_children()
        httpd = ThreadingHTTPServer((self.args.host, self.args.port), self.handler())
        httpd.daemon_threads = True
        arguments = {**vars(self.args), "tokenizer_path": self.args.model_path}
        log(f"server_args=ServerArgs({', '.join(f'{name}={value!r}' for name, value in arguments.items())})")
        log("The server is fired up and ready to roll!")
        if self.crash != "none" and self.crash_on == "start":
            threading.Thread(target=self.crash_now, daemon=True).start()
        httpd.serve_forever(poll_interval=0.1)


def start_orphan() -> None:
    """A daemon that leaves the process group and its parent: only a subreaper still sees it."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            Path(os.environ["STANDIN_ORPHAN_PIDFILE"]).write_text(str(os.getpid()))
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(60)
        os._exit(0)
    os.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="sglang.launch_server (stand-in)")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--crash-dump-folder")
    parser.add_argument("--api-key")
    parser.add_argument("--max-total-tokens", type=int)
    parser.add_argument("--disaggregation-mode", choices=("null", "prefill", "decode"), default="null")
    Server(parser.parse_args()).run()


if __name__ == "__main__":
    main()
