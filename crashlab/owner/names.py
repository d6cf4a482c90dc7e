"""The kernel names' known prefixes: which artifact a name says built it.

A data table, read against the demangled name with its return type taken off. Each row says
where its pattern was seen. CUTLASS's ``cutlass::device_kernel`` is a template every library
instantiates: it names 'cutlass' only where no other kernel of its module image names the
library it was built into (crashlab.owner.decide reads the image's other names first).
"""

from __future__ import annotations

import re

#: The artifact where nothing the crash left names one; no known fix is in it.
UNKNOWN = "unknown"
#: (pattern, artifact, where the pattern was seen)
KERNEL_PREFIXES: tuple[tuple[str, str, str], ...] = (
    (r"flashinfer::", "flashinfer", "flashinfer's csrc/ and include/flashinfer/: namespace flashinfer"),
    (r"vllm::", "vllm", "vllm 0.33.0's _C_stable_libtorch cubins (fixtures/cubins/production)"),
    (r"expert_specialization::", "sgl-kernel",
     "sglang-kernel 0.4.10's sm100/common_ops cubins (fixtures/cubins/production)"),
    # vllm's copy of this kernel lives in namespace vllm (csrc/attention/merge_attn_states.cu);
    # sgl-kernel's is at global scope, as in sglang-kernel 0.4.10's sm100/common_ops.
    (r"merge_attn_states_kernel<", "sgl-kernel",
     "sglang-kernel 0.4.10's sm100/common_ops (fixtures/cubins/production)"),
    (r"cudnn_generated_|cudnn::", "cudnn", "cuDNN's generated kernels, as named in vllm#35566"),
    (r"ncclDevKernel_|ncclKernel_", "nccl", "NCCL's device kernels (src/device/generate.py)"),
    (r"at::native::|at::cuda::", "torch", "PyTorch's ATen CUDA kernels (aten/src/ATen/native/cuda)"),
    (r"triton_(poi|red|per|tem|mm|bmm)_", "triton-jit",
     "TorchInductor's generated Triton kernel names (torch/_inductor/codegen)"),
    (r"cutlass::", "cutlass", "CUTLASS templates: instantiated by whichever library holds them"),
)

#: Artifacts a pattern names only when nothing more telling does.
GENERIC = frozenset({"cutlass"})

_COMPILED = tuple((re.compile(pattern), artifact) for pattern, artifact, _ in KERNEL_PREFIXES)
_RETURN_TYPE = re.compile(r"^(void|int|float)\s+")


def bare(name: str) -> str:
    """The demangled name without its return type (``void ns::kernel<...>(...)``)."""
    return _RETURN_TYPE.sub("", name.strip())


def artifact_named(name: str) -> str | None:
    """The artifact the first matching row names, or None."""
    plain = bare(name)
    for pattern, artifact in _COMPILED:
        if pattern.match(plain):
            return artifact
    return None
