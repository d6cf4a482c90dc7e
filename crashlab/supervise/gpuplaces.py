"""What a serve run recorded of its GPUs and ranks, for placing the GPUs its Xid lines name
(crashlab.incidents.xidgpus): the GPU table of environment.json, the incarnation's
CUDA_VISIBLE_DEVICES and launch line (launch.json), and the server's rank-tagged processes.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..env.saved import UnusableEnvironment, load
from ..incidents.xidgpus import RunGpu, RunPlaces, SGLangPlacement
from ..launchline import option_value
from ..report.run import ProcessRecord
from . import rundir

_TP = ("--tp-size", "--tensor-parallel-size", "--tp")
#: Launch options past which SGLang places ranks on GPUs by more than base, step and TP rank.
_SPREAD = ("--dp-size", "--data-parallel-size", "--pp-size", "--pipeline-parallel-size", "--nnodes")


def of_run(run_dir: Path, incarnation: int, processes: list[ProcessRecord]) -> RunPlaces:
    """The run's GPUs and ranks as incarnation INCARNATION launched them; each part left empty
    where its file is missing or damaged (the placement then says what it lacks)."""
    try:
        environment = load(run_dir)
    except UnusableEnvironment:
        environment = None
    gpus = tuple(RunGpu(bus_id=gpu.bus_id, index=gpu.index, uuid=gpu.uuid)
                 for gpu in (environment.gpus if environment is not None else []) if gpu.bus_id)
    launch = _launch(run_dir, incarnation)
    environ = launch.get("environment")
    environ = environ if isinstance(environ, dict) else {}
    argv = [str(a) for a in launch.get("argv") or [] if isinstance(a, str)]
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    return RunPlaces(where=f"the run directory {run_dir}", gpus=gpus,
                     visible=visible if isinstance(visible, str) else None,
                     ranks_by_pid={p.pid: p.ranks for p in processes if p.ranks},
                     sglang=_sglang(argv))


def _launch(run_dir: Path, incarnation: int) -> dict:
    try:
        found = json.loads(rundir.incarnation(run_dir, incarnation).launch.read_bytes())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _sglang(argv: list[str]) -> SGLangPlacement | None:
    """The placement of a single-node SGLang launch with tensor parallelism only; None for
    another command, or one that spreads ranks further (data or pipeline parallel, nodes)."""
    if not any("sglang" in token for token in argv[:4]):
        return None
    if any((option_value(argv, flag) or "1") != "1" for flag in _SPREAD):
        return None
    numbers = [_number(argv, flags) for flags in (_TP, ("--base-gpu-id",), ("--gpu-id-step",))]
    tp, base, step = numbers
    if any(n is not None and n < 0 for n in numbers) or tp == 0 or step == 0:
        return None  # a value that is not a count: SGLang would refuse the launch
    return SGLangPlacement(tp_size=tp or 1, base_gpu_id=base or 0, gpu_id_step=step or 1)


def _number(argv: list[str], flags: tuple[str, ...]) -> int | None:
    for flag in flags:
        value = option_value(argv, flag)
        if value is not None:
            return int(value) if value.isdigit() else -1
    return None
