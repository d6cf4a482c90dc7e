"""The launch command: recognising SGLang, adding its crash-dump folder, finding its health URL.

Any command can be supervised; an SGLang server (``python -m sglang.launch_server``,
``sglang serve``, ``.../sglang/launch_server.py``) additionally gets ``--crash-dump-folder`` so
that its TokenizerManager pickles the last requests before a crash (reference: SGLang's
``dump_requests_before_crash``), and a default health URL: SGLang binds 127.0.0.1:30000 unless
told otherwise.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import BadInput
from ..launchline import option_value

SGLANG_DEFAULT_HOST, SGLANG_DEFAULT_PORT = "127.0.0.1", 30000
CRASH_DUMP_FLAG = "--crash-dump-folder"


def is_sglang(argv: list[str]) -> bool:
    for i, token in enumerate(argv):
        if token == "-m" and i + 1 < len(argv) and argv[i + 1] == "sglang.launch_server":
            return True
        if token.endswith(("sglang/launch_server.py", "sglang/launch_server")):
            return True
        if Path(token).name == "sglang" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return True
    return False


def health_url(argv: list[str], sglang: bool) -> str | None:
    """http://host:port/health from the command's --host/--port, or None when it names no port."""
    port = option_value(argv, "--port")
    if port is None and not sglang:
        return None
    host = option_value(argv, "--host") or SGLANG_DEFAULT_HOST
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port or SGLANG_DEFAULT_PORT}/health"


def check_health_url(url: str | None) -> None:
    """A --health-url must be one requests can poll: http(s), a host; caught before the run."""
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"--health-url {url!r} is not a URL: it needs a scheme and a host, "
                       "e.g. http://127.0.0.1:30000/health")


def base_url(url: str) -> str:
    return url.rsplit("/", 1)[0] if url.count("/") > 2 else url


@dataclass(frozen=True)
class LaunchPlan:
    argv: list[str]
    sglang: bool
    crash_dump_folder: Path | None  # where SGLang will write request dumps
    crash_dump_folder_is_ours: bool


def plan(argv: list[str], requests_dir: Path, cwd: Path) -> LaunchPlan:
    if not argv:
        raise BadInput("serve needs a command to run, after --: "
                       "crashlab serve -- python -m sglang.launch_server --model-path ...")
    if shutil.which(argv[0]) is None:
        raise BadInput(f"{argv[0]}: command not found (or not executable)")
    sglang = is_sglang(argv)
    if not sglang:
        return LaunchPlan(list(argv), False, None, False)
    given = option_value(argv, CRASH_DUMP_FLAG)
    if given is not None:
        return LaunchPlan(list(argv), True, (cwd / given).resolve(), False)
    return LaunchPlan([*argv, CRASH_DUMP_FLAG, str(requests_dir)], True, requests_dir, True)


def _core_limit_to_hard() -> None:
    """In the child only, before exec: the soft core limit up to the hard one, so that a host
    crash leaves a core (crashlab's own limit stays as it was). One syscall, no lock taken."""
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))


def start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """Start the server in a session of its own, its output on pipes crashlab reads.

    Its own session (hence process group) keeps the terminal's Ctrl-C from reaching the server
    directly: crashlab forwards it to the whole group itself, after securing any dump in flight.
    """
    try:
        return subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=_core_limit_to_hard)
    except PermissionError as exc:
        raise BadInput(f"{argv[0]}: cannot be executed ({exc.strerror})") from None
    except FileNotFoundError:
        raise BadInput(f"{argv[0]}: command not found") from None
