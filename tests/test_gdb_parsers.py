"""The readers of debugger output, on public transcripts of other releases and other programs.

cuda-gdb transcripts here are public ones, quoted from blog posts and NVIDIA's documentation (each
constant names its source): shapes of releases other than 12.4 and of real GPU dumps. Real
cuda-gdb 12.4 transcripts of our own dumps are read in tests/test_gdb_transcripts.py. GNU gdb
output is produced live by real gdb on a real host core. MI records of the -cuda-* commands are
built from the field names in cuda-gdb's source (named where used).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from crashlab.gdb import mi, parse
from crashlab.gdb.driver import Debugger

# vllm-project/vllm-project.github.io _posts/2025-08-11-cuda-debugging.md ("Debugging Improper
# Kernel Launch"): exception first, trigger PC with function, then focus, then frame #0.
VLLM_IMA = """\
Opening GPU coredump: /tmp/cuda_coredump_xxx.1799919.1754898045

CUDA Exception: Warp Illegal Address
The exception was triggered at PC 0x7f31abb9f6d0  illegalMemoryAccessKernel(int*, int)
[Current focus set to CUDA kernel 0, grid 1, block (0,0,0), thread (0,0,0), device 0, sm 124, warp 0, lane 0]
#0  0x00007f31abb9f6e0 in illegalMemoryAccessKernel(int*, int)<<<(1,1,1),(256,1,1)>>> ()
"""

# Same post, "Debugging Kernel Exceptions in CUDA Graphs": a template kernel.
VLLM_GRAPH = """\
(cuda-gdb) target cudacore /tmp/cuda_coredump_flow-matic.1929094.1754901120
Opening GPU coredump: /tmp/cuda_coredump_flow-matic.1929094.1754901120

CUDA Exception: Warp Illegal Address
The exception was triggered at PC 0x7fc2afba5e30  void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>, std::array<char*, 1ul> >(int, at::native::FillFunctor<unsigned char>, std::array<char*, 1ul>)
[Current focus set to CUDA kernel 0, grid 9, block (17454,0,0), thread (0,0,0), device 0, sm 0, warp 1, lane 0]
#0  0x00007fc2afba5e70 in void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>, std::array<char*, 1ul> >(int, at::native::FillFunctor<unsigned char>, std::array<char*, 1ul>)<<<(40960,1,1),(128,1,1)>>> ()
"""

# vllm-project/vllm-project.github.io _posts/2025-12-03-improved-cuda-debugging.md: a
# user-triggered dump of a hang (no exception: focus, then frame with source, then the line).
VLLM_HANG = """\
Opening GPU coredump: /tmp/cuda_coredump_hostname.3000837.1764236276
[Current focus set to CUDA kernel 0, grid 53, block (0,0,0), thread (0,0,0), device 0, sm 124, warp 0, lane 0]
#0  0x00007f2e6fbff300 in conditional_hang_kernel<<<(1,1,1),(128,1,1)>>> () at conditional_hang.py:31
31                  tl.store(x_ptr + offs, x, mask=mask)
"""

# Same post, IMA with -lineinfo: focus FIRST, then the exception; frame #0 without an address,
# wrapped by gdb ("    at ...") and hard-wrapped mid-word by the author's terminal.
VLLM_INLINED = """\
(cuda-gdb) target cudacore /tmp/cuda_coredump_flow-matic.3756036.1764250282
Opening GPU coredump: /tmp/cuda_coredump_flow-matic.3756036.1764250282
[Current focus set to CUDA kernel 0, grid 4, block (0,0,0), thread (0,0,0), device 0, sm 124, warp 3, lane 0]

CUDA Exception: Warp Illegal Address
The exception was triggered at PC 0x7ff533bb91d0  ...
#0  void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<1> >(at
::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<
long>, c10::ArrayRef<long>, at::native::index_kernel_impl<at::native::OpaqueType<1> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayR
ef<long>)::{lambda(char*, char const*, long)#1} const&, bool)::{lambda(int)#1}>(long, at::native::gpu_index_kernel<at::native::index_kernel_imp
l<at::native::OpaqueType<1> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::Ten
sorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_kernel_impl<at::native::OpaqueType<1> >(at::TensorIteratorBase&,
c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&, bool)::{lambda(int)#1})<<<(1,1,1),(128,1,1)>>> ()
    at /data/youkaichao/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:203 in _ZZN2at6native17index_kernel_implINS0_10OpaqueTypeILi1EEEEEvRNS
_18TensorIteratorBaseEN3c108ArrayRefIlEES8_ENKUlPcPKclE_clES9_SB_l inlined from IndexKernel.cu:118
203         *reinterpret_cast<scalar_t*>(out_data) = *reinterpret_cast<const scalar_t*>(in_data + offset);
"""

# zdevito/zdevito.github.io _posts/2022-07-27-cuda-core-dumps.markdown: an older cuda-gdb that
# names no function after the trigger PC; its `info reg` and `disas` output.
ZDEVITO_LOAD = """\
CUDA Exception: Warp Illegal Address
The exception was triggered at PC 0x7ff8b63ce440
[Current focus set to CUDA kernel 0, grid 132575338, block (1240,0,0), thread (0,1,0), device 0, sm 1, warp 62, lane 0]
#0  0x00007ff8b63ce570 in void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 8, false, true>(c10::Half*, c10::Half const*, int, int, int, bool const*, int, bool)<<<(1824,1,1),(32,4,1)>>> ()
"""
ZDEVITO_REGISTERS = """\
R0             0xb8198             754072
R1             0xfffc80            16776320
R2             0xff800000          -8388608
R3             0xff800000          -8388608
R4             0xff800000          -8388608
R5             0x7ff8              32760
R6             0x0                 0
R7             0x2                 2
R8             0x407ce000          1081925632
"""
ZDEVITO_DISAS = """\
    0x00007ff8b63ce420 <+1056>:  IADD3 R8, R6.reuse, 0xc0, RZ
    0x00007ff8b63ce430 <+1072>:  IADD3 R18, R6, 0xe0, RZ
    0x00007ff8b63ce440 <+1088>:  LDG.E.U8.SYS R19, [R2+0xe0]
    0x00007ff8b63ce450 <+1104>:  ISETP.GE.AND P3, PT, R8, R13, PT
"""

# CUDA-GDB documentation (docs.nvidia.com/cuda/cuda-gdb), §8.4 Disassembly: a live exception,
# x/4i with the => marker, disas of $pc and of $errorpc with the *> marker.
DOCS_EXCEPTION = """\
CUDA Exception: Warp Illegal Address
The exception was triggered at PC 0x555555c08620 (memexceptions_kernel.cu:17)
Thread 1 "memexceptions" received signal CUDA_EXCEPTION_14, Warp Illegal Address.
[Switching focus to CUDA kernel 0, grid 1, block (0,0,0), thread (0,0,0), device 0, sm 0, warp 0, lane 0]
0x0000555555c08fb0 in exception_kernel<<<(1,1,1),(1,1,1)>>> (data=0x7fffccc00000, exception=MMU_FAULT) at memexceptions_kernel.cu:50
50 }
"""
DOCS_X4I = """\
0xa689a8 <acos_main(acosParams)+824>: MOV R0, c[0x0][0x34]
0xa689b8 <acos_main(acosParams)+840>: MOV R3, c[0x0][0x28]
0xa689c0 <acos_main(acosParams)+848>: IMUL R2, R0, R3
=> 0xa689c8 <acos_main(acosParams)+856>: MOV R0, c[0x0][0x28]
"""
DOCS_DISAS_ERRORPC = """\
Dump of assembler code from 0x555555c08620 to 0x555555c08630:
*> 0x0000555555c08620 <_Z16exception_kernelPv11exception_t+1056>: ST.E.U8.STRONG.SYS [R6.64], R5
End of assembler dump.
"""
# §8.3.5 and §8.3.4 (info cuda kernels in the older "Name Args" form; info cuda lanes), §8.5.
DOCS_KERNELS = """\
  Kernel Parent Dev Grid Status   SMs Mask GridDim  BlockDim Name Args
*      1      -   0    2 Active 0x00ffffff (240,1,1) (128,1,1) acos_main parms=...
"""
DOCS_LANES = """\
  Ln State  PC                 ThreadIdx Exception
Device 0 SM 0 Warp 0
*  0 active 0x00007fffc725dad0 (0,0,0)   None
   1 active 0x00007fffc725dad0 (1,0,0)   None
"""
DOCS_REGISTERS = """\
R0             0xf0                240
R1             0xfffc48            16776264
R2             0x7800              30720
R3             0x80                128
"""

# NVIDIA/cuda-gdb#18 (cuda-gdb 12.1): a focus switch onto an NCCL kernel, frame with the
# "in F inlined from FILE:LINE" tail.
ISSUE_18_SWITCH = """\
[Switching focus to CUDA kernel 0, grid 11534, block (0,0,0), thread (0,0,0), device 1, sm 0, warp 0, lane 0]
ncclFunction_AllGather_RING_SIMPLE_Sum_int8_t () at /data/nccl/src/collectives/device/./prims_simple.h:128 in _ZN10PrimitivesIa7FuncSumIaE12FanSymmetricILi1EELi1E11ProtoSimpleILi2ELi2ELi4ELi0ELi0EELi0EE8waitPeerILi1ELi0ELi1ELi0ELi0ELi1EEEvllii inlined from prims_simple.h:227
128           while (connStepCache + (isSendNotRecv ? NCCL_STEPS : 0) < step + StepPerSlice) {
"""


def test_load_exception_first():
    load, problems = parse.load(VLLM_IMA)
    assert problems == []
    assert load.exception == "Warp Illegal Address"
    assert load.triggered_pc == "0x7f31abb9f6d0"
    assert load.triggered_function == "illegalMemoryAccessKernel(int*, int)"
    focus = load.focus
    assert (focus.kernel, focus.grid, focus.block_idx, focus.thread_idx) == (0, 1, (0, 0, 0), (0, 0, 0))
    assert (focus.device, focus.sm, focus.warp, focus.lane) == (0, 124, 0, 0)
    assert load.frame.pc == "0x00007f31abb9f6e0"
    assert load.frame.function == "illegalMemoryAccessKernel(int*, int)"
    assert load.frame.launch == "<<<(1,1,1),(256,1,1)>>>"


def test_load_template_kernel():
    load, _ = parse.load(VLLM_GRAPH)
    assert load.focus.block_idx == (17454, 0, 0) and load.focus.warp == 1 and load.focus.grid == 9
    assert load.frame.function.startswith("void at::native::vectorized_elementwise_kernel<4, ")
    assert load.frame.function.endswith("std::array<char*, 1ul>)")
    assert load.frame.launch == "<<<(40960,1,1),(128,1,1)>>>"
    assert load.triggered_function == load.frame.function


def test_load_without_exception():
    load, problems = parse.load(VLLM_HANG)
    assert problems == [] and load.exception is None and load.triggered_pc is None
    assert load.focus.grid == 53
    assert (load.frame.file, load.frame.line) == ("conditional_hang.py", 31)
    assert load.frame.function == "conditional_hang_kernel"


def test_load_focus_first_and_wrapped_inlined_frame():
    load, _ = parse.load(VLLM_INLINED)
    assert load.exception == "Warp Illegal Address" and load.focus.warp == 3
    assert load.triggered_pc == "0x7ff533bb91d0"
    frame = load.frame
    assert frame.pc is None and frame.launch == "<<<(1,1,1),(128,1,1)>>>"
    assert frame.file == "/data/youkaichao/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu"
    assert frame.line == 203
    assert frame.inlined.endswith("inlined from IndexKernel.cu:118")
    assert frame.inlined.startswith("_ZZN2at6native17index_kernel_implINS0_10OpaqueTypeILi1EEEEEvRNS_18Tensor")
    assert frame.function.startswith("void at::native::index_elementwise_kernel<128, 4, at::native::")
    assert "(at::TensorIteratorBase&, c10::ArrayRef<long>" in frame.function  # joined mid-word


def test_load_older_trigger_line_and_signal():
    load, _ = parse.load(ZDEVITO_LOAD)
    assert load.triggered_pc == "0x7ff8b63ce440" and load.triggered_function is None
    assert load.focus.thread_idx == (0, 1, 0) and load.focus.grid == 132575338
    docs, _ = parse.load(DOCS_EXCEPTION)
    assert docs.signal == "CUDA_EXCEPTION_14" and docs.exception == "Warp Illegal Address"
    assert docs.triggered_source == "memexceptions_kernel.cu:17" and docs.triggered_function is None
    assert (docs.frame.file, docs.frame.line, docs.frame.pc) == ("memexceptions_kernel.cu", 50,
                                                                 "0x0000555555c08fb0")
    assert docs.frame.function == "exception_kernel"


@pytest.mark.parametrize("text,kind", [
    # gdb/cuda/cuda-corelow.c: the error() texts of cuda_core_load_api and target open
    ("Opening GPU coredump: x\nFailed to read core file: Invalid ELF header\n", "cannot-read-dump"),
    ("Opening GPU coredump: x\nFailed to read core file: unsupported ELF ABI version 8\n", "format-too-new"),
    ("Could not open CUDA core file: Failed to initialize CUDA Core debugger API!\n", "cannot-read-dump"),
    ('Undefined target command: "cudacore core.nvcudmp".  Try "help target".\n', "not-cuda-gdb"),
    ("/tmp/x.nvcudmp: No such file or directory.\n", "cannot-read-dump"),
    # real cuda-gdb 12.4, `target cudacore nothere`
    ("Opening GPU coredump: nothere\nFailed to read core file: elfOpenByName() failed: Could not "
     "open file 'nothere': No such file or directory\n", "cannot-read-dump"),
])
def test_load_failures(text, kind):
    load, problems = parse.load(text)
    assert [p.kind for p in problems] == [kind]
    assert problems[0].message in text
    assert parse.unlisted_sources(text) == []


def test_a_source_file_gdb_cannot_list_is_no_failure():
    """Real cuda-gdb 12.4 opening an H200 dump whose line table names the build machine's file
    (fixtures/gpu/h200/null_argument.explain; its folder written /build/kernels here): gdb's
    listing of frame #0's line, "LINE<TAB>FILE: strerror." (source.c), says the file is not
    here, not that the dump was not read."""
    text = ("Opening GPU coredump: core.1116.nvcudmp\n"
            "warning: CUDA ELF Image contains unknown ABI version: 8\n\n"
            "CUDA Exception: Warp Illegal Address\n"
            "The exception was triggered at PC 0x7f56bf7a0090 (null_argument.cu:6)\n"
            "[Current focus set to CUDA kernel 0, grid 1, block (0,0,0), thread (0,0,0), device 0, "
            "sm 124, warp 0, lane 0]\n"
            "#0  0x00007f56bf7a00b0 in scale_rows<<<(1,1,1),(64,1,1)>>> () at /build/kernels/null_argument.cu:6\n"
            "6\t/build/kernels/null_argument.cu: No such file or directory.\n")
    load, problems = parse.load(text)
    assert problems == []
    assert load.exception == "Warp Illegal Address" and load.frame.line == 6
    assert parse.unlisted_sources(text + text) == ["/build/kernels/null_argument.cu"]


def test_unknown_exception_is_a_problem():
    # vllm-project/vllm#54317 and cuda-exceptions.c: an exception code the debugger does not know
    text = ("warning: Encountered unhandled device exception (36)\n\n"
            "CUDA Exception: Device Unknown Exception\n")
    load, problems = parse.load(text)
    assert load.exception == "Device Unknown Exception"
    assert [p.kind for p in problems] == ["unknown-exception"] and "(code 36)" in problems[0].message


def test_focus_switch_and_inlined_frame():
    switched, _ = parse.load(ISSUE_18_SWITCH)
    focus, frame = switched.focus, switched.frame
    assert (focus.device, focus.grid, focus.sm) == (1, 11534, 0)
    assert frame.function == "ncclFunction_AllGather_RING_SIMPLE_Sum_int8_t"
    assert (frame.file, frame.line) == ("/data/nccl/src/collectives/device/./prims_simple.h", 128)
    assert frame.inlined.endswith("inlined from prims_simple.h:227")


def test_cluster_focus_and_query_line():
    # cuda-coords.c to_string(): the cluster part appears only on cluster launches
    text = ("[Current focus set to CUDA kernel 0, grid 5, cluster (1,0,0), block (2,0,0), "
            "thread (3,0,0), device 0, sm 4, warp 5, lane 3]")
    focus = parse.focus_line(text)
    assert focus.cluster_idx == (1, 0, 0) and focus.block_idx == (2, 0, 0) and focus.lane == 3
    query = parse.coordinates("kernel 0, grid 1, block (0,0,0), thread (0,0,0), device 0, sm 0, warp 0, lane 0")
    assert query.grid == 1 and query.thread_idx == (0, 0, 0)
    assert parse.coordinates("Focus is not set on any active CUDA kernel.") is None


def test_disassembly_markers():
    listing = parse.disassembly(DOCS_X4I)
    assert [i.marker for i in listing] == ["", "", "", "=>"]
    assert listing[3].address == "0xa689c8" and listing[3].function == "acos_main(acosParams)"
    assert listing[3].offset == 856 and listing[3].text == "MOV R0, c[0x0][0x28]"
    errorpc = parse.disassembly(DOCS_DISAS_ERRORPC)
    assert len(errorpc) == 1 and errorpc[0].marker == "*>"
    assert errorpc[0].function == "_Z16exception_kernelPv11exception_t" and errorpc[0].offset == 1056
    disas = parse.disassembly(ZDEVITO_DISAS)
    assert [i.offset for i in disas] == [1056, 1072, 1088, 1104] and disas[2].function is None
    assert disas[2].text == "LDG.E.U8.SYS R19, [R2+0xe0]"
    both = parse.disassembly("*=> 0x00007fffd5043d40 <_Z9acos_main10acosParams+1856>:\tMOV R0, c[0x0][0xc]")
    assert both[0].marker == "*=>"


def test_registers():
    assert parse.registers(DOCS_REGISTERS) == {"R0": 0xF0, "R1": 0xFFFC48, "R2": 0x7800, "R3": 0x80}
    regs = parse.registers(ZDEVITO_REGISTERS)
    assert regs["R2"] == 0xFF800000 and regs["R8"] == 0x407CE000 and len(regs) == 9


def test_cli_tables():
    kernels = parse.kernels_table(DOCS_KERNELS)
    assert len(kernels) == 1
    k = kernels[0]
    assert (k.kernel, k.device, k.grid, k.status, k.current) == (1, 0, 2, "Active", True)
    assert (k.grid_dim, k.block_dim, k.name, k.args) == ((240, 1, 1), (128, 1, 1), "acos_main", "parms=...")
    # cuda-commands.c today: the last column is "Invocation", name(args)
    modern = parse.kernels_table(
        "  Kernel Parent Dev Grid Status SMs Mask   GridDim  BlockDim Invocation\n"
        "*      0      -   0    1 Active 0x00000001 (4,1,1) (256,1,1) write_past_end(data=0x7f00, n=1024)\n")
    assert modern[0].name == "write_past_end" and modern[0].args == "data=0x7f00, n=1024"
    assert parse.current_lane_exception(DOCS_LANES) == "None"
    lanes = DOCS_LANES.replace("*  0 active 0x00007fffc725dad0 (0,0,0)   None",
                               "*  0 active 0x00007fffc725dad0 (0,0,0)   Warp Illegal Address")
    assert parse.current_lane_exception(lanes) == "Warp Illegal Address"


# MI records. Focus: NVIDIA/nsight-vscode-edition (quoted in the reference) and cuda-coords.c
# emit_mi_output(); tables: cuda-commands.c (InfoCudaKernelsTable / InfoCudaLanesTable fields).
MI_FOCUS = ('^done,CudaFocus={device="0",sm="124",warp="0",lane="0",kernel="0",grid="1",'
            'blockIdx="(0,0,0)",threadIdx="(0,0,0)"}')
MI_KERNELS = ('^done,InfoCudaKernelsTable={nr_rows="1",nr_cols="10",hdr=[{width="1",alignment="1",'
              'col_name="current",colhdr=" "},{width="6",alignment="1",col_name="kernel",colhdr="Kernel"}],'
              'body=[InfoCudaKernelsRow={current="*",kernel="0",parent="-",device="0",grid="1",'
              'status="Active",sms_mask="0x00000001",gridDim="(4,1,1)",blockDim="(256,1,1)",'
              'invocation="write_past_end(data=0x7f0000000000, n=1024)"}]}')
MI_LANES = ('^done,InfoCudaLanesTable={nr_rows="2",nr_cols="6",hdr=[],body=['
            'InfoCudaLanesRow={current=" ",lane="0",state="active",physical_pc="0x0000000000000080",'
            'threadIdx="(0,0,0)",exception="None"},InfoCudaLanesRow={current="*",lane="1",state="active",'
            'physical_pc="0x0000000000000080",threadIdx="(1,0,0)",exception="Warp Illegal Address"}]}')


def test_mi_records():
    focus = mi.focus(mi.result("~\"noise\"\n" + MI_FOCUS + "\n").payload)
    assert (focus.sm, focus.block_idx, focus.kernel) == (124, (0, 0, 0), 0)
    partial = mi.focus(mi.result('^done,CudaFocus={blockIdx="(0,0,0)",threadIdx="(0,0,0)"}').payload)
    assert partial.block_idx == (0, 0, 0) and partial.device is None
    kernels = mi.kernels(mi.result(MI_KERNELS).payload)
    assert [(k.kernel, k.name, k.args, k.grid_dim) for k in kernels] == [
        (0, "write_past_end", "data=0x7f0000000000, n=1024", (4, 1, 1))]
    assert mi.current_lane_exception(mi.result(MI_LANES).payload) == "Warp Illegal Address"
    error = mi.result('^error,msg="Invalid coordinates requested. CUDA focus unchanged."')
    assert not error.ok and not error.undefined and "Invalid coordinates" in error.error
    assert mi.result("no record here") is None


def test_unterminated_mi_record_does_not_hang():
    """pygdbmi loops forever on a list that never closes; crashlab must not hand it one."""
    code = ("from crashlab.gdb import mi; "
            "print(mi.result('^done,a=[{b=\"1\"}'), mi.result('^done,a=[b=\"1\",'), mi.well_formed('^done,a=[]'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["None", "None", "True"], done.stderr


@pytest.mark.skipif(shutil.which("gdb") is None, reason="needs GNU gdb (installed by .ci/run)")
def test_real_gnu_gdb_output(host_crash):
    """bt, x/i, info line, info registers and MI records as real GNU gdb prints them."""
    exe, core = host_crash
    with Debugger(shutil.which("gdb"), [str(exe), str(core)]) as gdb:
        assert gdb.start().ok
        frames = parse.backtrace(gdb.run("bt").output)
        depth = [f for f in frames if f.function == "depth"]
        assert len(depth) == 4 and depth[0].file.endswith("crash.c") and depth[0].line == 3
        assert frames[-1].function == "main" and frames[-1].line == 4
        assert all(f.pc for f in frames[1:])
        assert gdb.run("frame 3").ok
        listing = parse.disassembly(gdb.run("x/4i $pc").output)
        assert [i.marker for i in listing] == ["=>", "", "", ""] and listing[0].function == "depth"
        pc = mi.value(mi.result(gdb.run('interpreter-exec mi "-data-evaluate-expression (long)$pc"').output).payload)
        assert int(listing[0].address, 16) == pc
        [(file, line)] = parse.line_info(gdb.run("info line *$pc").output)
        assert file.endswith("crash.c") and line == 3
        assert parse.registers(gdb.run("info registers").output)["rip"] == pc
        undefined = mi.result(gdb.run('interpreter-exec mi "-cuda-info-kernels"').output)
        assert undefined.undefined
        cudacore, problems = parse.load(gdb.run(f"target cudacore {core}").output)
        assert [p.kind for p in problems] == ["not-cuda-gdb"]
