"""A git repository built for crashlab bisect around the stand-in SGLang server
(tests/sglang_server.py): each commit's app.py execs the stand-in, failing with a crash line on
request 1000 as that commit makes it, every start or every other one (flaky). SYNTHETIC: the
history is made by the tests and benchmarks/bench_bisect.py, nothing is downloaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent

CRASH = "RuntimeError: CUDA error: an illegal memory access was encountered"
OTHER = "RuntimeError: CUDA error: device-side assert triggered"
#: the crash commit's subject: outside text, markup and a terminal escape that must print inert
HOSTILE = "kernel: a wider tile [red]x[/red] \x1b[2J"
#: Oracle settings that keep a bisect's runs short (the defaults suit a real GPU server), and one
#: clean run per good verdict: the few --repeat runs the tests make on --bad leave the crash's
#: rate so uncertain that 95% confidence would take up to --max-runs' 30 clean runs a step. A
#: test of those statistics gives its own --max-runs after these (the last one counts).
#: (a /health answer may take seconds on a loaded 2-core machine: serve must not take the
#: stand-in for hung and stop it, which would skip a step for the wrong reason)
FAST = ["--health-interval", "0.2", "--health-timeout", "10", "--settle", "0.3",
        "--start-timeout", "30", "--max-runs", "1"]
#: app.py of a commit whose server cannot start: Python refuses to compile it.
SYNTAX_ERROR = "settings = dict(\n    port=30000,\n"
#: the line Python ends with on it
SYNTAX_ERROR_LINE = "SyntaxError: '(' was never closed"

#: app.py at each commit: the stand-in fails with CRASH_LINE on request 1000 when set (on every
#: other start when FLAKY), counting its starts in the file --starts names.
APP = '''"""The server under bisect: the stand-in SGLang server, failing as this commit makes it."""
import argparse
import os
import sys
from pathlib import Path

CRASH_LINE = {crash!r}
FLAKY = {flaky!r}

parser = argparse.ArgumentParser()
parser.add_argument("--port", required=True)
parser.add_argument("--starts", required=True)
options = parser.parse_args()
starts = Path(options.starts)
count = int(starts.read_text()) + 1 if starts.exists() else 1
starts.write_text(str(count))
command = [sys.executable, {standin!r}, "--port", options.port]
if CRASH_LINE and (not FLAKY or count % 2 == 0):
    command += ["--die-on", "1000", "--crash-line", CRASH_LINE]
os.execv(sys.executable, command)
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(repo: Path, subject: str, crash: str | None = None, flaky: bool = False,
           touch: str | None = None) -> str:
    """Commit app.py failing as asked (and ``touch``, a file holding the subject); its hash."""
    (repo / "app.py").write_text(APP.format(crash=crash, flaky=flaky,
                                            standin=str(ROOT / "tests" / "sglang_server.py")))
    if touch:
        (repo / touch).write_text(subject + "\n")
    return commit_all(repo, subject)


def broken(repo: Path, subject: str) -> str:
    """Commit an app.py that raises SyntaxError as the server starts; its hash."""
    (repo / "app.py").write_text(SYNTAX_ERROR)
    return commit_all(repo, subject)


def commit_all(repo: Path, subject: str) -> str:
    """Commit whatever the work tree holds now, as a test author; its hash."""
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=Test", "-c", "user.email=test@example.invalid", "commit",
        "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


def launch(repo: Path, port: int, starts: Path) -> list[str]:
    """The words after ``--``: the repository's app.py on ``port``, counting its starts."""
    return [sys.executable, str(repo / "app.py"), "--port", str(port), "--starts", str(starts)]


def live_children() -> list[psutil.Process]:
    """This test process's descendants still running (zombies aside): what a bisect, which
    stops every server it starts, must leave none of."""
    return [child for child in psutil.Process().children(recursive=True)
            if child.status() != psutil.STATUS_ZOMBIE]
