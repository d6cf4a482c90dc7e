"""Advice: what to do next about a crash (drain its GPU, apply a workaround, restart, stop), and
the one reason it rests on; the index, serve and the views all carry this one object."""

from __future__ import annotations

from ..published import ClosedModel as _Model
from ..vocabulary import AdviceAction


class Advice(_Model):
    """What to do next about this crash, and why (crashlab.advice decides it)."""

    action: AdviceAction
    """drain: take the GPU out of service (a hardware Xid, or crashes of different signatures on
    one GPU); workaround: apply the known workaround or upgrade; restart: start the server again
    as it was (a software fault with no released fix); stop: do not restart (a crash loop, or a
    signature the known-fixes table marks fatal)."""
    reason: str
    """The evidence the action rests on, in one sentence."""
    gpu: str | None = None
    """drain: the GPU to take out of service, as the operator acts on it: its PCI address with
    its nvidia-smi index and CUDA_VISIBLE_DEVICES index where the run knows them (``PCI
    0000:3a:00.0 (nvidia-smi index 2, CUDA_VISIBLE_DEVICES index 0)``), else the PCI address the
    Xid line names, or the UUID the index knows its crashes by; null otherwise."""
    workaround: str | None = None
    """workaround: the flag, setting or release to apply; null otherwise."""
    link: str | None = None
    """Where the workaround or fix is described (an http(s) address); null where none is."""


def advice_line(advice: Advice) -> str:
    """``drain GPU-1234: Xid 79 ...``, ``workaround: --disable-cuda-graph (LINK): ...``: the
    action first, what it applies to, then the reason."""
    head = {"drain": f"drain {advice.gpu}" if advice.gpu else "drain the GPU",
            "workaround": f"apply {advice.workaround}" if advice.workaround else "apply a workaround",
            "restart": "restart", "stop": "stop restarting"}[advice.action]
    link = f" ({advice.link})" if advice.link else ""
    return f"{head}{link}: {advice.reason}"
