"""The CUDA coredump environment a supervised server runs with, and who chose each value.

The driver reads these variables once, at CUDA initialisation, so they must be in the server's
environment from the start (cuda-gdb documentation, "GPU core dump support"). A value the user
already exported wins; the manifest records, for each variable, whose value is in force.

Two choices exist only because of SGLang >= 0.5.23, which fills in *unset* coredump variables
itself when ``--crash-dump-folder`` is given (``handle_crash_dump_env`` uses ``key in
os.environ``): ``--coredump off`` therefore sets CUDA_ENABLE_COREDUMP_ON_EXCEPTION=0 rather than
leaving it unset, and ``--coredump full`` sets CUDA_COREDUMP_GENERATION_FLAGS to the empty
string (no skip flag) rather than leaving SGLang to choose the lightweight flags.
"""

from __future__ import annotations

import glob
import socket
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

LIGHTWEIGHT_FLAGS = ("skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,"
                     "skip_local_memory,skip_constbank_memory")
DUMP_NAME = "core.%h.%p.%t.nvcudmp"
PIPE_NAME = "corepipe.cuda.%h.%p"

ENABLE = "CUDA_ENABLE_COREDUMP_ON_EXCEPTION"
PROGRESS = "CUDA_COREDUMP_SHOW_PROGRESS"
FILE = "CUDA_COREDUMP_FILE"
FLAGS = "CUDA_COREDUMP_GENERATION_FLAGS"
USER_TRIGGER = "CUDA_ENABLE_USER_TRIGGERED_COREDUMP"
PIPE = "CUDA_COREDUMP_PIPE"
#: Python prints every thread's stack into stderr.log on SIGSEGV/SIGABRT/SIGBUS/SIGFPE/SIGILL.
#: A value the user exported, even an empty one (which Python reads as off), is theirs and kept.
FAULTHANDLER = "PYTHONFAULTHANDLER"


class CoredumpMode(str, Enum):
    LIGHTWEIGHT = "lightweight"
    FULL = "full"
    OFF = "off"


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    set_by: str  # "crashlab" or "user"
    crashlab_value: str | None = None  # what crashlab would have set, where the user's won

    def as_manifest(self) -> dict:
        entry = {"value": self.value, "set_by": self.set_by}
        if self.crashlab_value is not None:
            entry["crashlab_value"] = self.crashlab_value
        return entry


def wanted(mode: CoredumpMode, user_dumps: bool, incoming: Path, pipes: Path) -> dict[str, str]:
    """What crashlab would set, before looking at the user's environment."""
    if mode is CoredumpMode.OFF:
        return {ENABLE: "0", FAULTHANDLER: "1"}
    values = {
        FAULTHANDLER: "1",
        ENABLE: "1",
        PROGRESS: "1",
        FILE: str(incoming / DUMP_NAME),
        FLAGS: LIGHTWEIGHT_FLAGS if mode is CoredumpMode.LIGHTWEIGHT else "",
        PIPE: str(pipes / PIPE_NAME),
    }
    if user_dumps:
        values[USER_TRIGGER] = "1"
    return values


def resolve(base: dict[str, str], mode: CoredumpMode, user_dumps: bool, incoming: Path,
            pipes: Path, also: dict[str, str] | None = None,
            spellings: dict[str, str] | None = None) -> tuple[dict[str, str], list[Setting]]:
    """The server's environment and, per variable crashlab wants (the coredump ones, and ALSO:
    the hang sources' of crashlab.supervise.hangsources), whose value is in force. SPELLINGS
    maps a name to another name of the same setting (an older release's): a value the user gave
    under either is theirs, recorded under the name they used."""
    env = dict(base)
    settings: dict[str, Setting] = {}
    for name, value in {**wanted(mode, user_dumps, incoming, pipes), **(also or {})}.items():
        given = name if name in base else (spellings or {}).get(name)
        if given is not None and given in base:
            if given not in settings:
                settings[given] = Setting(given, base[given], "user",
                                          crashlab_value=value if base[given] != value else None)
        else:
            env[name] = value
            settings[name] = Setting(name, value, "crashlab")
    return env, list(settings.values())


def template_glob(template: str, host: str | None = None) -> str | None:
    """A glob matching the paths the driver makes from a CUDA_COREDUMP_FILE or _PIPE template.

    None where no file can be watched: the ``| command`` form pipes the dump elsewhere.
    """
    if not template or template.lstrip().startswith("|"):
        return None
    host = host or socket.gethostname()
    pattern = glob.escape(template).replace("%h", glob.escape(host))
    return pattern.replace("%p", "*").replace("%t", "*")
