"""environment.json: the machine as the server is about to start on it.

Taken before the launch, while nothing of the server can have wedged a GPU yet, and in at most
about one tool timeout (the tools run at once, each killed at CRASHLAB_TOOL_TIMEOUT's seconds,
2 by default: crashlab.env.capture.tool_timeout).
Before, not beside: every process crashlab starts once the server runs counts as one of the
server's (the supervisor adopts its orphans as a subreaper), and a capture's nvidia-smi must
not. Its packages are those of the interpreter the launch command runs
(crashlab.env.interpreter.launch_interpreter).
"""

from __future__ import annotations

from pathlib import Path

from ..env import capture
from ..env.host import Host
from ..env.interpreter import launch_interpreter
from ..env.saved import FILE
from ..errors import BadInput
from ..escape import printable
from ..privacy.redact import Redactor
from . import collect, files
from .manifest import ManifestStore
from .options import Notify


def write_environment(run_dir: Path, command: list[str], environ: dict[str, str],
                      redactor: Redactor, store: ManifestStore, notify: Notify) -> None:
    """Capture the environment into run_dir/environment.json and list it in the manifest.
    Nothing here may stop the launch: whatever goes wrong is one warning line."""
    path = run_dir / FILE
    try:
        python = launch_interpreter(command, environ)
        environment = capture(Host(environ=environ), python=python)
        files.write_atomic(path, redactor.serialized(environment.model_dump_json(indent=2)).encode()
                           + b"\n")
    except OSError as exc:
        notify(f"{FILE} not written: {printable(exc.strerror or str(exc))}")
        return
    except BadInput as exc:
        notify(f"{FILE} not written: {printable(str(exc))}")
        return
    except Exception as exc:  # a capture's bug must not cost the user the crash it is for
        notify(f"{FILE} not written: the environment capture failed "
               f"({type(exc).__name__}: {printable(str(exc))}); this is a crashlab bug")
        return
    store.add_files([collect.record(run_dir, path, "environment")])
    for probe in environment.probes:
        if probe.status == "timeout":
            notify(f"environment: {probe.describe()}")
