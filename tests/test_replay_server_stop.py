"""replay's ManagedServer stops the whole command, as the command would stop itself: a shell
that does not exec (dash with a compound command) ends at SIGTERM at once, while what it started
(a launcher, crashlab serve) is still stopping its own children; the SIGKILL waits for them."""

from __future__ import annotations

import sys
import textwrap

import psutil

from crashlab.replay.server import ManagedServer
from tests.conftest import free_port

#: A server that answers /health and, at SIGTERM, takes a while to stop and says it did.
SLOW_STOPPER = textwrap.dedent('''
    import signal, sys, threading, time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Health(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", int(sys.argv[1])), Health)

    def stop(*_):
        time.sleep(1.0)  # a launcher stopping its children
        open(sys.argv[2], "w").write("stopped cleanly")
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while True:
        time.sleep(0.1)
''')


def test_stop_lets_what_the_shell_started_finish_stopping(tmp_path):
    script = tmp_path / "slow_stopper.py"
    script.write_text(SLOW_STOPPER)
    said = tmp_path / "said"
    port = free_port()
    # "; true" keeps the shell alive beside the server: it cannot exec it
    command = f"{sys.executable} {script} {port} {said}; true"
    server = ManagedServer(command, f"http://127.0.0.1:{port}", tmp_path / "server.log",
                           start_timeout=20)
    child = server.start()
    group = [process for process in psutil.Process(child.pid).children(recursive=True)]
    server.stop()
    assert said.read_text() == "stopped cleanly"
    assert not [process for process in group if process.is_running()
                and process.status() != psutil.STATUS_ZOMBIE]
