"""``crashlab serve`` through its Python entry (crashlab.supervise.serve), for the options the
command line does not take: the kernel log's path (ServeOptions.kernel_log), which a test points
at a FIFO standing in for /dev/kmsg. Run as ``python -m tests.serve_entry --kernel-log PATH
[serve's options used by tests/serve_harness.FAST, --db, --deployment, the --restart options]
-- COMMAND``, in a process of its own as the CLI is (serve makes its process a child
subreaper).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crashlab.supervise import ServeOptions, serve


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs-dir", type=Path, required=True)
    parser.add_argument("--kernel-log", required=True)
    parser.add_argument("--db")
    parser.add_argument("--deployment")
    parser.add_argument("--health-interval", type=float, default=10.0)
    parser.add_argument("--health-timeout", type=float, default=30.0)
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("--restart", default="never")
    parser.add_argument("--max-restarts", type=int, default=3)
    parser.add_argument("--restart-delay", type=float, default=5.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    outcome = serve(ServeOptions(
        command=command, runs_dir=options.runs_dir, kernel_log=options.kernel_log, db=options.db,
        deployment=options.deployment, health_interval=options.health_interval,
        health_timeout=options.health_timeout, grace=options.grace, restart=options.restart,
        max_restarts=options.max_restarts, restart_delay=options.restart_delay, echo=False), print)
    sys.exit(outcome.exit_code)


if __name__ == "__main__":
    main()
