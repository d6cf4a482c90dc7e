"""What a serve run recorded of its GPUs and ranks, for placing the GPUs its Xid lines name
(crashlab.incidents.xidgpus): the GPU table of environment.json, the incarnation's
CUDA_VISIBLE_DEVICES and launch line (launch.json), and the server's rank-tagged processes.
"""

from __future__ import annotations

from pathlib import Path

from ..env.saved import UnusableEnvironment, load
from ..incidents.xidgpus import RunGpu, RunPlaces, SGLangPlacement
from ..launchline import SGLANG_DP, SGLANG_PP, SGLANG_TP, RecordedLaunch, option_value
from ..report.run import ProcessRecord
from . import rundir

#: Launch options past which SGLang places ranks on GPUs by more than base, step and TP rank.
_SPREAD = (*SGLANG_DP, *SGLANG_PP, "--nnodes")


def of_run(run_dir: Path, incarnation: int, processes: list[ProcessRecord]) -> RunPlaces:
    """The run's GPUs and ranks as incarnation INCARNATION launched them; each part left empty
    where its file is missing or damaged (the placement then says what it lacks)."""
    try:
        environment = load(run_dir)
    except UnusableEnvironment:
        environment = None
    gpus = tuple(RunGpu(bus_id=gpu.bus_id, index=gpu.index, uuid=gpu.uuid)
                 for gpu in (environment.gpus if environment is not None else []) if gpu.bus_id)
    launch = RecordedLaunch.read(rundir.incarnation(run_dir, incarnation).launch)
    return RunPlaces(where=f"the run directory {run_dir}", gpus=gpus,
                     visible=launch.environment.get("CUDA_VISIBLE_DEVICES"),
                     ranks_by_pid={p.pid: p.ranks for p in processes if p.ranks},
                     sglang=_sglang(launch.argv))


def _sglang(argv: list[str]) -> SGLangPlacement | None:
    """The placement of a single-node SGLang launch with tensor parallelism only; None for
    another command, or one that spreads ranks further (data or pipeline parallel, nodes)."""
    if not any("sglang" in token for token in argv[:4]):
        return None
    if any((option_value(argv, flag) or "1") != "1" for flag in _SPREAD):
        return None
    numbers = [_number(argv, flags)
               for flags in (SGLANG_TP, ("--base-gpu-id",), ("--gpu-id-step",))]
    tp, base, step = numbers
    if any(n is not None and n < 0 for n in numbers) or tp == 0 or step == 0:
        return None  # a value that is not a count: SGLang would refuse the launch
    return SGLangPlacement(tp_size=tp or 1, base_gpu_id=base or 0, gpu_id_step=step or 1)


def _number(argv: list[str], flags: tuple[str, ...]) -> int | None:
    value = option_value(argv, flags)
    if value is None:
        return None
    return int(value) if value.isdigit() else -1
