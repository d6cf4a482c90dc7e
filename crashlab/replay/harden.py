"""The hardened replay profile (--harden): run --restart-cmd so that a silent corruption faults
at its first bad write instead of crashing later somewhere else (or not at all).

  sanitizer  the command runs under ``compute-sanitizer --tool memcheck --target-processes all
             --generate-coredump``: every out-of-bounds or misaligned access is reported with
             its kernel, and a GPU coredump written (the sanitizer disables the driver's own
             coredumps, CUDA_ENABLE_COREDUMP_ON_EXCEPTION, unless asked for its own); all
             processes, because SGLang's schedulers are children of the launcher.
  sglang     SGLang's own debug switches: SGLANG_DEBUG_POISON_POOL=1 (the KV pool filled with
             bf16 NaNs at start, so a read of never-written slots is not silently zero),
             SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY=1 / _IDLE=1 (the pool's accounting checked
             every step), and ``--kv-canary raise`` appended to the command (SGLang builds with
             the KV canary raise at the first canary violation; older ones refuse the argument).
  all        both.
"""

from __future__ import annotations

import shlex

from ..errors import EnvironmentProblem
from ..hardening import PROFILES
from ..toolpath import find_cuda_tool
from .result import Harden

# --generate-coredump is a bare switch: compute-sanitizer 2025.3.1 (CUDA 13.0) refuses a value
# after it ("extra yes detected on the input command line"; seen on an H200).
SANITIZER_OPTIONS = ("--tool", "memcheck", "--target-processes", "all", "--generate-coredump")
SGLANG_ENV = {
    "SGLANG_DEBUG_POISON_POOL": "1",
    "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY": "1",
    "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE": "1",
}
SGLANG_ARGS = ("--kv-canary", "raise")


def harden(command: str, profile: str) -> Harden:
    """The command and environment that run ``command`` under ``profile``.

    EnvironmentProblem when the profile needs compute-sanitizer and there is none
    ($CRASHLAB_COMPUTE_SANITIZER, PATH, CUDA_HOME/bin, /usr/local/cuda/bin).
    """
    env: dict[str, str] = {}
    wanted = PROFILES[profile]
    if wanted.sglang:
        env.update(SGLANG_ENV)
        command = f"{command} {shlex.join(SGLANG_ARGS)}"
    if wanted.sanitizer:
        sanitizer, problem = find_cuda_tool("compute-sanitizer", "CRASHLAB_COMPUTE_SANITIZER")
        if sanitizer is None:
            raise EnvironmentProblem(problem or "--harden sanitizer: compute-sanitizer not found "
                                     "(PATH, CUDA_HOME/bin, /usr/local/cuda/bin); install the CUDA "
                                     "toolkit or set CRASHLAB_COMPUTE_SANITIZER")
        command = shlex.join([sanitizer, *SANITIZER_OPTIONS, "/bin/sh", "-c", command])
    return Harden(profile=profile, command=command, env=env)
