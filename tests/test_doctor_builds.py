"""crashlab doctor's build checks on constructed site-packages: crafted METADATA, a
torch/version.py, and real ELF libraries built by gcc (nothing is imported)."""

from __future__ import annotations

from crashlab.env.checks import builds
from crashlab.env.packages import Distributions
from tests.doctor_machine import Tree, distribution, extension, torch


def test_a_torch_every_dependent_accepts_is_ok(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, "2.8.0+cu128")
    distribution(tree.site, "sglang", "0.5.2", ("torch==2.8.0; extra == 'srt'", "requests"))
    distribution(tree.site, "torchvision", "0.23.0", ("torch==2.8.0",))
    outcome = builds.torch_pins(tree.machine())
    assert outcome.status == "ok", outcome
    assert "sglang 0.5.2[srt]" in outcome.message and "torchvision 0.23.0" in outcome.message


def test_a_source_built_torch_fails_the_pins_of_its_dependents(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, "2.8.0a0+git5e1a4b1")
    distribution(tree.site, "sglang", "0.5.2", ("torch==2.8.0; extra == 'srt'",))
    distribution(tree.site, "sgl-kernel", "0.3.9", ("torch==2.8.0",))
    # a pin for another platform is not this machine's
    distribution(tree.site, "vllm", "0.10.1", ("torch==2.7.1; sys_platform == 'win32'",))
    outcome = builds.torch_pins(tree.machine())
    assert outcome.status == "finding"
    assert "a source build" in outcome.message
    assert "sglang 0.5.2[srt] requires torch==2.8.0" in outcome.message
    assert "sgl-kernel 0.3.9 requires torch==2.8.0" in outcome.message
    assert "vllm" not in outcome.message and "pip install" in outcome.fix


def test_one_torch_whose_files_match_its_metadata_is_ok(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, "2.8.0")
    assert builds.torch_duplicates(tree.machine()).status == "ok"


def test_a_second_torch_pulled_in_beside_a_source_build_is_a_finding(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, "2.8.0a0+git5e1a4b1")
    user_site = tmp_path / "user-site"
    distribution(user_site, "torch", "2.7.1")
    machine = tree.machine()
    machine.distributions = Distributions([str(tree.site), str(user_site)])
    outcome = builds.torch_duplicates(machine)
    assert outcome.status == "finding"
    assert "2 torch installs" in outcome.message and "2.7.1" in outcome.message
    assert "torch/version.py of 2.8.0a0+git5e1a4b1" in outcome.message


def test_torch_files_of_another_version_than_its_metadata_are_a_finding(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, "2.8.0a0+git5e1a4b1")
    # pip installed a 2.7.1 wheel's metadata over a source tree's files
    (tree.site / "torch-2.8.0a0+git5e1a4b1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.7.1\n")
    outcome = builds.torch_duplicates(tree.machine())
    assert outcome.status == "finding" and "metadata says 2.7.1" in outcome.message


def test_extensions_whose_torch_symbols_torch_defines_are_ok(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, defines=("_ZN3c104cuda9SetDeviceEi", "aoti_torch_dtype_float32"))
    extension(tree.site / "sgl_kernel" / "common_ops.abi3.so",
              ("_ZN3c104cuda9SetDeviceEi", "cudaLaunchKernel"))  # not torch's: not its business
    extension(tree.site / "torchvision" / "_C_stable.so", ("aoti_torch_dtype_float32",))
    outcome = builds.torch_abi(tree.machine())
    assert outcome.status == "ok", outcome
    assert outcome.message.startswith("2 extension files")


def test_an_extension_built_against_another_torch_is_a_finding(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, "2.9.0", defines=("_ZN3c104cuda9SetDeviceEa",))
    # built against a torch whose SetDevice took an int (the c10 change sglang#18203 ran into)
    extension(tree.site / "sgl_kernel" / "sm90" / "common_ops.abi3.so", ("_ZN3c104cuda9SetDeviceEi",))
    outcome = builds.torch_abi(tree.machine())
    assert outcome.status == "finding"
    assert "common_ops.abi3.so needs 1 torch symbols torch 2.9.0 does not define" in outcome.message
    assert "c10::cuda::SetDevice(int) (_ZN3c104cuda9SetDeviceEi)" in outcome.message
    assert "sgl-kernel" in outcome.fix


def test_deep_eps_top_level_extension_is_read_too(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, defines=("_ZN3c104cuda9SetDeviceEi",))
    extension(tree.site / "deep_ep_cpp.cpython-311-x86_64-linux-gnu.so", ("_ZN2at4_ops5empty4callEv",))
    outcome = builds.torch_abi(tree.machine())
    assert outcome.status == "finding" and "deep_ep_cpp" in outcome.message
    assert "deep-ep" in outcome.fix


def test_no_torch_skips_the_build_checks_with_why(tmp_path):
    machine = Tree(tmp_path).machine()
    for check in (builds.torch_pins, builds.torch_duplicates, builds.torch_abi):
        outcome = check(machine)
        assert outcome.status == "skipped" and "torch is not installed" in outcome.message


def test_an_extension_that_is_not_elf_or_cut_short_is_a_finding_and_the_others_are_still_read(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, "2.9.0", defines=("_ZN3c104cuda9SetDeviceEa",))
    cut = extension(tree.site / "sgl_kernel" / "common_ops.abi3.so", ("_ZN3c104cuda9SetDeviceEa",))
    cut.write_bytes(cut.read_bytes()[:700])  # an interrupted download: the header, then nothing
    (tree.site / "deep_gemm").mkdir()
    (tree.site / "deep_gemm" / "_C.so").write_text("version https://git-lfs.github.com/spec/v1\n")
    extension(tree.site / "torchvision" / "_C.so", ("_ZN3c104cuda9SetDeviceEi",))
    outcome = builds.torch_abi(tree.machine())
    assert outcome.status == "finding", outcome
    assert "torchvision/_C.so needs 1 torch symbols torch 2.9.0 does not define" in outcome.message
    assert "common_ops.abi3.so cannot be read as ELF (" in outcome.message
    assert "deep_gemm/_C.so cannot be read as ELF (" in outcome.message
    assert "reinstall sgl-kernel / sglang-kernel, deep-gemm" in outcome.fix and "torchvision" in outcome.fix


def test_a_torch_library_cut_short_is_a_finding_not_a_library_that_defines_nothing(tmp_path):
    tree = Tree(tmp_path)
    torch(tree.site, "2.9.0", defines=("_ZN3c104cuda9SetDeviceEi",))
    library = tree.site / "torch" / "lib" / "libc10.so"
    library.write_bytes(library.read_bytes()[:700])
    extension(tree.site / "sgl_kernel" / "common_ops.abi3.so", ("_ZN3c104cuda9SetDeviceEi",))
    outcome = builds.torch_abi(tree.machine())
    assert outcome.status == "finding", outcome
    assert f"torch 2.9.0's {library} cannot be read as ELF" in outcome.message
    assert "needs" not in outcome.message and "reinstall torch 2.9.0" in outcome.fix
