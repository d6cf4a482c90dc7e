"""Each rule of crashlab/signature/names.py on real kernel names: the production cubins carved from
public wheels (fixtures/cubins/production: sglang-kernel, vllm, CUTLASS 3.x), PyTorch's own CUDA
kernels as libtorch_cuda names them (mangled symbols quoted in public profiler output and tools),
and demangled names as real tools printed them.
"""

from __future__ import annotations

import cxxfilt
import pytest

from crashlab.demangle import demangle
from crashlab.signature.names import LONGEST, RULES, base_name, normalise
from tests.test_production_cubins import CUBIN_FILES, PRODUCTION, kernel_of

cpp_demangle = pytest.importorskip("cpp_demangle")

#: PyTorch's CUDA kernels, mangled as libtorch_cuda exports them.
LAYER_NORM_BUILDS = (  # one kernel from two builds: nvcc hashes each build's file path into the name
    "_ZN2at6native53_GLOBAL__N__1aa0d23f_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_norm_"
    "kernelIN3c108BFloat16EfEEviT0_PKT_S8_S8_PS5_S9_PS6_",
    "_ZN2at6native53_GLOBAL__N__7ae05bd5_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_norm_"
    "kernelIN3c108BFloat16EfEEviT0_PKT_S8_S8_PS5_S9_PS6_")
GELU_HALF = ("_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_18GeluCUDAKernelImplERNS_18Tensor"
             "IteratorBaseENS0_8GeluTypeEENKUlvE0_clEvENKUlvE1_clEvEUlN3c104HalfEE_NS_6detail5Array"
             "IPcLi2EEEEEviT0_T1_")
GELU_BFLOAT16 = ("_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_18GeluCUDAKernelImplERNS_18"
                 "TensorIteratorBaseENS0_8GeluTypeEENKUlvE0_clEvENKUlvE2_clEvEUlN3c108BFloat16EE_NS_"
                 "6detail5ArrayIPcLi2EEEEEviT0_T1_")
CLAMP = ("_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_49_GLOBAL__N__d2ba64fb_16_Tensor"
         "Compare_cu_71e06f4e19launch_clamp_scalarERNS_18TensorIteratorBaseEN3c106ScalarES6_NS0_6"
         "detail11ClampLimitsEENKUlvE_clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_")
COMPARE_SCALAR = ("_ZN2at6native29vectorized_elementwise_kernelILi4EZNS0_21compare_scalar_kernelIdEEvR"
                  "NS_18TensorIteratorBaseENS0_50_GLOBAL__N__e50ef81d_17_CompareKernels_cu_8f1b29aa6"
                  "OpTypeET_EUldE_NS_6detail5ArrayIPcLi2EEEEEviT0_T1_")
SOFTMAX = "_ZN43_GLOBAL__N__b6de9c8c_10_SoftMax_cu_9f978f6320softmax_warp_forwardIfffLi4ELb0ELb0EEEvPT0_PKT_iiiPKbib"
PYTORCH = (*LAYER_NORM_BUILDS, GELU_HALF, GELU_BFLOAT16, CLAMP, COMPARE_SCALAR, SOFTMAX)
#: Demangled names as tools printed them. nvprof (CUDA 11, Windows) leaves nvcc's file namespace
#: as it is; clang's unnamed lambda is $_0 (a clang crash trace); GCC's cold clone of a function
#: (a Ghidra listing of a GCC build).
NVPROF_INDEX_SELECT = ("void at::native::_GLOBAL__N__55_tmpxft_00000694_00000000_15_Indexing_compute_86_"
                       "cpp1_ii_f8340049::indexSelectLargeIndex<__int64, __int64, unsigned int, int=1, "
                       "int=1, int=-2, bool=1>(at::cuda::detail::TensorInfo<__int64, unsigned int>, "
                       "unsigned int, at::cuda::detail<__int64, __int64>, int, int, __int64, __int64, __int64)")
CLANG_CALLBACK = ("void llvm::function_ref<void ()>::callback_fn<clang::driver::CC1Command::Execute("
                  "llvm::ArrayRef<std::__1::optional<llvm::StringRef>>, std::__1::basic_string<char, "
                  "std::__1::char_traits<char>, std::__1::allocator<char>>*, bool*) const::$_0>(long)")
GCC_COLD_CLONE = "CowData<int>::_copy_on_write() [clone .isra.0] [clone .cold]"


def production(cubin: str) -> str:
    return demangle(kernel_of(cubin).symbol.name)


def fired(name: str) -> list[str]:
    return normalise(name)[1]


def test_every_rule_is_named_and_says_what_it_does():
    assert len({rule.name for rule in RULES}) == len(RULES)
    assert all(rule.why for rule in RULES)


def test_return_type_and_parameters_leave_name_and_template_arguments():
    name = production("merge_attn_states.sm_90a.cubin")
    assert name.startswith("void merge_attn_states_kernel<__nv_bfloat16, 128u>(__nv_bfloat16*,")
    assert normalise(name) == ("merge_attn_states_kernel<__nv_bfloat16, 128u>", ["return-type", "parameters"])
    assert normalise(production("ngram_ids.sm_80.cubin")) == (
        "vllm::ngram_embedding::ComputeNGramIdsKernel", ["parameters"])


def test_the_kernels_own_template_arguments_keep_instantiations_apart():
    """The cubin holds the kernel for three dtypes: three names."""
    from elftools.elf.elffile import ELFFile

    with open(PRODUCTION / "merge_attn_states.sm_90a.cubin", "rb") as stream:
        names = {demangle(s.name) for s in ELFFile(stream).get_section_by_name(".symtab").iter_symbols()
                 if s.name.startswith("_Z24merge_attn_states")}
    assert {normalise(name)[0] for name in names} == {
        "merge_attn_states_kernel<__nv_bfloat16, 128u>", "merge_attn_states_kernel<__half, 128u>",
        "merge_attn_states_kernel<float, 128u>"}


def test_cutlass_names_keep_the_operator_and_its_collectives_policies():
    name = production("cutlass_mxfp8_grouped_gemm.sm_100.cubin")
    assert len(name) > 8000
    normal, rules = normalise(name)
    assert normal == ("cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<…>>, "
                      "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm100ArrayTmaUmma"
                      "WarpSpecializedBlockScaled<…>>, cutlass::epilogue::collective::CollectiveEpilogue<"
                      "cutlass::epilogue::Sm100PtrArrayTmaWarpSpecialized<…>>, void, void>")
    assert {"wrapper-kernel", "cutlass-collective", "cute-shapes", "template-depth"} <= set(rules)
    assert base_name(name) == "GemmUniversal"


def test_a_name_still_too_long_keeps_only_the_kernels_own_arguments():
    from elftools.elf.elffile import ELFFile

    with open(PRODUCTION / "cutlass_mxfp8_grouped_gemm.sm_100.cubin", "rb") as stream:
        name = next(demangle(s.name) for s in ELFFile(stream).get_section_by_name(".symtab").iter_symbols()
                    if s.name.startswith("_Z") and "PreComputeKernel" in s.name)
    normal, rules = normalise(name)
    assert "length" in rules and len(normal) <= LONGEST
    assert normal == ("expert_specialization::sm100Mxfp8BlockscaledGroupedGemmPreComputeKernel<"
                      "expert_specialization::Sm100Mxfp8BlockScaledOffsetFunctor<…>, "
                      "expert_specialization::Sm100Mxfp8BlockScaledLayoutFunctor<…>, "
                      "expert_specialization::Sm100Mxfp8BlockScaledStrideFunctor<…>>")


def test_two_builds_of_one_kernel_read_the_same_whatever_nvcc_hashed_into_the_namespace():
    first, second = (demangle(name) for name in LAYER_NORM_BUILDS)
    assert first == second == ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<"
                               "c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 "
                               "const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)")
    assert normalise(first) == ("at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>",
                                ["anonymous-namespace", "return-type", "parameters"])
    assert normalise(demangle(SOFTMAX))[0] == "softmax_warp_forward<float, float, float, 4, false, false>"


def test_nvccs_file_namespace_left_by_the_demangler_is_an_anonymous_namespace():
    normal, rules = normalise(NVPROF_INDEX_SELECT)
    assert normal == ("at::native::indexSelectLargeIndex<__int64, __int64, unsigned int, int=1, int=1, "
                      "int=-2, bool=1>")
    assert rules[:2] == ["nvcc-namespace", "anonymous-namespace"]


def test_lambdas_lose_parameter_types_ordinals_and_operator_call():
    half, bfloat16 = demangle(GELU_HALF), demangle(GELU_BFLOAT16)
    assert "{lambda()#2}::operator()() const::{lambda()#3}::operator()() const::{lambda(c10::Half)#1}" in half
    expected = ("at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl::{lambda}::"
                "{lambda}::{lambda}, at::detail::Array<char*, 2>>")
    assert normalise(half)[0] == expected
    # the same source lambda instantiated for another dtype is the same code
    assert normalise(bfloat16)[0] == expected
    assert "lambda" in fired(half)
    assert normalise(demangle(CLAMP))[0] == ("at::native::vectorized_elementwise_kernel<4, at::native::"
                                            "launch_clamp_scalar::{lambda}::{lambda}::{lambda}, std::array<char*, 2ul>>")
    assert normalise(demangle(COMPARE_SCALAR))[0] == (
        "at::native::vectorized_elementwise_kernel<4, at::native::compare_scalar_kernel<double>::{lambda}, "
        "at::detail::Array<char*, 2>>")


def test_clangs_unnamed_lambda_is_a_lambda():
    normal, rules = normalise(CLANG_CALLBACK)
    assert normal == "llvm::function_ref<void>::callback_fn<clang::driver::CC1Command::Execute::{lambda}>"
    assert "lambda" in rules


def test_clone_suffixes_go():
    assert normalise(GCC_COLD_CLONE) == ("CowData<int>::_copy_on_write", ["clone-suffix", "parameters"])


@pytest.mark.parametrize("mangled", [kernel_of(c).symbol.name for c in CUBIN_FILES
                                     if len(kernel_of(c).symbol.name) <= 1024] + list(PYTORCH),
                         ids=lambda m: m[:40])
def test_both_demanglers_give_one_name(mangled):
    """Names past 1,024 characters are read by cpp_demangle, shorter ones by the C++ runtime; a
    kernel's signature must not depend on which one read it."""
    assert normalise(cxxfilt.demangle(mangled))[0] == normalise(cpp_demangle.demangle(mangled))[0]


def test_the_two_demanglers_do_differ():
    """What the integer-literals and spacing rules are for."""
    mangled = kernel_of("merge_attn_states.sm_90a.cubin").symbol.name
    assert "(unsigned int)128" in cpp_demangle.demangle(mangled) and "128u" in cxxfilt.demangle(mangled)
    assert "integer-literals" in fired(cpp_demangle.demangle(mangled))
    assert "> >" in cxxfilt.demangle(GELU_HALF) and "spacing" in fired(cxxfilt.demangle(GELU_HALF))


def test_a_name_no_demangler_read_is_kept_and_hostile_names_end():
    mangled = kernel_of("cutlass_mxfp8_grouped_gemm.sm_100.cubin").symbol.name
    assert normalise(mangled) == (mangled, ["mangled: no demangler read this name; kept as it is"])
    for hostile in ("f" + "<" * 100_000, "g" + "(" * 50_000 + ")" * 10, "{lambda(" * 10_000, "cute::" * 10_000):
        assert isinstance(normalise(hostile)[0], str)
