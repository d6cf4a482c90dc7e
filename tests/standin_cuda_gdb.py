"""STAND-IN for cuda-gdb, for tests only: there is no cuda-gdb and no GPU on CI machines.

It is a CLI program that reads commands on a terminal and answers with output shapes taken from
public transcripts, so that crashlab's real pexpect driver, readers, triage flow and cross-check
run end to end behind a real pty. It reads no dump: the values it prints are the ones a test
planted in a SYNTHETIC dump (tests/scenarios.py), given as JSON in $STANDIN_SCENARIO. Sources of
the shapes:
- banner of ``show version``: NVIDIA/cuda-gdb#18 (cuda-gdb 12.1);
- ``target cudacore``: vllm-project.github.io _posts/2025-08-11-cuda-debugging.md (exception
  first) and _posts/2025-12-03-improved-cuda-debugging.md (focus first); the failure line is
  cuda-corelow.c's ``Failed to read core file: %s``;
- MI records: cuda-coords.c emit_mi_output() (CudaFocus), cuda-commands.c
  (InfoCudaKernelsTable, InfoCudaLanesTable), cuda-commands.c cuda_command_switch()
  ("Invalid coordinates requested. CUDA focus unchanged.");
- ``bt``, ``x/Ni`` markers, ``info registers``: the CUDA-GDB documentation §8.4-8.5;
- ``info line``: GNU gdb's sentence.
The real counterpart is tests/test_gpu_debugger.py (marker ``gpu``), which runs real cuda-gdb.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time


def _dim(values) -> str:
    return "(" + ",".join(str(v) for v in values) + ")"


def _focus_text(s) -> str:
    return (f"kernel 0, grid {s['grid']}, block {_dim(s['block'])}, thread {_dim(s['thread'])}, "
            f"device {s['device']}, sm {s['sm']}, warp {s['warp']}, lane {s['lane']}")


def _mi_focus(s) -> str:
    return (f'CudaFocus={{device="{s["device"]}",sm="{s["sm"]}",warp="{s["warp"]}",lane="{s["lane"]}",'
            f'kernel="0",grid="{s["grid"]}",blockIdx="{_dim(s["block"])}",threadIdx="{_dim(s["thread"])}"}}')


def _load(s, path: str) -> str:
    opening = f"Opening GPU coredump: {path}\n"
    if s.get("load_error"):
        return opening + s["load_error"] + "\n"
    try:
        with open(path, "rb") as dump:
            magic = dump.read(4)
    except OSError:
        magic = b""
    if magic != b"\x7fELF":  # like cuda-gdb, it cannot open what is not an ELF file (gzip, ...)
        return opening + "Failed to read core file: not an ELF core file\n"
    exception = (f"\nCUDA Exception: {s['exception']}\n"
                 f"The exception was triggered at PC {s['pc']:#x}  {s['name']}  ({s['file']}:{s['line']})\n")
    focus = f"[Current focus set to CUDA {_focus_text(s)}]\n"
    frame = (f"#0  {s['current_pc']:#018x} in {s['short']}<<<{_dim(s['grid_dim'])},{_dim(s['block_dim'])}>>> "
             f"(data=0x7f0000000000, n=1024) at {s['file']}:{s['line']}\n{s['line']}\t  data[idx] = idx;\n")
    ordered = focus + exception if s.get("order") == "focus-first" else exception + focus
    return opening + ordered + frame


def _disassembly(s) -> str:
    lines = []
    for i in range(17):
        address = s["pc"] - 0x80 + 16 * i
        marker = {(True, True): "*=>", (True, False): "*>", (False, True): "=>"}.get(
            (address == s["pc"], address == s["current_pc"]), "   ")
        offset = address - s["entry"]
        text = "STG.E desc[UR4][R2.64], R5" if address == s["pc"] else "NOP"
        lines.append(f"{marker} {address:#018x} <{s['mangled']}+{offset}>:\t{text}")
    return "\n".join(lines) + "\n"


def answer(s, command: str) -> str:
    mi = re.match(r'^interpreter-exec mi "(.*)"$', command)
    if mi:
        return _answer_mi(s, mi.group(1).replace('\\"', '"'))
    if command == "show version":
        return ("NVIDIA (R) CUDA Debugger\nCUDA Toolkit 12.1 release\n"
                "Portions Copyright (C) 2007-2023 NVIDIA Corporation\nGNU gdb (GDB) 12.1\n")
    if command.startswith("target cudacore "):
        return _load(s, command.split(" ", 2)[2])
    if command == "bt":
        return (f"#0  {s['current_pc']:#018x} in {s['short']}<<<{_dim(s['grid_dim'])},{_dim(s['block_dim'])}>>> "
                f"(data=0x7f0000000000, n=1024) at {s['file']}:{s['line']}\n")
    if command.startswith("x/17i $errorpc"):
        return _disassembly(s)
    if command == "info line *$errorpc":
        offset = s["pc"] - s["entry"]
        return (f'Line {s["line"]} of "{s["file"]}" starts at address {s["pc"]:#x} <{s["mangled"]}+{offset}> '
                f'and ends at {s["pc"] + 16:#x} <{s["mangled"]}+{offset + 16}>.\n')
    if command == "info registers":
        return "".join(f"R{i:<14}{v:<#20x}{v}\n" for i, v in enumerate(s["registers"]))
    return f'Undefined command: "{command.split()[0]}".  Try "help".\n'


def _answer_mi(s, command: str) -> str:
    if command == "-cuda-info-kernels":
        return ('^done,InfoCudaKernelsTable={nr_rows="1",nr_cols="10",hdr=[],body=[InfoCudaKernelsRow={'
                f'current="*",kernel="0",parent="-",device="{s["device"]}",grid="{s["grid"]}",status="Active",'
                f'sms_mask="0x00000001",gridDim="{_dim(s["grid_dim"])}",blockDim="{_dim(s["block_dim"])}",'
                f'invocation="{s["short"]}(data=0x7f0000000000, n=1024)"}}]}}\n')
    if command.startswith("-cuda-focus-query"):
        return f"^done,{_mi_focus(s)}\n"
    if command.startswith("-cuda-focus-switch"):
        wanted = [int(v) for v in re.findall(r"\d+", command)]
        if wanted != [s["device"], s["sm"], s["warp"], s["lane"]]:
            return '^error,msg="Invalid coordinates requested. CUDA focus unchanged."\n'
        return f"^done,{_mi_focus(s)}\n"
    if command == "-cuda-info-lanes":
        return ('^done,InfoCudaLanesTable={nr_rows="1",nr_cols="6",hdr=[],body=[InfoCudaLanesRow={'
                f'current="*",lane="{s["lane"]}",state="active",physical_pc="{s["pc"] - s["entry"]:#018x}",'
                f'threadIdx="{_dim(s["thread"])}",exception="{s["exception"]}"}}]}}\n')
    if command == "-data-evaluate-expression (long)$errorpc":
        return f'^done,value="{s["pc"]}"\n'
    return f'^error,msg="Undefined MI command: {command.split()[0][1:]}",code="undefined-command"\n'


def main() -> None:
    with open(os.environ["STANDIN_SCENARIO"]) as handle:
        scenario = json.load(handle)
    args = sys.argv[1:]
    prompt = "(cuda-gdb) "
    for flag, value in zip(args, args[1:]):
        if flag == "-iex" and value.startswith("set prompt "):
            prompt = value[len("set prompt "):]
    while True:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line or line.strip() == "quit":
            return
        command = line.strip()
        if command == scenario.get("die_on"):
            os.kill(os.getpid(), signal.SIGKILL)
        if command == scenario.get("hang_on"):
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a hang that Ctrl-C does not end
            time.sleep(3600)
        sys.stdout.write(answer(scenario, command))


if __name__ == "__main__":
    main()
