"""Kernels a rank waits in when a peer died: NCCL's, SGLang's custom all-reduce, and anything
named like a collective. A name heuristic: serve's triage and the signatures say it is one."""

from __future__ import annotations

import re

from ..report.model import Kernel, TriageReport

COLLECTIVE_KERNEL = re.compile(r"nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
                               r"all2all|cross_device_reduce|custom_ar", re.IGNORECASE)


def collectives(report: TriageReport) -> list[Kernel]:
    """The dump's resident kernels that are collectives (by name), in the report's order."""
    return [kernel for kernel in report.kernels if COLLECTIVE_KERNEL.search(kernel.mangled + kernel.name)]
